import { describe, expect, it } from 'vitest';
import { encodeAddresses } from '../node/conf-context.js';
import { type Entry, entrySizeBytes, type Message } from '../types.js';
import {
  decodeFrame,
  encodeMessage,
  FrameError,
  MAX_SNAPSHOT_ADDRESS_BYTES,
  MESSAGE_OVERHEAD_BYTES,
  roundTrip,
} from './codec.js';

const full: Message = {
  type: 'snapshot',
  from: 'a',
  to: 'b',
  term: 7,
  logTerm: 6,
  index: 41,
  entries: [
    { index: 42, term: 6, type: 'noop', data: new Uint8Array() },
    { index: 43, term: 7, type: 'conf', data: new Uint8Array([1, 2]) },
    { index: 44, term: 7, type: 'normal', data: new Uint8Array([3]) },
  ],
  commit: 40,
  reject: true,
  rejectHint: 39,
  rejectTerm: 5,
  snapshot: {
    meta: {
      index: 40,
      term: 6,
      conf: { voters: ['a', 'b'], learners: ['c'], votersOutgoing: ['x'], learnersNext: [], autoLeave: true },
    },
    offset_bytes: 1024,
    data: new Uint8Array([9, 8, 7]),
    done: false,
  },
  context: new Uint8Array([0, 1]),
};

const norm = (m: Message): unknown =>
  JSON.parse(
    JSON.stringify(m, (_k, v: unknown) => {
      if (v instanceof Uint8Array) return [...v];
      const b = v as { type?: unknown; data?: unknown } | null;
      return b !== null && typeof b === 'object' && b.type === 'Buffer' && Array.isArray(b.data) ? b.data : v;
    }),
  );

describe('wire codec', () => {
  it('round-trips every field', () => {
    expect(norm(roundTrip(full))).toEqual(norm(full));
    const minimal: Message = { ...full, entries: [], reject: false };
    delete minimal.snapshot;
    delete minimal.context;
    delete minimal.rejectTerm;
    const back = roundTrip(minimal);
    expect(norm(back)).toEqual(norm(minimal));
    expect('snapshot' in back || 'context' in back || 'rejectTerm' in back).toBe(false);
  });

  it('decodes several messages per frame and refuses malformed ones', () => {
    const frame = Buffer.concat([encodeMessage(full), encodeMessage({ ...full, index: 99 })]);
    expect(decodeFrame(frame, 10).map((m) => m.index)).toEqual([41, 99]);
    expect(() => decodeFrame(frame, 1)).toThrow(FrameError);
    expect(() => decodeFrame(Buffer.from([0x93, 1, 2, 3]), 10)).toThrow(/not a raft message/);
    const bad = encodeMessage({ ...full, term: -1 });
    expect(() => decodeFrame(bad, 10)).toThrow(/malformed/);
    expect(() => decodeFrame(Buffer.from([0xc1]), 10)).toThrow(FrameError);
  });
});

describe('MESSAGE_OVERHEAD_BYTES', () => {
  // Worst cases for the framing on top of a payload of at most `limit` bytes as the core counts them: maximal
  // integers everywhere, long ids, many tiny entries (per-entry framing) or one huge entry, and a snapshot chunk
  // of a large configuration.
  const MAX = Number.MAX_SAFE_INTEGER;
  const id = (i: number): string => `node-${i}-`.padEnd(128, 'x');
  const base: Message = {
    type: 'append',
    from: id(1),
    to: id(2),
    term: MAX,
    logTerm: MAX,
    index: MAX - 100_000,
    entries: [],
    commit: MAX,
    reject: true,
    rejectHint: MAX,
    rejectTerm: MAX,
    context: new Uint8Array(1024),
  };
  const limit = 64 * 1024;

  it('bounds an append whose entries fit maxMsgBytes, however they are split', () => {
    for (const dataBytes of [0, 1, 100, limit - 16]) {
      const entries: Entry[] = [];
      let size = 0;
      for (let i = 1; ; i++) {
        const e: Entry = { index: base.index + i, term: MAX, type: 'conf', data: new Uint8Array(dataBytes) };
        if (size + entrySizeBytes(e) > limit) break;
        entries.push(e);
        size += entrySizeBytes(e);
      }
      expect(entries.length).toBeGreaterThan(0);
      expect(encodeMessage({ ...base, entries }).length).toBeLessThanOrEqual(limit + MESSAGE_OVERHEAD_BYTES);
      // Each entry costs at most its counted size on the wire (the bound does not grow with the entry count).
      const one = encodeMessage({ ...base, entries: entries.slice(0, 1) }).length;
      const two = encodeMessage({ ...base, entries: entries.slice(0, 2) }).length;
      if (entries.length > 1) expect(two - one).toBeLessThanOrEqual(entrySizeBytes(entries[1]!));
    }
  });

  it('bounds a snapshot chunk of snapshotChunkBytes with a large configuration and its addresses', () => {
    const members = Array.from({ length: 32 }, (_, i) => id(i));
    const m: Message = {
      ...base,
      type: 'snapshot',
      snapshot: {
        meta: {
          index: MAX,
          term: MAX,
          conf: {
            voters: members.slice(0, 16),
            learners: members.slice(16),
            votersOutgoing: members.slice(0, 16),
            learnersNext: members.slice(16),
            autoLeave: true,
          },
        },
        offset_bytes: MAX,
        data: new Uint8Array(limit),
        done: true,
      },
      // the members' addresses (RaftNode.withAddresses)
      context: encodeAddresses(Object.fromEntries(members.map((m) => [m, 'a'.repeat(MAX_SNAPSHOT_ADDRESS_BYTES)]))),
    };
    expect(encodeMessage(m).length).toBeLessThanOrEqual(limit + MESSAGE_OVERHEAD_BYTES);
  });
});
