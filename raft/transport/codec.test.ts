import { describe, expect, it } from 'vitest';
import type { Message } from '../types.js';
import { decodeFrame, encodeMessage, FrameError, roundTrip } from './codec.js';

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
