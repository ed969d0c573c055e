// Runs before every test file (vitest `setupFiles`). Files share their worker's modules (`isolate: false` in
// vitest.config.ts), so what a file's coverage checks read must start empty for each file: a file's own calls, not
// those of the files its worker ran before, must cover what it claims to.
import { beforeAll } from 'vitest';
import { startFile } from './spec-check.js';

interface Task {
  type: string;
  mode: string;
  tasks?: Task[];
}

/** Whether every test of the file runs: not a run filtered by name (`vitest -t`, the mutants' `only`). */
function everyTestRuns(task: Task): boolean {
  if (task.type === 'test') return task.mode === 'run';
  return (task.tasks ?? []).every(everyTestRuns);
}

// vitest hands a hook its fixtures first (which must be destructured if named) and the suite, here the file, second
// biome-ignore lint/correctness/noEmptyPattern: vitest requires the fixtures' argument to be a pattern
beforeAll(({}, file) => {
  startFile(everyTestRuns(file as unknown as Task));
});
