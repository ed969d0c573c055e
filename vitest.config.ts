import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Test files that replace a module (`vi.mock`): they need a module graph of their own. Every other file shares its
 * worker's modules with the files the worker ran before (`isolate: false`): a fresh process per file made every
 * file load and evaluate the whole program and its dependencies again (about 3 s each on 2 cores), and the suite
 * took 357–378 s on a slow day against 228 s shared (2026-11-28). Tests therefore must not depend on module state
 * another file may have left (they start their own controllers, ports and directories).
 * `KEEL_TEST_ISOLATE=1` isolates every file (the mutants' runs do: a broken module must not outlive its run).
 */
const MOCKING = ['test/api/enroll.test.ts'];
const isolateAll = process.env.KEEL_TEST_ISOLATE === '1';

/**
 * The files that take longest (30–95 s each on 2 cores), started first: vitest orders files by the durations it
 * cached on earlier runs, and a fresh clone (CI) has none, so it would start them by size and end on one of them
 * alone. Only the order changes; a file missing from the list runs as vitest would order it.
 */
const SLOW_FIRST = [
  'raft/sim/sim.test.ts',
  'test/cluster/cluster.test.ts',
  'test/cluster/local.test.ts',
  'raft/storage/wal.model.test.ts',
  'test/cli/process.test.ts',
  'test/api/authz.test.ts',
  'test/api/enroll.test.ts',
];
class SlowFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => {
      const i = SLOW_FIRST.findIndex((s) => f.moduleId.endsWith(`/${s}`));
      return i === -1 ? SLOW_FIRST.length : i;
    };
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // One test file per core, and one more. Vitest's default keeps a core for its own process (one worker on a
    // 2-core machine), but that process only schedules, and most files spend their time waiting on timers, sockets
    // and child processes (the suite used 1.3 of 2 cores with two workers): on 2 cores the whole suite took about
    // 325 s with one worker, 237 s with two and 200–209 s with three (2026-11-27).
    maxWorkers: Math.max(2, availableParallelism()) + 1,
    reporters: ['default'],
    setupFiles: ['test/support/per-file.ts'],
    sequence: { sequencer: SlowFirst },
    projects: [
      {
        extends: true,
        test: {
          name: 'keel',
          include: [
            'test/**/*.test.ts',
            'raft/**/*.test.ts',
            'storage/**/*.test.ts',
            'http/**/*.test.ts',
            'src/**/*.test.ts',
          ],
          exclude: [...configDefaults.exclude, ...MOCKING],
          isolate: isolateAll,
        },
      },
      { extends: true, test: { name: 'mocking', include: MOCKING, isolate: true } },
    ],
  },
});
