/**
 * The store's write path (LocalProposer → Store.applyGroup → LevelDB) across simulated power cuts: the store runs
 * on the Raft log's power-loss disk (raft/storage/power-loss-testkit.ts, through test/support/store-dbs.ts), which
 * keeps every synced write that reported success and drops a random suffix of the others. After each cut the
 * reopened store must hold every acknowledged write. Changing the store's batch write to `{ sync: false }` makes
 * this fail (kill -9 cannot show it: the OS page cache survives a killed process, not a power cut).
 */
import { describe, expect, it } from 'vitest';
import { SeededRandom } from '../../raft/random.js';
import { PowerLossDisk } from '../../raft/storage/power-loss-testkit.js';
import { LocalProposer } from '../../storage/local-proposer.js';
import { Schema } from '../../storage/schema.js';
import { Store } from '../../storage/store.js';
import type { Command, EntityDef } from '../../storage/types.js';
import { storeDbOverLogDb } from '../support/store-dbs.js';
import { tempDirs } from '../support/temp-dir.js';

const defs: EntityDef[] = [{ name: 'things', type: 'thing', fields: { name: { type: 'string', unique: true } } }];
const AT = '2026-01-01T00:00:00.000Z';
const ROUNDS = 6;
const PROPOSALS_PER_ROUND = 60;
const tempDir = tempDirs('keel-powerloss-');

/** What the acknowledgements promise: rows that exist, and the least version each row holds. */
interface Acked {
  versions: Map<string, number>;
  index: number;
}

describe('store on a power-loss disk', () => {
  for (const seed of [1, 2, 3]) {
    it(`keeps every acknowledged write across power cuts (seed ${seed})`, async () => {
      const rnd = new SeededRandom(seed);
      const disk = new PowerLossDisk(tempDir(), rnd, 1);
      const acked: Acked = { versions: new Map(), index: 0 };
      let version = 0;
      try {
        for (let round = 0; round < ROUNDS; round++) {
          const store = await Store.open(storeDbOverLogDb(disk.db()), new Schema(defs));
          // everything acknowledged before the last cut is still there
          for (const [id, v] of acked.versions) {
            const row = store.get('things', id);
            expect(row, `row ${id} acknowledged before cut ${round}`).toBeDefined();
            expect(row!.tags.v as number).toBeGreaterThanOrEqual(v);
          }
          expect(store.appliedIndex).toBeGreaterThanOrEqual(acked.index);

          const proposer = new LocalProposer(store, { maxQueued: 1_000, sync: true });
          const cutAfter = 1 + rnd.int(PROPOSALS_PER_ROUND - 1);
          let acks = 0;
          let cut: Promise<void> | null = null;
          const known = [...acked.versions.keys()];
          const pending: Promise<unknown>[] = [];
          for (let i = 0; i < PROPOSALS_PER_ROUND && cut === null; i++) {
            const v = ++version;
            const existing = known.length > 0 && rnd.int(3) === 0 ? known[rnd.int(known.length)]! : null;
            const id = existing ?? `r${round}-${i}`;
            const cmd: Command =
              existing === null
                ? { op: 'create', entity: 'things', id, data: { name: id, tags: { v } }, at: AT }
                : { op: 'update', entity: 'things', id, set: { tags: { v } }, at: AT };
            const p = proposer.propose(cmd).then(
              (r) => {
                if (!r.ok) return;
                acked.versions.set(id, Math.max(acked.versions.get(id) ?? 0, v));
                acked.index = Math.max(acked.index, store.appliedIndex);
                if (++acks === cutAfter) cut = disk.powerLoss();
              },
              () => {}, // written when the power went: not acknowledged
            );
            pending.push(p);
            if (rnd.int(4) === 0) await new Promise((r) => setTimeout(r, rnd.int(3)));
          }
          await Promise.all(pending);
          if (cut === null) cut = disk.powerLoss();
          await cut;
          await proposer.close();
          await store.close();
        }
        expect(disk.stats.powerLosses).toBe(ROUNDS);
        expect(acked.versions.size).toBeGreaterThan(ROUNDS);
        // the premise: cuts hit writes that had not reported success, and the disk dropped some of them
        expect(disk.stats.uncertainLost + disk.stats.uncertainKept).toBeGreaterThan(0);
      } finally {
        await disk.close();
      }
    });
  }
});
