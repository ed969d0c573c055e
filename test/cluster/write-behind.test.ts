/**
 * A cluster member's store writes behind its Raft log (Store.applyGroupBehind through StoreStateMachine): applied
 * groups are published at once and written later, one synced batch per flush. Across simulated power cuts (the
 * power-loss disk of raft/storage/power-loss-testkit.ts, which keeps every synced write that reported success and
 * a random prefix of the rest) the reopened store must hold exactly the state as of some applied index — never a
 * mix of two — at least as far as the last flush that reported success, and replaying the log above that index
 * (what Raft does on restart) must give exactly the state of a store that applied every entry once.
 */
import { describe, expect, it, vi } from 'vitest';
import type { Entry } from '../../raft/index.js';
import { SeededRandom } from '../../raft/random.js';
import { PowerLossDisk } from '../../raft/storage/power-loss-testkit.js';
import { encodeLogged } from '../../src/cluster/codec.js';
import { StoreStateMachine } from '../../src/cluster/state-machine.js';
import { Schema } from '../../storage/schema.js';
import { MAX_GROUP_COMMANDS, Store, WRITE_BEHIND_FLUSH_OPS, WRITE_BEHIND_INTERVAL_MS } from '../../storage/store.js';
import type { Command, EntityDef, Row } from '../../storage/types.js';
import { enospc, FaultyDb, storeDbOverLogDb } from '../support/store-dbs.js';
import { tempDirs } from '../support/temp-dir.js';

const defs: EntityDef[] = [{ name: 'things', type: 'thing', fields: { name: { type: 'string', unique: true } } }];
const AT = '2026-01-01T00:00:00.000Z';
const ROUNDS = 8;
const ENTRIES_PER_ROUND = 120;
const tempDir = tempDirs('keel-write-behind-');

const normal = (index: number, cmd: Command): Entry => ({
  index,
  term: 1,
  type: 'normal',
  data: encodeLogged({ rid: `r${index}`, cmd }),
});

/** Random entries after `log`: creates, updates and deletes of a few rows (some fail: that is recorded too), noops. */
function moreEntries(log: Entry[], n: number, rnd: SeededRandom): void {
  for (let i = 0; i < n; i++) {
    const index = log.length + 1;
    const id = `t${rnd.int(40)}`;
    const kind = rnd.int(8);
    if (kind === 0) {
      log.push({ index, term: 1, type: 'noop', data: new Uint8Array(0) });
      continue;
    }
    const cmd: Command =
      kind <= 3
        ? { op: 'create', entity: 'things', id, data: { name: id, tags: { v: index } }, at: AT }
        : kind <= 6
          ? { op: 'update', entity: 'things', id, set: { tags: { v: index } }, at: AT }
          : { op: 'delete', entity: 'things', id, at: AT };
    log.push(normal(index, cmd));
  }
}

function rows(store: Store): Map<string, Row> {
  return new Map([...store.collection('things').scan()].map((r) => [r.id, r]));
}

/** The state after applying entries 1..index once each, on a fresh store. */
async function stateAt(log: Entry[], index: number, dir: string): Promise<Map<string, Row>> {
  const store = await Store.open(dir, new Schema(defs));
  try {
    await new StoreStateMachine(store).apply(log.slice(0, index));
    return rows(store);
  } finally {
    await store.close();
  }
}

