import { describe, expect, it } from 'vitest';
import { msg } from '../core/testkit.js';
import type { Message, SnapshotMeta } from '../types.js';
import { MAX_QUEUED_SNAPSHOT_CHUNKS, SnapshotSender } from './snapshot-sender.js';

const conf = { voters: ['a', 'b'], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
const META: SnapshotMeta = { index: 9, term: 2, conf };
const DATA = Uint8Array.from({ length: 25 }, (_, i) => i);

function chunk(to: string, offset_bytes: number, meta = META): Message {
  const done = offset_bytes + 10 >= DATA.byteLength;
  return msg({
    type: 'snapshot',
    from: 'a',
    to,
    term: 2,
    snapshot: { meta, offset_bytes, data: new Uint8Array(0), done },
  });
}

function harness(read: (meta: SnapshotMeta, off: number, max: number) => Promise<Uint8Array | null>) {
  const sent: Message[] = [];
  const gone: string[] = [];
  const failed: Error[] = [];
  const sender = new SnapshotSender({
    read,
    chunk_bytes: 10,
    send: (m) => sent.push(m),
    gone: (to) => gone.push(to),
    failed: (err) => failed.push(err),
  });
  return { sender, sent, gone, failed };
}

const settle = () => new Promise((r) => setTimeout(r, 5));

describe('SnapshotSender', () => {
  it('sends each chunk with its bytes read from the log, in order', async () => {
    const h = harness(async (_meta, off, max) => DATA.subarray(off, off + max));
    for (const off of [0, 10, 20]) h.sender.enqueue(chunk('b', off));
    await settle();
    expect(h.sent.map((m) => [m.snapshot!.offset_bytes, [...m.snapshot!.data]])).toEqual([
      [0, [...DATA.subarray(0, 10)]],
      [10, [...DATA.subarray(10, 20)]],
      [20, [...DATA.subarray(20, 25)]],
    ]);
  });

  it('drops a stream whose snapshot is gone (the rest of it too) and says so once', async () => {
    const h = harness(async (meta, off, max) => (meta.index === 9 ? null : DATA.subarray(off, off + max)));
    h.sender.enqueue(chunk('b', 0));
    h.sender.enqueue(chunk('b', 10));
    h.sender.enqueue(chunk('c', 0, { ...META, index: 12 }));
    await settle();
    expect(h.gone).toEqual(['b']);
    expect(h.sent.map((m) => m.to)).toEqual(['c']);
  });

  it('bounds its queue: beyond it chunks are dropped (the stream rewinds to what the follower holds)', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const h = harness(async (_meta, off, max) => {
      await gate;
      return DATA.subarray(off, off + max);
    });
    // The first is being read; the queue holds MAX_QUEUED_SNAPSHOT_CHUNKS more.
    for (let i = 0; i < MAX_QUEUED_SNAPSHOT_CHUNKS + 5; i++) h.sender.enqueue(chunk('b', 0));
    expect(h.sender.queued).toBe(MAX_QUEUED_SNAPSHOT_CHUNKS);
    expect(h.sender.dropped).toBe(4);
    release();
    await settle();
    expect(h.sent).toHaveLength(MAX_QUEUED_SNAPSHOT_CHUNKS + 1);
  });

  it('reports a failing read and stops; after stop() nothing is sent', async () => {
    const h = harness(async () => {
      throw new Error('disk read failed');
    });
    h.sender.enqueue(chunk('b', 0));
    await settle();
    expect(h.failed.map((e) => e.message)).toEqual(['disk read failed']);
    const ok = harness(async (_m, off, max) => DATA.subarray(off, off + max));
    ok.sender.stop();
    ok.sender.enqueue(chunk('b', 0));
    await settle();
    expect(ok.sent).toEqual([]);
  });
});
