#!/usr/bin/env node
// One mutant slot of `npm run mutants` (scripts/mutants.mjs): a vitest that stays up in one workspace (a copy of the
// repository) and runs mutant after mutant, so each run pays only for its test files, not for starting vitest and
// transforming the program again (about 3 s of a 5 s run on 2 cores).
//
// Protocol (Node IPC): the parent sends `{ id, file, search, replace, tests, only }`; the worker writes the mutated
// file, tells vitest the file changed, runs the tests (stopping at the first failure), writes the original back,
// tells vitest again, and answers `{ id, killed, ran, failed, errors, ms }`. `ready` is sent once vitest is up.
// Every test file runs in a fresh process of its own (KEEL_TEST_ISOLATE=1), so a mutated module never outlives its
// run. The parent kills the worker's process group if a run outlives its bound, restores the file itself, and starts
// another worker.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

process.env.KEEL_TEST_ISOLATE = '1';
process.env.FORCE_COLOR = '0';
process.env.NO_COLOR = '1';
const dir = process.argv[2];
if (!dir || !process.send) {
  console.error('usage: started by scripts/mutants.mjs with a workspace directory and an IPC channel');
  process.exit(2);
}
process.chdir(dir);
const { createVitest } = await import('vitest/node');

/** A reporter that reports nothing: the parent prints the results. */
const silent = { onInit() {} };
const vitest = await createVitest('test', {
  root: dir,
  watch: false,
  bail: 1,
  maxWorkers: 1,
  reporters: [silent],
});

/** A pattern matching the test names that contain `text` literally. */
const literally = (text) => new RegExp(text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'));

async function run(m) {
  const started = Date.now();
  const path = join(dir, m.file);
  const original = readFileSync(path, 'utf8');
  // the parent checked the list against the repository; the copy must still hold the text, or nothing is tested
  if (!original.includes(m.search)) throw new Error(`the search text is not in the workspace's ${m.file}`);
  writeFileSync(
    path,
    original.replace(m.search, () => m.replace),
  );
  vitest.invalidateFile(path);
  try {
    if (m.only === undefined) vitest.resetGlobalTestNamePattern();
    else vitest.setGlobalTestNamePattern(literally(m.only));
    const specs = await vitest.globTestSpecifications(m.tests);
    // vitest keeps every file's last results: forget these files' (an earlier mutant's failure must not count)
    for (const spec of specs) vitest.state.clearFiles(spec.project, [spec.moduleId]);
    const result = await vitest.runTestSpecifications(specs);
    const failed = [];
    const errors = [];
    let ran = 0;
    // the run's own files only: `result.testModules` holds every file this vitest ever ran
    const modules = vitest.state.getTestModules(specs.map((s) => s.moduleId));
    for (const mod of modules) {
      for (const e of mod.errors()) errors.push(`${mod.relativeModuleId}: ${e.message}`);
      // a failing hook of a describe (its tests are then skipped, the error is the suite's)
      for (const suite of mod.children.allSuites())
        for (const e of suite.errors()) errors.push(`${mod.relativeModuleId} > ${suite.fullName}: ${e.message}`);
      if (mod.state() === 'failed' && errors.length === 0) errors.push(`${mod.relativeModuleId}: failed`);
      for (const t of mod.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed' || state === 'failed') ran++;
        if (state === 'failed')
          failed.push(`${mod.relativeModuleId} > ${t.fullName}: ${t.result().errors?.[0]?.message ?? ''}`);
      }
    }
    for (const e of result.unhandledErrors) errors.push(`unhandled: ${e?.message ?? String(e)}`);
    const killed = failed.length > 0 || errors.length > 0;
    return { id: m.id, killed, ran, files: specs.length, failed, errors, ms: Date.now() - started };
  } finally {
    writeFileSync(path, original);
    vitest.invalidateFile(path);
  }
}

process.on('message', (m) => {
  run(m).then(
    (r) => process.send(r),
    (e) => process.send({ id: m.id, crashed: String(e?.stack ?? e) }),
  );
});
process.on('disconnect', () => {
  vitest.close().finally(() => process.exit(0));
});
process.send({ ready: true });