describe('write-behind store on a power-loss disk', () => {
  for (const seed of [1, 2, 3, 4]) {
    it(`reopens at a consistent, flushed state and replays to the same state (seed ${seed})`, async () => {
      const rnd = new SeededRandom(seed);
      const disk = new PowerLossDisk(tempDir(), rnd, 1);
      const log: Entry[] = [];
      /** The highest index a flush reported durable before the last cut. */
      let flushed = 0;
      let reopenedBehind = 0;
      try {
        for (let round = 0; round <= ROUNDS; round++) {
          const store = await Store.open(storeDbOverLogDb(disk.db()), new Schema(defs));
          const durable = store.appliedIndex;
          expect(durable, `durable index after cut ${round}`).toBeGreaterThanOrEqual(flushed);
          expect(durable).toBeLessThanOrEqual(log.length);
          // exactly the state as of the durable index: no batch half-kept, no later batch kept without an earlier one
          expect(rows(store)).toEqual(await stateAt(log, durable, tempDir()));
          if (durable < log.length) reopenedBehind++;
          // Raft replays its log from the start of what it holds: entries up to the durable index are skipped
          const sm = new StoreStateMachine(store);
          await sm.apply(log);
          expect(store.appliedIndex).toBe(log.length);
          expect(rows(store)).toEqual(await stateAt(log, log.length, tempDir()));
          if (round === ROUNDS) {
            await store.close();
            break;
          }

          // new entries in groups of random size, with pauses around the flush interval; cut at a random point
          const from = log.length;
          moreEntries(log, ENTRIES_PER_ROUND, rnd);
          let at = from;
          const cutAt = from + 1 + rnd.int(ENTRIES_PER_ROUND);
          while (at < cutAt) {
            const n = Math.min(cutAt - at, 1 + rnd.int(20));
            await sm.apply(log.slice(at, at + n));
            at += n;
            const pause = at < cutAt ? rnd.int(6) : -1;
            if (pause === 0) {
              const index = store.appliedIndex;
              await store.flush();
              flushed = Math.max(flushed, index);
            } else if (pause === 1) {
              await new Promise((r) => setTimeout(r, WRITE_BEHIND_INTERVAL_MS + 20));
            } else if (pause === 2) {
              await new Promise((r) => setTimeout(r, rnd.int(5)));
            }
          }
          // a flush finished by the timer counts too: the index it wrote is on disk (read before the cut)
          flushed = Math.max(flushed, store.durableIndex);
          if (round % 2 === 0) {
            // cut while a flush is being written: its batch is kept or lost as a whole
            void store.flush().catch(() => {});
            await new Promise((r) => setImmediate(r));
          }
          await disk.powerLoss();
          await store.close().catch(() => {});
        }
        // the premise: some cuts left the store behind the log (so replay mattered) and some hit unfinished writes
        expect(reopenedBehind).toBeGreaterThan(0);
        expect(disk.stats.uncertainLost + disk.stats.uncertainKept).toBeGreaterThan(0);
      } finally {
        await disk.close();
      }
    });
  }
});

