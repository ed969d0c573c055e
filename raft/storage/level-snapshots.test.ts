/**
 * The LevelDB log's snapshot records: written chunk by chunk under a generation of their own, recorded by one
 * synced batch; a half-written snapshot (a failed stream, a crash, an abandoned receive) never replaces the
 * recorded one and its records are deleted on the next open; logs written before generations still open.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ConfState, Entry } from '../types.js';
import { CHUNK_RANGE, chunkKey, decodeMeta, encodeMeta, KEY_SNAP_META } from './codec.js';
import { LogStateError } from './errors.js';
import { LevelLog } from './level-log.js';
import { RECORDS_PER_BATCH } from './level-snapshots.js';

const conf: ConfState = { voters: ['a'], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
const CHUNK = 1024;

function ents(from: number, to: number): Entry[] {
  const out: Entry[] = [];
  for (let i = from; i <= to; i++) out.push({ index: i, term: 1, type: 'normal', data: new Uint8Array([i]) });
  return out;
}

function bytes(n: number, seed: number): Uint8Array {
  return new Uint8Array(n).map((_, i) => (i * 31 + seed) & 0xff);
}

async function* pieces(
  data: Uint8Array,
  size: number,
  failAfter = Number.POSITIVE_INFINITY,
): AsyncGenerator<Uint8Array> {
  for (let off = 0, n = 0; off < data.byteLength; off += size, n++) {
    if (n >= failAfter) throw new Error('state machine stream broke');
    yield data.subarray(off, off + size);
  }
}

async function read(log: LevelLog): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of log.snapshotChunks()) parts.push(c);
  return Buffer.concat(parts);
}

function expectBytes(got: Uint8Array | null, want: Uint8Array): void {
  expect(got).not.toBeNull();
  expect(Buffer.from(got!).equals(Buffer.from(want)), `${got!.byteLength} bytes vs ${want.byteLength}`).toBe(true);
}

async function chunkKeys(path: string): Promise<string[]> {
  const db = new ClassicLevel<Buffer, Buffer>(path, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  await db.open();
  try {
    return (await db.keys(CHUNK_RANGE).all()).map((k) => k.toString('hex'));
  } finally {
    await db.close();
  }
}

describe('LevelLog snapshot records', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keel-level-snap-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('writes a streamed snapshot in records of the chunk size and reads any range back', async () => {
    const log = await LevelLog.open(dir, { snapshotChunk_bytes: CHUNK });
    await log.persist({ snapshot: null, entries: ents(1, 10), hardState: { term: 1, vote: 'a', commit: 10 } });
    const data = bytes(10 * CHUNK + 123, 1);
    const snap = await log.createSnapshot(8, conf, pieces(data, 700));
    expect(snap).toEqual({ meta: { index: 8, term: 1, conf }, size_bytes: data.byteLength });
    expectBytes(await read(log), data);
    for (const [off, max] of [
      [0, CHUNK],
      [CHUNK - 10, 30],
      [5 * CHUNK + 7, 3 * CHUNK],
      [data.byteLength - 5, CHUNK],
      [data.byteLength, CHUNK],
    ] as const) {
      const got = await log.readSnapshot(snap.meta, off, max);
      expectBytes(got, data.subarray(off, off + max));
    }
    expect(await log.readSnapshot({ ...snap.meta, index: 7 }, 0, CHUNK)).toBeNull();
    await log.close();
    expect(await chunkKeys(dir)).toHaveLength(11);
  });

  it('keeps the recorded snapshot when the stream fails midway and deletes the records it wrote', async () => {
    const log = await LevelLog.open(dir, { snapshotChunk_bytes: CHUNK });
    await log.persist({ snapshot: null, entries: ents(1, 10), hardState: { term: 1, vote: 'a', commit: 10 } });
    const first = bytes(3 * CHUNK, 2);
    await log.createSnapshot(5, conf, first);
    // Enough pieces that several synced batches of records are written before the stream breaks.
    const failed = log.createSnapshot(9, conf, pieces(bytes(20 * CHUNK, 3), CHUNK, 3 * RECORDS_PER_BATCH));
    await expect(failed).rejects.toThrow(LogStateError);
    expect(log.snapshot()?.meta.index).toBe(5);
    expectBytes(await read(log), first);
    // The log is not poisoned: later writes work.
    await log.append(ents(11, 11));
    await log.close();
    // The records written before the stream broke are deleted at once (open() would delete them too).
    expect(await chunkKeys(dir)).toHaveLength(3);
    const again = await LevelLog.open(dir, { snapshotChunk_bytes: CHUNK });
    expect(again.snapshot()?.meta.index).toBe(5);
    expectBytes(await read(again), first);
    await again.close();
    expect(await chunkKeys(dir)).toHaveLength(3);
  });

  it('lets other writes go on while a snapshot streams in, and refuses it if a newer one arrived meanwhile', async () => {
    const log = await LevelLog.open(dir, { snapshotChunk_bytes: CHUNK });
    await log.persist({ snapshot: null, entries: ents(1, 10), hardState: { term: 1, vote: 'a', commit: 10 } });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    async function* slow(): AsyncGenerator<Uint8Array> {
      yield bytes(5 * CHUNK, 7);
      await gate;
      yield bytes(10, 8);
    }
    const creating = log.createSnapshot(8, conf, slow());
    // Not queued behind the snapshot: a Ready's persist completes while the state machine is still streaming.
    await log.append(ents(11, 12));
    expect(log.lastIndex()).toBe(12);
    expect(log.snapshot()).toBeNull();
    release();
    expect((await creating).meta.index).toBe(8);

    const late = log.createSnapshot(12, conf, slow());
    // Meanwhile a newer snapshot is received and installed (as a follower would).
    const meta = { index: 20, term: 2, conf };
    await log.receiveSnapshot([{ meta, offset_bytes: 0, data: bytes(3, 9), done: true }]);
    await log.persist({
      snapshot: { meta, size_bytes: 3 },
      entries: [],
      hardState: { term: 2, vote: null, commit: 20 },
    });
    await expect(late).rejects.toThrow(/not newer than 20/);
    expect(log.snapshot()?.meta.index).toBe(20);
    await log.close();
    expect(await chunkKeys(dir)).toHaveLength(1);
  });

  it('deletes on open the records of a generation never recorded (a crash while writing one)', async () => {
    const log = await LevelLog.open(dir, { snapshotChunk_bytes: CHUNK });
    await log.persist({ snapshot: null, entries: ents(1, 10), hardState: { term: 1, vote: 'a', commit: 10 } });
    await log.createSnapshot(5, conf, bytes(2 * CHUNK, 1));
    await log.close();
    const db = new ClassicLevel<Buffer, Buffer>(dir, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    await db.open();
    await db.batch(
      [0, 1, 2].map((c) => ({ type: 'put' as const, key: chunkKey(7, c), value: encodeMeta(bytes(CHUNK, c)) })),
    );
    await db.close();
    expect(await chunkKeys(dir)).toHaveLength(5);
    const again = await LevelLog.open(dir, { snapshotChunk_bytes: CHUNK });
    expectBytes(await read(again), bytes(2 * CHUNK, 1));
    // The next snapshot gets a generation above every one seen, garbage included.
    await again.createSnapshot(9, conf, bytes(10, 2));
    await again.close();
    expect(await chunkKeys(dir)).toEqual([chunkKey(8, 0).toString('hex')]);
  });

  it('replaces a partially received snapshot by one starting over, and records only a complete one', async () => {
    const log = await LevelLog.open(dir, { snapshotChunk_bytes: CHUNK });
    const meta = { index: 40, term: 3, conf };
    const data = bytes(5 * CHUNK, 4);
    const chunk = (off: number, len: number) => ({
      meta,
      offset_bytes: off,
      data: data.subarray(off, off + len),
      done: off + len === data.byteLength,
    });
    await log.receiveSnapshot([chunk(0, CHUNK), chunk(CHUNK, CHUNK)]);
    await expect(log.receiveSnapshot([chunk(3 * CHUNK, CHUNK)])).rejects.toThrow(/expected 2048/);
    // The leader starts over: the first attempt's records are deleted.
    await log.receiveSnapshot([chunk(0, 2 * CHUNK), chunk(2 * CHUNK, 2 * CHUNK)]);
    const info = { meta, size_bytes: data.byteLength };
    await expect(log.persist({ snapshot: info, entries: [], hardState: null })).rejects.toThrow(/received 4096 of/);
    await log.receiveSnapshot([chunk(4 * CHUNK, CHUNK)]);
    await log.persist({ snapshot: info, entries: [], hardState: { term: 3, vote: null, commit: 40 } });
    expectBytes(await read(log), data);
    await log.close();
    expect(await chunkKeys(dir)).toHaveLength(5);
  });

  it('opens a log written before snapshot generations (records under 5-byte keys)', async () => {
    const log = await LevelLog.open(dir, { snapshotChunk_bytes: CHUNK });
    await log.persist({ snapshot: null, entries: ents(1, 10), hardState: { term: 1, vote: 'a', commit: 10 } });
    const data = bytes(2 * CHUNK + 5, 5);
    await log.createSnapshot(6, conf, data);
    await log.close();
    // Rewrite it in the old layout: chunk/N keys and a metadata record without gen and chunk_bytes.
    const db = new ClassicLevel<Buffer, Buffer>(dir, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    await db.open();
    const meta = decodeMeta((await db.get(KEY_SNAP_META))!, 'snapshot-meta') as Record<string, unknown>;
    const ops: Array<{ type: 'put'; key: Buffer; value: Buffer } | { type: 'del'; key: Buffer }> = [];
    for (let c = 0; c < 3; c++) {
      ops.push({ type: 'put', key: chunkKey(0, c), value: (await db.get(chunkKey(1, c)))! });
      ops.push({ type: 'del', key: chunkKey(1, c) });
    }
    const { gen: _gen, chunk_bytes: _chunk, ...old } = meta;
    ops.push({ type: 'put', key: KEY_SNAP_META, value: encodeMeta(old) });
    await db.batch(ops);
    await db.close();
    // Opened with another chunk size than it was written with: the records' own size is used.
    const again = await LevelLog.open(dir, { snapshotChunk_bytes: 4 * CHUNK });
    expectBytes(await read(again), data);
    expectBytes(await again.readSnapshot(again.snapshot()!.meta, CHUNK - 2, 4), data.subarray(CHUNK - 2, CHUNK + 2));
    // A new snapshot replaces it under a generation of its own and deletes the old records.
    await again.createSnapshot(9, conf, bytes(10, 6));
    await again.close();
    expect(await chunkKeys(dir)).toEqual([chunkKey(1, 0).toString('hex')]);
  });
});
