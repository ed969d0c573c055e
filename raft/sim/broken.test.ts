/**
 * Proof that the checker works: each deliberately broken core (broken-cores.ts), broken client behaviour
 * (SimOptions.brokenClient) or broken driver behaviour (SimOptions.brokenDriver) must be caught within a fixed seed range by the check written for that property, as
 * the first violation of the first failing seed. Every safety check has a case here or in checks.test.ts, so
 * turning any one of them off fails a test.
 */
import { describe, expect, it } from 'vitest';
import { brokenCores } from './broken-cores.js';
import { runSimulation, type SimOptions } from './cluster.js';

const SEED_RANGE = 1000;

type Broken = Omit<SimOptions, 'seed'>;

function firstViolation(broken: Broken): { seed: number; kind: string | null; violation: string | null } | null {
  for (let seed = 1; seed <= SEED_RANGE; seed++) {
    const r = runSimulation({ seed, ...broken });
    if (!r.ok) return { seed, kind: r.kind, violation: r.violation };
  }
  return null;
}

describe('the simulator catches broken cores, each with the check for its property', () => {
  const cases: [string, Broken, string][] = [
    [
      'votes granted without the log up-to-date check',
      { coreFactory: brokenCores.noLogCheckVote },
      'leader-completeness',
    ],
    ['votes from a stale term counted', { coreFactory: brokenCores.staleVoteCounting }, 'election-quorum'],
    [
      'previous-term entries committed by counting replicas (Figure 8)',
      { coreFactory: brokenCores.previousTermCommit },
      'commit-durability',
    ],
    [
      'a transfer target taking over in the same term',
      { coreFactory: brokenCores.sameTermTakeover },
      'election-safety',
    ],
    [
      'a leader whose disk copy of an entry differs from the wire',
      { coreFactory: brokenCores.leaderDiskCodec },
      'log-matching',
    ],
    ['a client re-proposing a proposal whose outcome is unknown', { brokenClient: 'blindRetry' }, 'exactly-once'],
    [
      'a leader that holds proposals (one batch in flight) and never releases them',
      { brokenDriver: 'neverRelease' },
      'liveness',
    ],
  ];
  for (const [name, broken, kind] of cases) {
    it(`${name}: caught as ${kind}`, () => {
      const found = firstViolation(broken);
      expect(found, `no violation within seeds 1..${SEED_RANGE}`).not.toBeNull();
      expect(found!.kind, `${found!.violation}`).toBe(kind);
      // The failing seed replays to the same violation.
      const replay = runSimulation({ seed: found!.seed, ...broken });
      expect(replay.violation).toBe(found!.violation);
    }, 120_000);
  }
});
