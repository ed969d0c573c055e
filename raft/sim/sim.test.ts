/**
 * Deterministic simulation over a fixed seed range (about a minute on a 2-core machine), plus replay
 * determinism. Every seed ends with the convergence check (every member applied every acknowledged entry).
 * Any failing seed can be replayed with `npm run sim -- --seed N --verbose`.
 */
import { describe, expect, it } from 'vitest';
import { runSimulation } from './cluster.js';

const FIRST_SEED = 1;
const SEEDS = 5000;
const CHUNK = 500;

describe('raft simulation', () => {
  it('replays a seed exactly', () => {
    const a = runSimulation({ seed: 12345, trace: true });
    const b = runSimulation({ seed: 12345, trace: true });
    expect(a.ok).toBe(true);
    expect(b.stats).toEqual(a.stats);
    expect(b.trace).toEqual(a.trace);
    expect(a.stats.acked).toBeGreaterThan(0);
  });

  for (let from = FIRST_SEED; from < FIRST_SEED + SEEDS; from += CHUNK) {
    const to = from + CHUNK - 1;
    it(`seeds ${from}..${to} keep every safety property, recover liveness and converge`, () => {
      const totals = { elections: 0, acked: 0, crashes: 0, partitions: 0, snapshots: 0, confChanges: 0, reads: 0 };
      // Paths only small clusters and the driver model reach.
      const rare = {
        singleVoterCommits: 0,
        singleVoterReads: 0,
        commitsLost: 0,
        commitsRaised: 0,
        appAheadRestarts: 0,
        leaderWritesLost: 0,
        snapshotsDeferred: 0,
        snapshotsOnRequest: 0,
        held: 0,
      };
      for (let seed = from; seed <= to; seed++) {
        const r = runSimulation({ seed });
        if (!r.ok) {
          const replay = runSimulation({ seed, trace: true });
          throw new Error(`seed ${seed}: ${r.violation}\n  params: ${r.params}\n${replay.trace.join('\n')}`);
        }
        totals.elections += r.stats.elections;
        totals.acked += r.stats.acked;
        totals.crashes += r.stats.crashes;
        totals.partitions += r.stats.partitions;
        totals.snapshots += r.stats.snapshotsInstalled;
        totals.confChanges += r.stats.confChanges;
        totals.reads += r.stats.reads;
        for (const k of Object.keys(rare) as (keyof typeof rare)[]) rare[k] += r.stats[k];
      }
      // The range really exercised the protocol (guards against a simulator that silently does nothing).
      for (const [k, v] of Object.entries(totals)) expect(v, k).toBeGreaterThan(CHUNK / 10);
      for (const [k, v] of Object.entries(rare)) expect(v, k).toBeGreaterThan(CHUNK / 100);
    }, 300_000);
  }
});
