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
    // One test file per core, and one more. Vitest's default keeps a core for its own process (one worker on a
    // 2-core machine), but that process only schedules, and most files spend their time waiting on timers, sockets
    // and child processes (the suite used 1.3 of 2 cores with two workers): on 2 cores the whole suite took about
    // 325 s with one worker, 237 s with two and 200–209 s with three (2026-11-27).
    maxWorkers: Math.max(2, availableParallelism()) + 1,
    reporters: ['default'],
  },
});
