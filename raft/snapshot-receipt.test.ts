import { describe, expect, it } from 'vitest';
import { concatBytes, MemorySink, SnapshotReceipt } from './snapshot-receipt.js';
import type { SnapshotChunk, SnapshotMeta } from './types.js';

class Refused extends Error {}

const META: SnapshotMeta = {
  index: 10,
  term: 2,
  conf: { voters: ['a'], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false },
};

function chunk(offset_bytes: number, bytes: number[], meta: SnapshotMeta = META): SnapshotChunk {
  return { meta, offset_bytes, data: Uint8Array.from(bytes), done: false };
}

function receipt(): { r: SnapshotReceipt<MemorySink>; opened: MemorySink[] } {
  const opened: MemorySink[] = [];
  const r = new SnapshotReceipt<MemorySink>((reason) => new Refused(reason));
  return { r, opened };
}

function feed(r: SnapshotReceipt<MemorySink>, c: SnapshotChunk, opened: MemorySink[] = []) {
  const got = r.accept(c, () => {
    const s = new MemorySink();
    opened.push(s);
    return s;
  });
  got.sink.write(c.data);
  return got;
}

describe('SnapshotReceipt', () => {
  it('a chunk at offset 0 starts a snapshot; chunks continuing it exactly are taken in order', () => {
    const { r, opened } = receipt();
    expect(r.sink).toBeNull();
    const first = feed(r, chunk(0, [1, 2]), opened);
    expect(first.abandoned).toBeNull();
    expect(feed(r, chunk(2, [3]), opened).sink).toBe(first.sink);
    expect(opened).toHaveLength(1);
    expect(r.sink?.size_bytes).toBe(3);
    const sink = r.take({ meta: META, size_bytes: 3 });
    expect(Array.from(sink.bytes())).toEqual([1, 2, 3]);
    expect(r.sink).toBeNull();
  });

  it('refuses a chunk past offset 0 with no snapshot started', () => {
    const { r } = receipt();
    expect(() => feed(r, chunk(4, [1]))).toThrow(Refused);
    expect(() => feed(r, chunk(4, [1]))).toThrow(/chunk at 4 of snapshot 10 without its start/);
  });

  it("refuses another snapshot's chunk (other index or other term) and leaves the current one intact", () => {
    const { r } = receipt();
    feed(r, chunk(0, [1, 2]));
    expect(() => feed(r, chunk(2, [3], { ...META, index: 11 }))).toThrow(/without its start/);
    expect(() => feed(r, chunk(2, [3], { ...META, term: 3 }))).toThrow(Refused);
    feed(r, chunk(2, [3]));
    expect(r.sink?.size_bytes).toBe(3);
  });

  it('refuses an offset gap or overlap, naming the expected offset', () => {
    const { r } = receipt();
    feed(r, chunk(0, [1, 2]));
    expect(() => feed(r, chunk(3, [4]))).toThrow(/chunk at 3, expected 2/);
    expect(() => feed(r, chunk(1, [2]))).toThrow(/chunk at 1, expected 2/);
    expect(r.sink?.size_bytes).toBe(2);
  });

  it('a new offset-0 chunk restarts, handing back the partial snapshot as abandoned', () => {
    const { r, opened } = receipt();
    feed(r, chunk(0, [1, 2]), opened);
    const other: SnapshotMeta = { ...META, index: 20, term: 3 };
    const again = feed(r, chunk(0, [9], other), opened);
    expect(again.abandoned).toBe(opened[0]);
    expect(again.sink).toBe(opened[1]);
    expect(() => r.received({ meta: META, size_bytes: 2 })).toThrow(/snapshot at 10 was not received/);
    expect(Array.from(r.received({ meta: other, size_bytes: 1 }).bytes())).toEqual([9]);
  });

  it('refuses to hand over a snapshot not received in full, or not received at all', () => {
    const { r } = receipt();
    expect(() => r.received({ meta: META, size_bytes: 0 })).toThrow(/snapshot at 10 was not received/);
    feed(r, chunk(0, [1, 2]));
    expect(() => r.take({ meta: META, size_bytes: 3 })).toThrow(/snapshot at 10: received 2 of 3 bytes/);
    expect(() => r.received({ meta: { ...META, term: 1 }, size_bytes: 2 })).toThrow(Refused);
    // received() keeps it (the log forgets it only once recorded); clear() forgets it
    expect(r.received({ meta: META, size_bytes: 2 }).size_bytes).toBe(2);
    expect(r.sink).not.toBeNull();
    r.clear();
    expect(() => r.received({ meta: META, size_bytes: 2 })).toThrow(/was not received/);
  });

  it('an empty snapshot is one chunk of no bytes', () => {
    const { r } = receipt();
    feed(r, chunk(0, []));
    expect(r.take({ meta: META, size_bytes: 0 }).bytes().byteLength).toBe(0);
  });

  it('MemorySink copies what it is given', () => {
    const s = new MemorySink();
    const data = Uint8Array.from([5, 6]);
    s.write(data);
    data[0] = 0;
    expect(Array.from(s.bytes())).toEqual([5, 6]);
  });

  it('concatBytes joins parts and checks their total', () => {
    expect(Array.from(concatBytes([Uint8Array.from([1]), Uint8Array.from([2, 3])], 3))).toEqual([1, 2, 3]);
    expect(() => concatBytes([Uint8Array.from([1])], 2)).toThrow(RangeError);
  });
});
