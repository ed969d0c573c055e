/** Small helpers shared by the core modules. No I/O, no global state. */
import { type Entry, entrySizeBytes } from '../types.js';

/** Thrown when an internal invariant of the Raft core is violated (a bug, or a driver breaking the Ready contract). */
export class RaftInvariantError extends Error {
  constructor(message: string) {
    super(`raft: invariant violated: ${message}`);
    this.name = 'RaftInvariantError';
  }
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new RaftInvariantError(message);
}

/** The longest prefix of `ents` whose total size is at most `maxBytes`, but always at least one entry. */
export function limitSize(ents: Entry[], maxBytes: number): Entry[] {
  if (ents.length <= 1) return ents;
  let size = entrySizeBytes(ents[0] as Entry);
  let n = 1;
  for (; n < ents.length; n++) {
    size += entrySizeBytes(ents[n] as Entry);
    if (size > maxBytes) break;
  }
  return n === ents.length ? ents : ents.slice(0, n);
}

/** Sum of payload bytes (what counts against maxUncommittedBytes). */
export function payloadBytes(ents: readonly Entry[]): number {
  let n = 0;
  for (const e of ents) n += e.data.byteLength;
  return n;
}

export function bytesEqual(a: Uint8Array | undefined, b: Uint8Array | undefined): boolean {
  if (a === b) return true;
  if (!a || !b || a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Encodes a non-negative safe integer as 8 big-endian bytes (heartbeat read contexts). */
export function encodeU53(n: number): Uint8Array {
  assert(Number.isSafeInteger(n) && n >= 0, `encodeU53: ${n}`);
  const out = new Uint8Array(8);
  const view = new DataView(out.buffer);
  view.setUint32(0, Math.floor(n / 4294967296));
  view.setUint32(4, n >>> 0);
  return out;
}

/** Inverse of encodeU53; null when `b` is not an 8-byte encoding. */
export function decodeU53(b: Uint8Array | undefined): number | null {
  if (b?.byteLength !== 8) return null;
  const view = new DataView(b.buffer, b.byteOffset, 8);
  return view.getUint32(0) * 4294967296 + view.getUint32(4);
}
