/**
 * Proof that the checks added for small clusters work: deliberately broken cores (broken-cores.ts) that no
 * other property flags cleanly must be caught by the check written for them, within a fixed seed range.
 */
import { describe, expect, it } from 'vitest';
import { brokenCores } from './broken-cores.js';
import { type CoreFactory, runSimulation } from './cluster.js';

const SEED_RANGE = 300;

function firstViolation(factory: CoreFactory): { seed: number; kind: string | null; violation: string | null } | null {
  for (let seed = 1; seed <= SEED_RANGE; seed++) {
    const r = runSimulation({ seed, coreFactory: factory });
    if (!r.ok) return { seed, kind: r.kind, violation: r.violation };
  }
  return null;
}

describe('the simulator checks durability at exposure and convergence', () => {
  const cases: [string, CoreFactory, string][] = [
    [
      'a leader counting its own entries before they are durable while it sends them',
      brokenCores.selfAckAtAppend,
      'commit-durability',
    ],
    ['a leader stalling its learners', brokenCores.ignoreLearnerAcks, 'convergence'],
  ];
  for (const [name, factory, kind] of cases) {
    it(`${name}: caught as ${kind}`, () => {
      const found = firstViolation(factory);
      expect(found, `no violation within seeds 1..${SEED_RANGE}`).not.toBeNull();
      expect(found!.kind, `${found!.violation}`).toBe(kind);
      const replay = runSimulation({ seed: found!.seed, coreFactory: factory });
      expect(replay.violation).toBe(found!.violation);
    }, 120_000);
  }
});
