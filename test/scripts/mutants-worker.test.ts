// The mutant runner's worker (scripts/mutants-worker.mjs) keeps one vitest up for many mutants: a failure of one
// mutant's run must never count for the next, and a filter that selects no test must not pass for a kill.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ES module script without types
import { makeWorkspace, startWorker } from '../../scripts/mutants.mjs';

interface Answer {
  killed?: boolean;
  ran?: number;
  failed?: string[];
  crashed?: string;
  timedOut?: boolean;
}
interface Worker {
  run(m: object): Promise<Answer>;
  kill(): void;
}

const root = mkdtempSync(join(tmpdir(), 'keel-mutants-test-'));
let worker: Worker | null = null;
afterAll(() => {
  worker?.kill();
  rmSync(root, { recursive: true, force: true });
});

const FILE = 'storage/apply.ts';
const RULE = 'const holders = this.txn.lookup(def.name, field, v);\n    if (heldByAnother(holders, row.id)) {';
const TESTS = ['test/storage/store.test.ts'];

describe('the mutant worker', () => {
  it('judges each mutant by its own run, restores the file, and reports a filter that ran nothing', async () => {
    const dir = makeWorkspace(root, 'w0');
    const original = readFileSync(join(dir, FILE), 'utf8');
    worker = (await startWorker(dir)) as Worker;
    const broken = await worker.run({
      id: 'broken',
      file: FILE,
      search: RULE,
      replace: RULE.replace('row.id)) {', 'row.id) && false) {'),
      tests: TESTS,
    });
    expect(broken.killed, JSON.stringify(broken)).toBe(true);
    expect(broken.failed?.length).toBeGreaterThan(0);
    expect(readFileSync(join(dir, FILE), 'utf8')).toBe(original);
    // a change that breaks nothing, tested by another file, then by the same: the last run's failure does not count
    for (const tests of [['src/schema/nil-arrays.test.ts'], TESTS]) {
      const harmless = await worker.run({
        id: 'harmless',
        file: FILE,
        search: RULE,
        replace: `/* unchanged */ ${RULE}`,
        tests,
      });
      expect(harmless, JSON.stringify(harmless)).toMatchObject({ killed: false, failed: [] });
      expect(harmless.ran).toBeGreaterThan(0);
    }
    const none = await worker.run({
      id: 'none',
      file: FILE,
      search: RULE,
      replace: RULE.replace('row.id)) {', 'row.id) && false) {'),
      tests: TESTS,
      only: 'no test has this name',
    });
    expect(none, JSON.stringify(none)).toMatchObject({ killed: false, ran: 0 });
    expect(readFileSync(join(dir, FILE), 'utf8')).toBe(original);
  });
});
