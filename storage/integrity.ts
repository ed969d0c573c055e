/**
 * Data integrity of a store's published state (docs/operations.md, "Data integrity"): what apply and publish keep
 * true on every write, checked again from scratch.
 *
 * - every collection's id order, equality and unique indexes equal those its rows give when indexed afresh;
 * - every reference (`ref` field) names an existing row, every `@id` of a role list an existing row;
 * - every derived index equals the same declaration rebuilt from the collections.
 *
 * With `fix`, what lives only in this node's memory is repaired: collection indexes are rebuilt from the rows and
 * derived indexes rebuilt from the collections. A dangling reference is in the rows themselves (on disk, on every
 * member): it is reported, not changed here (a repair would have to be a replicated write).
 *
 * Each unit (one collection, one derived index) is checked in one synchronous step, so it sees one published state;
 * the check yields to the event loop between units.
 */
import type { Store } from './store.js';
import { assert } from './types.js';

export interface IntegrityFinding {
  description: string;
  fixed: boolean;
}

export interface IntegrityReport {
  findings: IntegrityFinding[];
  /** More problems were found than `maxFindings`; the rest were not listed. */
  tooManyErrors: boolean;
}

const yieldToEventLoop = (): Promise<void> => new Promise((done) => setImmediate(done));

export async function checkIntegrity(
  store: Store,
  opts: { fix: boolean; maxFindings: number },
): Promise<IntegrityReport> {
  assert(opts.maxFindings > 0, 'maxFindings must be positive');
  const findings: IntegrityFinding[] = [];
  let tooManyErrors = false;
  const room = () => opts.maxFindings - findings.length;
  const report = (descriptions: string[], fixed: boolean) => {
    for (const description of descriptions) {
      if (room() > 0) findings.push({ description, fixed });
      else tooManyErrors = true;
    }
  };

  let repairedIndexes = false;
  for (const def of store.schema.defs.values()) {
    const c = store.collection(def.name);
    // one more than there is room for tells that some were left out
    const problems = c.indexProblems(room() + 1);
    if (problems.length > 0 && opts.fix) {
      c.reindex();
      repairedIndexes = true;
    }
    report(problems, opts.fix && c.indexProblems(1).length === 0);

    const dangling: string[] = [];
    for (const row of c.scan()) {
      if (dangling.length > room()) break;
      for (const [field, f] of Object.entries(def.fields)) {
        const target = f.ref?.entity ?? f.roles?.entity;
        if (target === undefined) continue;
        const values = Array.isArray(row[field]) ? (row[field] as unknown[]) : [row[field]];
        for (const v of values) {
          if (typeof v !== 'string' || v === '') continue;
          const id = f.roles ? (v.startsWith('@') ? v.slice(1) : null) : v;
          if (id !== null && !store.get(target, id)) {
            dangling.push(`${def.name} ${row.id}: ${field} names ${target} ${id}, which does not exist`);
          }
        }
      }
    }
    report(dangling, false);
    await yieldToEventLoop();
  }

  for (const { index, fresh } of store.derived.withFresh()) {
    const rebuilt = fresh();
    rebuilt.rebuild(store);
    const problems = index.diff(rebuilt, room() + 1);
    if (problems.length > 0 && opts.fix) index.rebuild(store);
    report(problems, opts.fix && index.diff(rebuilt, 1).length === 0);
    await yieldToEventLoop();
  }
  // rendered answers cached per store epoch or stamp may have been computed from a damaged index
  if (repairedIndexes || findings.some((f) => f.fixed)) store.invalidateAll();
  return { findings, tooManyErrors };
}
