/**
 * The simulator's replicated state machine: a hash chain over applied entries plus the membership as of
 * the applied index. Snapshots encode (index, hash, count) followed by filler bytes derived from the hash,
 * so a mis-assembled snapshot is detected on install.
 */
import { copyConfState } from '../memory-log.js';
import type { ConfState, Entry } from '../types.js';

export interface SmState {
  index: number;
  hash: number;
  /** Normal entries applied. */
  count: number;
  conf: ConfState;
}

export function fnv1a(data: Uint8Array, seed = 0x811c9dc5): number {
  let h = seed >>> 0;
  for (let i = 0; i < data.byteLength; i++) {
    h ^= data[i] as number;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

function mix(h: number, v: number): number {
  h ^= v >>> 0;
  h = Math.imul(h, 0x01000193) >>> 0;
  h ^= h >>> 15;
  return Math.imul(h, 0x2c1b3c6d) >>> 0;
}

const TYPE_CODE = { normal: 1, conf: 2, noop: 3 } as const;

/** Identity of an entry's content (type + payload). */
export function entryDataHash(e: Entry): number {
  return mix(fnv1a(e.data), TYPE_CODE[e.type]);
}

/** The state hash after applying `e` on top of `hash`. */
export function chainHash(hash: number, e: Entry, dataHash: number): number {
  return mix(mix(mix(hash, e.index), e.term), dataHash);
}

const HEADER_BYTES = 16;

export function encodeSnapshotData(st: SmState, fillerMaxBytes: number): Uint8Array {
  const filler = fillerMaxBytes > 0 ? st.hash % (fillerMaxBytes + 1) : 0;
  const out = new Uint8Array(HEADER_BYTES + filler);
  const view = new DataView(out.buffer);
  view.setUint32(0, st.index);
  view.setUint32(4, st.hash);
  view.setUint32(8, st.count);
  view.setUint32(12, filler);
  for (let k = 0; k < filler; k++) out[HEADER_BYTES + k] = (st.hash + k * 31) & 0xff;
  return out;
}

/** Decodes and verifies snapshot data; throws on any corruption. */
export function decodeSnapshotData(data: Uint8Array, conf: ConfState): SmState {
  if (data.byteLength < HEADER_BYTES) throw new Error(`snapshot data too short (${data.byteLength} bytes)`);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const index = view.getUint32(0);
  const hash = view.getUint32(4);
  const count = view.getUint32(8);
  const filler = view.getUint32(12);
  if (data.byteLength !== HEADER_BYTES + filler) throw new Error('snapshot data length mismatch');
  for (let k = 0; k < filler; k++) {
    if (data[HEADER_BYTES + k] !== ((hash + k * 31) & 0xff)) throw new Error(`snapshot data corrupted at byte ${k}`);
  }
  return { index, hash, count, conf: copyConfState(conf) };
}

export function encodeProposal(id: number, padBytes: number): Uint8Array {
  const out = new Uint8Array(4 + padBytes);
  new DataView(out.buffer).setUint32(0, id);
  for (let k = 0; k < padBytes; k++) out[4 + k] = (id * 7 + k) & 0xff;
  return out;
}

export function decodeProposalId(data: Uint8Array): number {
  if (data.byteLength < 4) throw new Error('proposal payload too short');
  return new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(0);
}
