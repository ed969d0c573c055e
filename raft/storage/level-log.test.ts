import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CompactedError, type Entry, UnavailableError } from '../types.js';
import {
  CHUNK_RANGE,
  chunkKey,
  decodeMeta,
  encodeMeta,
  encodeSegment,
  KEY_FORMAT,
  KEY_SNAP_META,
  KEY_STATE,
  segmentKey,
} from './codec.js';
import { LogCorruptError, LogStateError } from './errors.js';
import { LevelLog } from './level-log.js';
import { conf3 } from './log-testkit.js';
import { MemoryDurableLog } from './memory-durable-log.js';

function ent(index: number, term: number, text = `e${index}`): Entry {
  return { index, term, type: 'normal', data: new TextEncoder().encode(text) };
}

function dec(b: Uint8Array): string {
  return new TextDecoder().decode(b);
}

function ents(from: number, to: number, term: number): Entry[] {
  const out: Entry[] = [];
  for (let i = from; i <= to; i++) out.push(ent(i, term));
  return out;
}

async function snapshotBytes(log: LevelLog): Promise<number[]> {
  const parts: Uint8Array[] = [];
  for await (const c of log.snapshotChunks()) parts.push(c);
  return [...Buffer.concat(parts)];
}

async function raw(path: string, fn: (db: ClassicLevel<Buffer, Buffer>) => Promise<void>): Promise<void> {
  const db = new ClassicLevel<Buffer, Buffer>(path, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  await db.open();
  try {
    await fn(db);
  } finally {
    await db.close();
  }
}

async function expectCorrupt(path: string, match: RegExp, index?: number): Promise<LogCorruptError> {
  const err = await LevelLog.open(path).then(
    async (log) => {
      await log.close();
      return null;
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(LogCorruptError);
  const ce = err as LogCorruptError;
  expect(ce.message).toMatch(match);
  if (index !== undefined) expect(ce.index).toBe(index);
  return ce;
}

/** A log of entries 1..10 (term 1) with a deferred snapshot at 8. */
async function withDeferredSnapshot(path: string): Promise<LevelLog> {
  const log = await LevelLog.open(path);
  await log.persist({ snapshot: null, entries: ents(1, 10, 1), hardState: { term: 1, vote: null, commit: 10 } });
  await log.createSnapshot(8, conf3, null);
  return log;
}

describe('LevelLog', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keel-level-log-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts empty and recovers entries, hard state and conf after reopen', async () => {
    const log = await LevelLog.open(dir);
    expect(log.isEmpty()).toBe(true);
    expect(log.firstIndex()).toBe(1);
    expect(log.lastIndex()).toBe(0);
    expect(log.term(0)).toBe(0);
    await log.setConf({ index: 0, conf: conf3, addresses: { a: 'h:1' } });
    await log.persist({ snapshot: null, entries: ents(1, 10, 1), hardState: { term: 2, vote: 'b', commit: 7 } });
    await log.persist({ snapshot: null, entries: ents(11, 12, 2), hardState: { term: 2, vote: 'b', commit: 11 } });
    expect(log.lastIndex()).toBe(12);
    await log.close();

    const again = await LevelLog.open(dir);
    expect(again.isEmpty()).toBe(false);
    expect(again.initialState()).toEqual({ hardState: { term: 2, vote: 'b', commit: 11 }, conf: conf3 });
    expect(again.firstIndex()).toBe(1);
    expect(again.lastIndex()).toBe(12);
    expect(again.term(10)).toBe(1);
    expect(again.term(12)).toBe(2);
    const got = again.entries(1, 13, Infinity);
    expect(got.map((e) => new TextDecoder().decode(e.data))).toEqual(ents(1, 12, 0).map((e) => `e${e.index}`));
    expect(() => again.term(13)).toThrow(UnavailableError);
    await again.close();
  });

  it('keeps a commit-only change in memory until the next write or close', async () => {
    const log = await LevelLog.open(dir);
    await log.persist({ snapshot: null, entries: ents(1, 5, 1), hardState: { term: 1, vote: 'a', commit: 1 } });
    await log.setHardState({ term: 1, vote: 'a', commit: 3 });
    expect(log.initialState().hardState.commit).toBe(3);
    await log.setHardState({ term: 1, vote: 'a', commit: 4 });
    await log.append([ent(6, 1)]); // carries commit 4 along
    await log.setHardState({ term: 1, vote: 'a', commit: 5 });
    await log.close(); // writes the pending commit
    const again = await LevelLog.open(dir);
    expect(again.initialState().hardState).toEqual({ term: 1, vote: 'a', commit: 5 });
    await again.close();
  });

  it('overwrites a conflicting tail and forgets it on disk', async () => {
    const log = await LevelLog.open(dir);
    await log.persist({ snapshot: null, entries: ents(1, 8, 1), hardState: { term: 1, vote: 'a', commit: 3 } });
    await log.persist({
      snapshot: null,
      entries: [ent(5, 3, 'new5'), ent(6, 3, 'new6')],
      hardState: { term: 3, vote: null, commit: 3 },
    });
    expect(log.lastIndex()).toBe(6);
    await log.close();
    const again = await LevelLog.open(dir);
    expect(again.lastIndex()).toBe(6);
    expect(new TextDecoder().decode(again.entries(5, 6, Infinity)[0]!.data)).toBe('new5');
    expect(again.term(4)).toBe(1);
    expect(again.term(6)).toBe(3);
    await again.close();
  });

  it('stores each write as one segment and rewrites segments cut by truncation or compaction', async () => {
    const log = await LevelLog.open(dir, { maxSegment_bytes: 200 });
    await log.persist({ snapshot: null, entries: ents(1, 10, 1), hardState: { term: 1, vote: null, commit: 0 } });
    // 10 entries of ~19 bytes each in segments of at most 200 bytes: 2 segments.
    expect(log.segmentCount()).toBe(2);
    await log.append(ents(11, 14, 1));
    expect(log.segmentCount()).toBe(3);
    // Overwrite from 6: the first segment (1..8 or so) is cut, later ones dropped.
    await log.persist({
      snapshot: null,
      entries: [ent(6, 2, 'x6'), ent(7, 2, 'x7')],
      hardState: { term: 2, vote: null, commit: 5 },
    });
    expect(log.lastIndex()).toBe(7);
    await log.createSnapshot(5, conf3, new Uint8Array([5]));
    await log.compact(3); // cuts the segment holding 1..5
    await log.close();
    const again = await LevelLog.open(dir, { maxSegment_bytes: 200 });
    expect(again.firstIndex()).toBe(4);
    expect(again.lastIndex()).toBe(7);
    expect(again.entries(4, 8, Infinity).map((e) => dec(e.data))).toEqual(['e4', 'e5', 'x6', 'x7']);
    expect(again.term(3)).toBe(1);
    await again.close();
  });

  it('limits entries() by bytes but returns at least one entry', async () => {
    const log = await LevelLog.open(dir);
    await log.append(ents(1, 10, 1));
    expect(log.entries(1, 11, 0)).toHaveLength(1);
    expect(log.entries(1, 11, 2 * (2 + 16))).toHaveLength(2);
    await log.close();
  });

  it('rejects writes that would break the log invariants', async () => {
    const log = await LevelLog.open(dir);
    await log.append(ents(1, 3, 2));
    await expect(log.append([ent(5, 2)])).rejects.toThrow(LogStateError);
    await expect(log.append([ent(4, 1)])).rejects.toThrow(/below previous term/);
    await expect(log.setHardState({ term: 2, vote: null, commit: 9 })).rejects.toThrow(/beyond last index/);
    // A rejected write changes nothing and later writes still work.
    await log.append([ent(4, 2)]);
    expect(log.lastIndex()).toBe(4);
    await log.close();
  });

  it('refuses to rewrite entries a snapshot covers, in both durable logs', async () => {
    const logs: Array<[string, LevelLog | MemoryDurableLog]> = [
      ['level', await LevelLog.open(dir)],
      ['memory', new MemoryDurableLog()],
    ];
    for (const [name, log] of logs) {
      await log.persist({ snapshot: null, entries: ents(1, 8, 1), hardState: { term: 1, vote: 'a', commit: 6 } });
      await log.createSnapshot(5, conf3, new Uint8Array([5]));
      // A new leader's entries from 5 (covered) are refused; from 6 (above the snapshot) they are written.
      await expect(
        log.persist({ snapshot: null, entries: ents(5, 6, 2), hardState: { term: 2, vote: null, commit: 6 } }),
        name,
      ).rejects.toThrow(/rewrite entries covered by snapshot 5/);
      expect(
        log.entries(5, 9, Infinity).map((e) => e.term),
        name,
      ).toEqual([1, 1, 1, 1]);
      await log.persist({ snapshot: null, entries: ents(6, 6, 2), hardState: { term: 2, vote: null, commit: 6 } });
      expect(
        log.entries(5, 7, Infinity).map((e) => e.term),
        name,
      ).toEqual([1, 2]);
      expect(log.lastIndex(), name).toBe(6);
      await log.close();
    }
    // The LevelDB log reopens cleanly: the refused write left nothing behind.
    const again = await LevelLog.open(dir);
    expect(again.entries(1, 7, Infinity).map((e) => e.term)).toEqual([1, 1, 1, 1, 1, 2]);
    expect(again.snapshot()?.meta).toEqual({ index: 5, term: 1, conf: conf3 });
    await again.close();
  });

  it('creates a multi-chunk snapshot, compacts, and recovers both', async () => {
    const log = await LevelLog.open(dir, { snapshotChunk_bytes: 1024 });
    await log.persist({ snapshot: null, entries: ents(1, 20, 1), hardState: { term: 1, vote: 'a', commit: 20 } });
    const data = new Uint8Array(5000).map((_, i) => (i * 7) & 0xff);
    const snap = await log.createSnapshot(15, conf3, data);
    expect(snap.meta).toEqual({ index: 15, term: 1, conf: conf3 });
    await log.compact(12);
    expect(log.firstIndex()).toBe(13);
    expect(() => log.entries(12, 14, Infinity)).toThrow(CompactedError);
    await expect(log.compact(16)).rejects.toThrow(/snapshot covers only 15/);
    // A smaller snapshot later must not leave stale chunks behind.
    await log.compact(15);
    await log.append(ents(21, 22, 1));
    await log.createSnapshot(21, conf3, new Uint8Array([1, 2, 3]));
    await log.close();

    const again = await LevelLog.open(dir, { snapshotChunk_bytes: 1024 });
    expect(again.firstIndex()).toBe(16);
    expect(again.term(15)).toBe(1);
    expect(again.lastIndex()).toBe(22);
    expect(again.snapshot()?.meta.index).toBe(21);
    expect(await snapshotBytes(again)).toEqual([1, 2, 3]);
    await again.close();
  });

  it("records a deferred snapshot (metadata only, its predecessor's chunks deleted); bytes may replace it at its index", async () => {
    const log = await LevelLog.open(dir, { snapshotChunk_bytes: 1024 });
    await log.persist({ snapshot: null, entries: ents(1, 30, 1), hardState: { term: 1, vote: 'a', commit: 30 } });
    await log.createSnapshot(10, conf3, new Uint8Array(3000).fill(7));
    expect(log.snapshot()?.size_bytes).toBe(3000);
    const deferred = await log.createSnapshot(20, conf3, null);
    expect(deferred).toEqual({ meta: { index: 20, term: 1, conf: conf3 }, size_bytes: 0, deferred: true });
    await log.compact(18);
    expect(await log.readSnapshot(deferred.meta, 0, 100)).toBeNull();
    await expect(snapshotBytes(log)).rejects.toThrow(LogStateError);
    // not over itself, nor below it, without bytes
    await expect(log.createSnapshot(20, conf3, null)).rejects.toThrow(/superseded|not newer|20/);
    await expect(log.createSnapshot(19, conf3, new Uint8Array([1]))).rejects.toThrow(LogStateError);
    await log.close();
    await raw(dir, async (db) => {
      // the three chunk records of the snapshot at 10 are gone with it
      expect(await db.keys(CHUNK_RANGE).all()).toEqual([]);
      // format 2 from the first deferred snapshot on: a release reading only format 1 refuses the log
      expect(decodeMeta((await db.get(KEY_FORMAT))!, 'format')).toEqual({ name: 'keel-raft-log', version: 2 });
    });

    const again = await LevelLog.open(dir, { snapshotChunk_bytes: 1024 });
    expect(again.snapshot()).toEqual(deferred);
    expect(again.firstIndex()).toBe(19);
    // a snapshot with bytes at the same index replaces it
    await again.createSnapshot(20, conf3, new Uint8Array([4, 5, 6]));
    expect(again.snapshot()?.deferred).toBeUndefined();
    expect(await snapshotBytes(again)).toEqual([4, 5, 6]);
    await expect(again.createSnapshot(20, conf3, null)).rejects.toThrow(LogStateError);
    await again.close();
    const third = await LevelLog.open(dir, { snapshotChunk_bytes: 1024 });
    expect(third.snapshot()).toEqual({ meta: { index: 20, term: 1, conf: conf3 }, size_bytes: 3 });
    expect(await snapshotBytes(third)).toEqual([4, 5, 6]);
    await third.close();
    // a format this release does not know is refused
    await raw(dir, (db) => db.put(KEY_FORMAT, encodeMeta({ name: 'keel-raft-log', version: 4 })));
    await expectCorrupt(dir, /unsupported format keel-raft-log v4/);
  });

  it('installs a received snapshot: entries dropped, conf taken from the snapshot', async () => {
    const log = await LevelLog.open(dir);
    await log.persist({ snapshot: null, entries: ents(1, 5, 1), hardState: { term: 1, vote: null, commit: 2 } });
    const snap = { meta: { index: 40, term: 4, conf: conf3 }, size_bytes: 2 };
    await expect(log.persist({ snapshot: snap, entries: [], hardState: null })).rejects.toThrow(/not received/);
    await log.receiveSnapshot([{ meta: snap.meta, offset_bytes: 0, data: new Uint8Array([9]), done: false }]);
    await expect(log.persist({ snapshot: snap, entries: [], hardState: null })).rejects.toThrow(/received 1 of 2/);
    await log.receiveSnapshot([{ meta: snap.meta, offset_bytes: 1, data: new Uint8Array([9]), done: true }]);
    await log.persist({ snapshot: snap, entries: [ent(41, 4)], hardState: { term: 4, vote: null, commit: 40 } });
    expect(log.firstIndex()).toBe(41);
    expect(log.term(40)).toBe(4);
    await log.close();
    const again = await LevelLog.open(dir);
    expect(again.appliedConf()).toEqual({ index: 40, conf: conf3, addresses: {} });
    expect(again.firstIndex()).toBe(41);
    expect(again.lastIndex()).toBe(41);
    expect(again.initialState().hardState.commit).toBe(40);
    expect(await snapshotBytes(again)).toEqual([9, 9]);
    await again.close();
  });

  it('records the member addresses a received snapshot carries, keeping a known one it lacks, after a restart too', async () => {
    const log = await LevelLog.open(dir);
    await log.setConf({ index: 0, conf: conf3, addresses: { a: 'old-a:1', gone: 'gone:1' } });
    const meta = { index: 40, term: 4, conf: conf3, addresses: { b: 'b:2' } };
    await log.receiveSnapshot([{ meta, offset_bytes: 0, data: new Uint8Array([9]), done: true }]);
    await log.persist({
      snapshot: { meta, size_bytes: 1 },
      entries: [],
      hardState: { term: 4, vote: null, commit: 40 },
    });
    const expected = { index: 40, conf: conf3, addresses: { a: 'old-a:1', b: 'b:2' } };
    expect(log.appliedConf()).toEqual(expected);
    await log.close();
    const again = await LevelLog.open(dir);
    expect(again.appliedConf()).toEqual(expected);
    await again.close();
  });

  it('a received snapshot replaces a deferred one (bytes recorded, no longer deferred), after a restart too', async () => {
    const log = await withDeferredSnapshot(dir);
    const snap = { meta: { index: 40, term: 4, conf: conf3 }, size_bytes: 2 };
    await log.receiveSnapshot([{ meta: snap.meta, offset_bytes: 0, data: new Uint8Array([7, 8]), done: true }]);
    await log.persist({ snapshot: snap, entries: [], hardState: { term: 4, vote: null, commit: 40 } });
    expect(log.snapshot()).toEqual(snap);
    expect(await snapshotBytes(log)).toEqual([7, 8]);
    await log.close();
    const again = await LevelLog.open(dir);
    expect(again.snapshot()).toEqual(snap);
    expect(await snapshotBytes(again)).toEqual([7, 8]);
    await again.close();
  });

  it('refuses a deferred snapshot record that claims records or bytes', async () => {
    const log = await withDeferredSnapshot(dir);
    await log.close();
    await raw(dir, async (db) => {
      const rec = decodeMeta((await db.get(KEY_SNAP_META))!, 'snapshot-meta') as Record<string, unknown>;
      await db.put(KEY_SNAP_META, encodeMeta({ ...rec, chunks: 1, size_bytes: 3 }));
    });
    await expectCorrupt(dir, /malformed snapshot metadata/);
  });

  describe('corruption detection on open', () => {
    beforeEach(async () => {
      const log = await LevelLog.open(dir, { compression: false });
      await log.setConf({ index: 0, conf: conf3, addresses: { a: 'h:1' } });
      // One entry per write, so each entry is its own segment and can be damaged on its own.
      for (const e of ents(1, 30, 1)) {
        await log.persist({
          snapshot: null,
          entries: [e],
          hardState: { term: 1, vote: 'a', commit: Math.min(25, e.index) },
        });
      }
      expect(log.segmentCount()).toBe(30);
      await log.createSnapshot(10, conf3, new Uint8Array(3000).fill(5));
      await log.close();
    });

    it('detects a flipped byte in an entry', async () => {
      await raw(dir, async (db) => {
        const v = (await db.get(segmentKey(17)))!;
        v[v.length - 1]! ^= 0x40;
        await db.put(segmentKey(17), v);
      });
      const err = await expectCorrupt(dir, /entry 17 .*checksum mismatch/, 17);
      expect(err.key).toBe('segment/17');
    });

    it('names the damaged entry inside a multi-entry segment', async () => {
      const log = await LevelLog.open(dir, { compression: false });
      await log.persist({ snapshot: null, entries: ents(31, 40, 1), hardState: null });
      expect(log.segmentCount()).toBe(31);
      await log.close();
      await raw(dir, async (db) => {
        const v = (await db.get(segmentKey(31)))!;
        const at = v.indexOf('e35');
        expect(at).toBeGreaterThan(0);
        v[at + 1]! ^= 0x02;
        await db.put(segmentKey(31), v);
      });
      await expectCorrupt(dir, /entry 35 \(key segment\/31\): checksum mismatch/, 35);
    });

    it('detects a deleted middle entry', async () => {
      await raw(dir, (db) => db.del(segmentKey(12)));
      await expectCorrupt(dir, /entry 12 .*missing/, 12);
    });

    it('detects a truncated tail', async () => {
      await raw(dir, (db) => db.batch([28, 29, 30].map((i) => ({ type: 'del' as const, key: segmentKey(i) }))));
      await expectCorrupt(dir, /truncated: recorded last index is 30/, 28);
    });

    it('detects a segment cut short', async () => {
      await raw(dir, async (db) => {
        const v = (await db.get(segmentKey(30)))!;
        await db.put(segmentKey(30), v.subarray(0, v.length - 2));
      });
      await expectCorrupt(dir, /entry 30 .*checksum mismatch/, 30);
    });

    it('detects an entry stored under the wrong key', async () => {
      await raw(dir, async (db) => db.put(segmentKey(9), encodeSegment([ent(8, 1)])));
      await expectCorrupt(dir, /entry 9 .*record holds index 8/, 9);
    });

    it('detects terms going backwards', async () => {
      await raw(dir, async (db) => {
        await db.put(segmentKey(20), encodeSegment([ent(20, 2)]));
        await db.put(segmentKey(21), encodeSegment([ent(21, 1)]));
      });
      await expectCorrupt(dir, /entry 21 .*term 1 below previous term 2/, 21);
    });

    it('detects a commit index beyond the log', async () => {
      await raw(dir, (db) =>
        db.put(KEY_STATE, encodeMeta({ term: 1, vote: 'a', commit: 31, markerIndex: 0, markerTerm: 0, lastIndex: 30 })),
      );
      await expectCorrupt(dir, /commit 31 beyond last index 30/);
    });

    it('detects a damaged state record', async () => {
      await raw(dir, async (db) => {
        const v = (await db.get(KEY_STATE))!;
        v[6]! ^= 1;
        await db.put(KEY_STATE, v);
      });
      await expectCorrupt(dir, /key state\): checksum mismatch/);
    });

    it('detects a damaged or missing snapshot chunk', async () => {
      await raw(dir, async (db) => {
        const v = (await db.get(chunkKey(1, 0)))!;
        v[100]! ^= 1;
        await db.put(chunkKey(1, 0), v);
      });
      await expectCorrupt(dir, /snapshot-chunk\/1\/0\): checksum mismatch/);
      await raw(dir, (db) => db.del(chunkKey(1, 0)));
      await expectCorrupt(dir, /snapshot truncated/);
    });

    it('detects a flipped byte inside a LevelDB table file', async () => {
      const marker = 'needle-entry-payload';
      const log = await LevelLog.open(dir, { compression: false });
      await log.append([{ index: 31, term: 1, type: 'normal', data: new TextEncoder().encode(marker) }]);
      await log.close();
      await raw(dir, (db) => db.compactRange(Buffer.from([0x00]), Buffer.from([0xff])));
      let flipped = false;
      for (const name of readdirSync(dir).filter((n) => n.endsWith('.ldb'))) {
        const file = join(dir, name);
        const bytes = readFileSync(file);
        const at = bytes.indexOf(marker);
        if (at < 0) continue;
        bytes[at + 3]! ^= 0x01;
        writeFileSync(file, bytes);
        flipped = true;
      }
      expect(flipped).toBe(true);
      await expectCorrupt(dir, /entry 31 .*checksum mismatch/, 31);
    });
  });
});
