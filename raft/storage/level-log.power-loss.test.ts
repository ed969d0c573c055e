/**
 * LevelLog across simulated power losses (power-loss-testkit.ts): a randomized workload of every kind of write,
 * several writes in flight at once, the power cut at random instants. After each loss the reopened log must
 * equal the state after every acknowledged write plus some prefix of the writes in flight. Dropping
 * `{ sync: true }` from any LevelLog write makes this fail.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SeededRandom } from '../random.js';
import type { Entry, HardState, SnapshotInfo } from '../types.js';
import { LevelLog } from './level-log.js';
import { conf3 } from './log-testkit.js';
import { PowerLossDisk } from './power-loss-testkit.js';

const enc = new TextEncoder();
/** Snapshot record size of the logs under test (the smallest allowed), so snapshots span several records. */
const CHUNK_BYTES = 1024;
const dec = new TextDecoder();
/** The simulated write-ahead file's size. */
const WAL_BYTES = 1024;

/** What a log holds, as compared after a power loss. */
interface Model {
  markerIndex: number;
  markerTerm: number;
  /** Entries markerIndex+1 … as "term:data". */
  entries: string[];
  hs: HardState;
  /** The commit index as of the last write that stores the state record synced (the least a reopen may show). */
  syncedCommit: number;
  snap: { index: number; term: number; data: string } | null;
  confIndex: number;
}

function clone(m: Model): Model {
  return { ...m, entries: [...m.entries], hs: { ...m.hs }, snap: m.snap === null ? null : { ...m.snap } };
}

function lastIndex(m: Model): number {
  return m.markerIndex + m.entries.length;
}

function termAt(m: Model, index: number): number {
  if (index === m.markerIndex) return m.markerTerm;
  return Number(m.entries[index - m.markerIndex - 1]!.split(':')[0]);
}

async function snapshotText(log: LevelLog): Promise<string> {
  const parts: Uint8Array[] = [];
  for await (const c of log.snapshotChunks()) parts.push(c);
  return dec.decode(Buffer.concat(parts));
}

/** Snapshot data: sometimes many records (several synced batches, so a power loss can land inside the write). */
function snapshotBody(name: string, rnd: SeededRandom): string {
  return rnd.int(3) === 0 ? `${name}:${'x'.repeat(CHUNK_BYTES * (2 + rnd.int(8)) + rnd.int(CHUNK_BYTES))}` : name;
}

async function observe(log: LevelLog): Promise<Model> {
  const first = log.firstIndex();
  const last = log.lastIndex();
  const ents = last >= first ? log.entries(first, last + 1, Infinity) : [];
  const snap = log.snapshot();
  const hs = log.initialState().hardState;
  return {
    markerIndex: first - 1,
    markerTerm: log.term(first - 1),
    entries: ents.map((e) => `${e.term}:${dec.decode(e.data)}`),
    hs,
    syncedCommit: hs.commit,
    snap: snap === null ? null : { index: snap.meta.index, term: snap.meta.term, data: await snapshotText(log) },
    confIndex: log.appliedConf().index,
  };
}

/** Does the recovered state match candidate `c` (commit: anything between its durable and its latest value)? */
function matches(got: Model, c: Model): boolean {
  return (
    got.markerIndex === c.markerIndex &&
    got.markerTerm === c.markerTerm &&
    got.hs.term === c.hs.term &&
    got.hs.vote === c.hs.vote &&
    got.hs.commit >= c.syncedCommit &&
    got.hs.commit <= c.hs.commit &&
    got.confIndex === c.confIndex &&
    JSON.stringify(got.snap) === JSON.stringify(c.snap) &&
    got.entries.length === c.entries.length &&
    got.entries.every((e, i) => e === c.entries[i])
  );
}

/**
 * Issues one write. `alone`: the next write waits for it (createSnapshot writes its records outside the queue of
 * mutations and is recorded by a last queued batch, so later writes would overtake it; the driver waits for it).
 */
type Write = ((log: LevelLog) => Promise<unknown>) & { alone?: boolean };

