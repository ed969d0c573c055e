import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: [
      'test/**/*.test.ts',
      'raft/**/*.test.ts',
      'storage/**/*.test.ts',
      'http/**/*.test.ts',
      'src/**/*.test.ts',
    ],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // One test file per core. Vitest's default keeps a core for its own process (one worker on a 2-core
    // machine), but that process only schedules, and most files spend their time waiting on timers, sockets
    // and child processes: on 2 cores the whole suite takes about 200 s with two workers against 325 s with one.
    maxWorkers: Math.max(2, availableParallelism()),
    reporters: ['default'],
  },
});
