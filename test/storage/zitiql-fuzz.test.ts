/**
 * Fuzzing the ZitiQL front end (parse → compile → execute, as a list request runs it): grammar-based filters,
 * the same with bytes damaged, random characters and inputs built to stress the parser's bounds. Whatever the
 * input, the only thing thrown is the typed QueryError (with one of its three codes), and no input takes long.
 * Seeded like test/api/fuzz.test.ts (KEEL_FUZZ_SEED, KEEL_FUZZ_RUNS; docs/fuzzing.md).
 */
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { FIXTURE_SYMBOLS, fixtureSource } from '../../storage/zitiql/fixture.js';
import { executeQuery, QueryError, resolveListQuery } from '../../storage/zitiql/index.js';
import {
  damage,
  type FuzzField,
  fuzzSeeds,
  grammarFilter,
  pathologicalFilter,
  pick,
  randomChars,
} from '../support/fuzz.js';
import { rng } from '../support/rng.js';

const SEEDS = fuzzSeeds([1]);
/** Inputs of each kind per seed. */
const INPUTS = 1_500;
/** Longest any one input may take, generous for a loaded machine (a bound, not a benchmark). */
const MAX_INPUT_MS = 250;

const FIELDS: readonly FuzzField[] = [
  ['id', 'string'],
  ['name', 'string'],
  ['type', 'string'],
  ['cost', 'number'],
  ['ratio', 'number'],
  ['enabled', 'bool'],
  ['createdAt', 'datetime'],
  ['lastSeen', 'datetime'],
  ['description', 'string'],
  ['roleAttributes', 'set'],
  ['scores', 'set'],
  ['links', 'set'],
  ['links.name', 'set'],
  ['tags.env', 'string'],
  ['tags.tier', 'number'],
  ['nope', '?'],
];
const CODES = new Set(['INVALID_FILTER', 'INVALID_PAGINATION', 'INVALID_SORT_IDENTIFIER']);
const source = fixtureSource();

/** Runs one list request's query; returns what went wrong (null: answered or refused with a QueryError). */
function run(filter: string, sort: string | undefined, limit: string, offset: string): string | null {
  try {
    const q = resolveListQuery({ filter, sort, limit, offset }, FIXTURE_SYMBOLS);
    const result = executeQuery(source, q.compiled, { limit: q.limit, offset: q.offset });
    if (!Number.isInteger(result.totalCount) || result.rows.length > result.totalCount) return 'bad result';
    return null;
  } catch (err) {
    if (!(err instanceof QueryError)) return `threw ${(err as Error)?.stack ?? err}`;
    if (!CODES.has(err.code) || typeof err.reason !== 'string' || err.reason === '') return `bad QueryError ${err}`;
    return null;
  }
}

describe('ZitiQL fuzzing', () => {
  for (const seed of SEEDS) {
    it(`seed ${seed}: any filter, sort and page is answered or refused with a QueryError, promptly`, () => {
      const r = rng(seed);
      const failures: string[] = [];
      let slowest = { ms: 0, input: '' };
      const inputs: (() => string)[] = [
        () => grammarFilter(r, FIELDS),
        () => damage(r, grammarFilter(r, FIELDS)),
        () => randomChars(r, 80),
      ];
      const all: string[] = [];
      for (const make of inputs) for (let i = 0; i < INPUTS; i++) all.push(make());
      for (let i = 0; i < 60; i++) all.push(pathologicalFilter(r));
      for (const filter of all) {
        const sort = r() < 0.3 ? pick(r, ['name desc', 'nope', 'cost asc, ratio desc', randomChars(r, 12)]) : undefined;
        const limit = pick(r, ['', '5', '-1', '0', 'x', '99999999999999999999']);
        const offset = pick(r, ['', '1', '-3', '100001', '1.5']);
        const t0 = performance.now();
        const problem = run(filter, sort, limit, offset);
        const ms = performance.now() - t0;
        if (ms > slowest.ms) slowest = { ms, input: filter.slice(0, 120) };
        if (problem !== null) failures.push(`${JSON.stringify(filter.slice(0, 300))} sort ${sort}: ${problem}`);
      }
      expect(failures, `seed ${seed}: KEEL_FUZZ_SEED=${seed} replays it`).toEqual([]);
      expect(slowest.ms, `seed ${seed}: slowest input ${JSON.stringify(slowest.input)}`).toBeLessThan(MAX_INPUT_MS);
    });
  }
});