/** Picks a valid next write for model `m`, applies it to `m`, and returns how to issue it. */
function nextWrite(m: Model, rnd: SeededRandom, seq: number): Write {
  const ent = (index: number, term: number, i: number): Entry => ({
    index,
    term,
    type: 'normal',
    data: enc.encode(`w${seq}.${i}`),
  });
  const record = (es: Entry[]): string[] => es.map((e) => `${e.term}:${dec.decode(e.data)}`);
  const last = lastIndex(m);
  const snapIndex = m.snap?.index ?? 0;
  const r = rnd.int(100);
  if (m.hs.term === 0 || r < 40) {
    // Append at the end, sometimes moving the commit index along.
    const term = Math.max(1, m.hs.term);
    const es = Array.from({ length: 1 + rnd.int(5) }, (_, i) => ent(last + 1 + i, term, i));
    const commit = rnd.int(2) === 0 ? m.hs.commit : m.hs.commit + rnd.int(last + es.length - m.hs.commit + 1);
    const hs = { term, vote: m.hs.vote, commit };
    m.entries.push(...record(es));
    m.hs = hs;
    m.syncedCommit = commit;
    return (log) => log.persist({ snapshot: null, entries: es, hardState: hs });
  }
  // The first index a new leader may overwrite. Entries up to the snapshot were applied, so committed, even when
  // the commit index recovered after a power loss is lower (the driver raises it to them on restart).
  const committed = Math.max(m.hs.commit, m.markerIndex, snapIndex);
  if (r < 50 && last > committed) {
    // A new leader overwrites an uncommitted tail.
    const from = committed + 1 + rnd.int(last - committed);
    const term = m.hs.term + 1;
    const es = Array.from({ length: 1 + rnd.int(3) }, (_, i) => ent(from + i, term, i));
    const hs = { term, vote: null, commit: m.hs.commit };
    m.entries.splice(from - m.markerIndex - 1, Infinity, ...record(es));
    m.hs = hs;
    m.syncedCommit = hs.commit;
    return (log) => log.persist({ snapshot: null, entries: es, hardState: hs });
  }
  if (r < 55) {
    const hs = { term: m.hs.term + 1, vote: 'b', commit: m.hs.commit };
    m.hs = hs;
    m.syncedCommit = hs.commit;
    return (log) => log.setHardState(hs);
  }
  if (r < 70 && last > m.hs.commit) {
    // Commit-only: kept in memory, never synced by itself.
    const hs = { ...m.hs, commit: m.hs.commit + 1 + rnd.int(last - m.hs.commit) };
    m.hs = hs;
    return (log) => log.setHardState(hs);
  }
  if (r < 80 && m.hs.commit > snapIndex && m.hs.commit > m.markerIndex) {
    const index = Math.max(snapIndex, m.markerIndex) + 1 + rnd.int(m.hs.commit - Math.max(snapIndex, m.markerIndex));
    const data = snapshotBody(`snap${seq}`, rnd);
    m.snap = { index, term: termAt(m, index), data };
    return Object.assign((log: LevelLog) => log.createSnapshot(index, conf3, enc.encode(data)), { alone: true });
  }
  if (r < 90 && snapIndex > m.markerIndex) {
    const index = m.markerIndex + 1 + rnd.int(snapIndex - m.markerIndex);
    m.markerTerm = termAt(m, index);
    m.entries.splice(0, index - m.markerIndex);
    m.markerIndex = index;
    m.syncedCommit = m.hs.commit;
    return (log) => log.compact(index);
  }
  if (r < 95) {
    // A snapshot received from the leader replaces the log; a few entries follow it in the same write.
    const index = Math.max(last, snapIndex) + 1 + rnd.int(5);
    const term = Math.max(1, m.hs.term);
    const es = Array.from({ length: rnd.int(3) }, (_, i) => ent(index + 1 + i, term, i));
    const hs = { term, vote: m.hs.vote, commit: index };
    const data = snapshotBody(`installed${seq}`, rnd);
    const bytes = enc.encode(data);
    const snap: SnapshotInfo = { meta: { index, term, conf: conf3 }, size_bytes: bytes.byteLength };
    m.markerIndex = index;
    m.markerTerm = term;
    m.entries = record(es);
    m.snap = { index, term, data };
    m.hs = hs;
    m.syncedCommit = hs.commit;
    if (index >= m.confIndex) m.confIndex = index;
    // Received in pieces (as the leader streams it), then recorded with the entries that follow it.
    const half = rnd.int(bytes.byteLength + 1);
    // Both queued at once, in order, like any other write of this test (mutations run in call order).
    return (log) =>
      Promise.all([
        log.receiveSnapshot([
          { meta: snap.meta, offset_bytes: 0, data: bytes.subarray(0, half), done: false },
          { meta: snap.meta, offset_bytes: half, data: bytes.subarray(half), done: true },
        ]),
        log.persist({ snapshot: snap, entries: es, hardState: hs }),
      ]);
  }
  const index = Math.max(m.confIndex, m.hs.commit);
  m.confIndex = index;
  return (log) => log.setConf({ index, conf: conf3, addresses: { a: `h:${seq}` } });
}