describe('write-behind store', () => {
  const creates = (from: number, n: number) =>
    Array.from({ length: n }, (_, i) =>
      normal(from + i, { op: 'create', entity: 'things', id: `x${from + i}`, data: { name: `x${from + i}` }, at: AT }),
    );

  it('is durable up to a snapshot before the snapshot is handed to Raft (the log is compacted up to it)', async () => {
    const rnd = new SeededRandom(9);
    const disk = new PowerLossDisk(tempDir(), rnd, 1);
    try {
      const store = await Store.open(storeDbOverLogDb(disk.db()), new Schema(defs));
      const sm = new StoreStateMachine(store);
      await sm.apply(creates(1, 50));
      expect(store.durableIndex).toBeLessThan(50); // written behind: not yet on disk
      const snap = await sm.snapshot();
      expect(snap.index).toBe(50);
      expect(store.durableIndex).toBe(50);
      await sm.apply(creates(51, 10));
      const stream = await sm.snapshotStream();
      expect(stream.index).toBe(60);
      expect(store.durableIndex).toBe(60);
      // the power goes right after: the store reopens at the snapshot, none of whose entries the log still needs
      await disk.powerLoss({ keep: (w) => w.sync && w.done });
      const again = await Store.open(storeDbOverLogDb(disk.db()), new Schema(defs));
      expect(again.appliedIndex).toBe(60);
      expect(again.collection('things').size).toBe(60);
      await again.close();
    } finally {
      await disk.close();
    }
  });

  it('writes what it staged within the flush interval, as one synced batch', async () => {
    const db = new FaultyDb(tempDir());
    const store = await Store.open(db, new Schema(defs));
    const sm = new StoreStateMachine(store);
    const before = db.writes;
    for (let i = 0; i < 5; i++) await sm.apply(creates(1 + 10 * i, 10));
    expect(db.writes).toBe(before);
    expect(store.appliedIndex).toBe(50);
    await new Promise((r) => setTimeout(r, WRITE_BEHIND_INTERVAL_MS * 3));
    expect(db.writes).toBe(before + 1);
    expect(store.durableIndex).toBe(50);
    await store.close();
  });

  it('queues one flush behind a slow one, however many applies pass the flush threshold meanwhile', async () => {
    const db = new FaultyDb(tempDir());
    const store = await Store.open(db, new Schema(defs));
    const sm = new StoreStateMachine(store);
    let release!: () => void;
    const slow = new Promise<void>((r) => (release = r));
    const batch = db.batch.bind(db);
    db.batch = async (ops, opts) => {
      await slow;
      return batch(ops, opts);
    };
    const written = vi.spyOn(store as unknown as { writeStaged(): Promise<void> }, 'writeStaged');
    let index = 1;
    const apply = async (n: number) => {
      for (let done = 0; done < n; done += MAX_GROUP_COMMANDS) {
        const size = Math.min(MAX_GROUP_COMMANDS, n - done);
        await sm.apply(creates(index, size));
        index += size;
      }
    };
    await apply(WRITE_BEHIND_FLUSH_OPS); // starts a flush, which waits on the slow disk
    await new Promise((r) => setImmediate(r));
    expect(written).toHaveBeenCalledTimes(1);
    await apply(WRITE_BEHIND_FLUSH_OPS); // past the threshold again: queues a flush
    for (let i = 0; i < 20; i++) await apply(1); // each past the threshold: joins the queued flush
    release();
    await store.flush();
    expect(written).toHaveBeenCalledTimes(2);
    expect(store.durableIndex).toBe(index - 1);
    await store.close();
  });

  it('fails the store when a flush fails: every later apply is refused (Raft stops the member)', async () => {
    const db = new FaultyDb(tempDir());
    const store = await Store.open(db, new Schema(defs));
    const failures: string[] = [];
    store.onFailure((f) => failures.push(f.stage));
    const sm = new StoreStateMachine(store);
    await sm.apply(creates(1, 5));
    db.failWrites = enospc;
    await expect(store.flush()).rejects.toThrow(/No space left/);
    await expect(sm.apply(creates(6, 1))).rejects.toThrow(/No space left/);
    await new Promise((r) => setImmediate(r));
    expect(failures).toEqual(['write']);
    await store.close();
  });

  it('drops staged rows older than a snapshot it restores', async () => {
    const src = await Store.open(tempDir(), new Schema(defs));
    const srcSm = new StoreStateMachine(src);
    await srcSm.apply(creates(1, 30));
    const snap = await srcSm.snapshot();
    await src.close();

    const dir = tempDir();
    const store = await Store.open(dir, new Schema(defs));
    const sm = new StoreStateMachine(store);
    await sm.apply([normal(1, { op: 'create', entity: 'things', id: 'stale', data: { name: 'stale' }, at: AT })]);
    await sm.restore({
      meta: { index: snap.index, term: 1, conf: { voters: [], learners: [] } },
      data: snap.data,
    } as never);
    expect(store.appliedIndex).toBe(30);
    await new Promise((r) => setTimeout(r, WRITE_BEHIND_INTERVAL_MS * 2));
    await store.close();
    const again = await Store.open(dir, new Schema(defs));
    expect(again.appliedIndex).toBe(30);
    expect(again.get('things', 'stale')).toBeUndefined();
    expect(again.collection('things').size).toBe(30);
    await again.close();
  });
});