describe('LevelLog across power losses', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keel-level-power-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const runs = [1, 2, 3].flatMap((seed) => [
    { seed, wal: false },
    { seed, wal: true },
  ]);
  for (const { seed, wal } of runs) {
    const how = wal ? 'with a write-ahead file' : 'LevelDB only';
    it(`keeps every acknowledged write and recovers to a consistent prefix (${how}, seed ${seed})`, async () => {
      const rnd = new SeededRandom(seed);
      const disk = new PowerLossDisk(join(dir, 'disk'), rnd, 1);
      // A small write-ahead file: its halves fill many times a run, and generations are dropped with entries to fold.
      const open = (): Promise<LevelLog> =>
        LevelLog.open(join(dir, 'log'), {
          db: disk.db(),
          maxSegment_bytes: 256,
          snapshotChunk_bytes: CHUNK_BYTES,
          ...(wal ? { wal: { file: disk.wal(WAL_BYTES) } } : {}),
        });
      let log = await open();
      let model: Model = await observe(log);
      let seq = 0;
      let lostInFlight = 0;
      /** Generations started on a full half, and folds of a dropped one, over the logs opened so far. */
      let walSwitches = 0;
      let walFolds = 0;
      for (let round = 0; round < 25; round++) {
        // states[i] = the model after write i of this round; acknowledged = how many resolved before the cut.
        const states: Model[] = [clone(model)];
        let acknowledged = 0;
        let failed: unknown = null;
        const inflight: Array<Promise<unknown>> = [];
        const writes = 10 + rnd.int(60);
        for (let w = 0; w < writes; w++) {
          const write = nextWrite(model, rnd, seq++);
          states.push(clone(model));
          inflight.push(
            write(log).then(
              () => {
                acknowledged++;
              },
              (err: unknown) => {
                failed ??= err;
              },
            ),
          );
          // Up to 4 writes queued at once; LevelLog serializes them. A snapshot is waited for, unless it is the
          // last write (then the power cut may land while its records are written).
          if (write.alone === true && w < writes - 1) while (inflight.length > 0) await inflight.shift();
          else if (inflight.length >= 1 + rnd.int(4)) await inflight.shift();
        }
        // Cut the power at a random instant while the last writes are in flight.
        for (let i = rnd.int(4); i > 0; i--) await new Promise((r) => setImmediate(r));
        // Every write acknowledged before the cut must survive; those in flight may or may not.
        const cutAt = acknowledged;
        walSwitches += log.walStats().switches;
        walFolds += log.walStats().folds;
        await disk.powerLoss();
        await Promise.all(inflight);
        if (acknowledged < writes) {
          lostInFlight++;
          expect(failed, 'a write cut off by the power loss reports failure').not.toBeNull();
        }

        log = await open();
        const got = await observe(log);
        const candidates = states.slice(cutAt);
        const match = candidates.findIndex((c) => matches(got, c));
        expect(
          match,
          `round ${round}: recovered log matches no state between write ${cutAt} (acknowledged) and ${writes}\n` +
            `got ${JSON.stringify(got)}\nacknowledged ${JSON.stringify(candidates[0])}`,
        ).toBeGreaterThanOrEqual(0);
        model = { ...clone(candidates[match]!), hs: got.hs, syncedCommit: got.hs.commit };
      }
      await disk.close();
      // The premise: power was cut with writes in flight, and the losses did drop writes.
      expect(lostInFlight).toBeGreaterThan(3);
      if (wal) {
        // Write-ahead records were cut short, halves filled (new generations in the other half), and dropped
        // generations' entries were folded into LevelDB.
        expect(disk.stats.walTorn).toBeGreaterThan(2);
        expect(walSwitches).toBeGreaterThan(5);
        expect(walFolds).toBeGreaterThan(5);
        expect(disk.stats.syncedKept).toBeGreaterThan(100);
      } else {
        expect(disk.stats.syncedKept).toBeGreaterThan(100);
        expect(disk.stats.uncertainLost).toBeGreaterThan(3);
      }
    }, 20_000);
  }

  it('recovers when a compaction batch was lost but a later synced batch with its marker survived', async () => {
    // The state of a log written by a version whose compaction was not synced: the batch that deleted and
    // rewrote the segments below the marker is lost, the next synced batch (with the new marker) is kept.
    const disk = new PowerLossDisk(join(dir, 'disk'), new SeededRandom(9));
    const log = await LevelLog.open(join(dir, 'log'), { db: disk.db(), maxSegment_bytes: 200 });
    const ents = (from: number, to: number, term: number): Entry[] =>
      Array.from({ length: to - from + 1 }, (_, i) => ({
        index: from + i,
        term,
        type: 'normal' as const,
        data: enc.encode(`e${from + i}`),
      }));
    await log.persist({ snapshot: null, entries: ents(1, 12, 1), hardState: { term: 1, vote: 'a', commit: 12 } });
    await log.createSnapshot(8, conf3, enc.encode('s8'));
    const segsBefore = log.segmentCount();
    expect(segsBefore).toBeGreaterThan(1);
    const lost: number[] = [disk.writeCount];
    await log.compact(6); // deletes the segments ≤ 6, rewrites the one straddling 6
    await log.persist({ snapshot: null, entries: ents(13, 14, 2), hardState: { term: 2, vote: null, commit: 12 } });
    lost.push(disk.writeCount);
    await log.compact(7); // again, from the compacted layout only memory knows of
    await log.persist({ snapshot: null, entries: ents(15, 15, 2), hardState: { term: 2, vote: null, commit: 13 } });
    // Lose both compaction batches, keep everything else.
    await disk.powerLoss({ keep: (_w, i) => !lost.includes(i) });
    const again = await LevelLog.open(join(dir, 'log'), { db: disk.db(), maxSegment_bytes: 200 });
    expect(again.firstIndex()).toBe(8);
    expect(again.lastIndex()).toBe(15);
    expect(again.entries(8, 16, Infinity).map((e) => `${e.term}:${dec.decode(e.data)}`)).toEqual([
      '1:e8',
      '1:e9',
      '1:e10',
      '1:e11',
      '1:e12',
      '2:e13',
      '2:e14',
      '2:e15',
    ]);
    // The stale segments were cleaned up durably: the next open sees a strictly valid log.
    await disk.powerLoss();
    const third = await LevelLog.open(join(dir, 'log'), { db: disk.db(), maxSegment_bytes: 200 });
    expect(third.firstIndex()).toBe(8);
    expect(third.lastIndex()).toBe(15);
    expect(third.term(7)).toBe(1);
    await disk.close();
  });

  it('takes the newest write of an index held by several stale segments', async () => {
    const disk = new PowerLossDisk(join(dir, 'disk'), new SeededRandom(10));
    const log = await LevelLog.open(join(dir, 'log'), { db: disk.db(), maxSegment_bytes: 4096 });
    const ents = (from: number, to: number, term: number, tag: string): Entry[] =>
      Array.from({ length: to - from + 1 }, (_, i) => ({
        index: from + i,
        term,
        type: 'normal' as const,
        data: enc.encode(`${tag}${from + i}`),
      }));
    await log.persist({ snapshot: null, entries: ents(1, 12, 1, 'old'), hardState: { term: 1, vote: 'a', commit: 5 } });
    expect(log.segmentCount()).toBe(1); // one segment: after the lost compactions it still holds old 9..12
    await log.createSnapshot(6, conf3, enc.encode('s6'));
    const lost: number[] = [disk.writeCount];
    await log.compact(6);
    // A new leader overwrites from 8: on disk this cuts segments memory knows in their compacted layout.
    await log.persist({
      snapshot: null,
      entries: ents(8, 10, 2, 'new'),
      hardState: { term: 2, vote: null, commit: 5 },
    });
    await log.persist({
      snapshot: null,
      entries: ents(11, 11, 2, 'new'),
      hardState: { term: 2, vote: null, commit: 9 },
    });
    await log.createSnapshot(8, conf3, enc.encode('s8'));
    lost.push(disk.writeCount);
    await log.compact(8);
    await log.persist({
      snapshot: null,
      entries: ents(12, 12, 2, 'new'),
      hardState: { term: 2, vote: null, commit: 10 },
    });
    // Both compactions lost: the old term-1 entries 1..9 and the new ones from 8 are all still on disk.
    await disk.powerLoss({ keep: (_w, i) => !lost.includes(i) });
    const again = await LevelLog.open(join(dir, 'log'), { db: disk.db(), maxSegment_bytes: 4096 });
    expect(again.firstIndex()).toBe(9);
    expect(again.term(8)).toBe(2);
    expect(again.entries(9, 13, Infinity).map((e) => `${e.term}:${dec.decode(e.data)}`)).toEqual([
      '2:new9',
      '2:new10',
      '2:new11',
      '2:new12',
    ]);
    await disk.close();
  });
});
