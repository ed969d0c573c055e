import { describe, expect, it } from 'vitest';
import { compileQuery } from './compile.js';
import { chooseCandidates, executeQuery, type RowSource } from './executor.js';
import { FIXTURE_ROWS, FIXTURE_SYMBOLS, type FixtureRow, fixtureSource } from './fixture.js';
import { memoryRowSource } from './memory-source.js';
import { parseQuery } from './parser.js';

interface Spied<R> extends RowSource<R> {
  scans: number;
  scannedRows: number;
  lookups: string[];
  gets: number;
}

/** Wraps a source and counts what the executor asks of it. */
function spy<R>(inner: RowSource<R>): Spied<R> {
  const spied: Spied<R> = {
    scans: 0,
    scannedRows: 0,
    lookups: [],
    gets: 0,
    size: inner.size,
    *scan() {
      spied.scans++;
      for (const row of inner.scan()) {
        spied.scannedRows++;
        yield row;
      }
    },
    get(id) {
      spied.gets++;
      return inner.get(id);
    },
    idOf: (row) => inner.idOf(row),
    lookup(name, value) {
      spied.lookups.push(`${name}=${String(value)}`);
      return inner.lookup(name, value);
    },
  };
  return spied;
}

const unindexed = memoryRowSource(FIXTURE_ROWS, { idOf: (r) => r.id });

function run(source: RowSource<FixtureRow>, text: string, page = { limit: -1, offset: 0 }) {
  const result = executeQuery(source, compileQuery(parseQuery(text), FIXTURE_SYMBOLS), page);
  return { ids: result.rows.map((r) => r.id), totalCount: result.totalCount };
}

describe('planner: index hints instead of scans', () => {
  it('answers an indexed equality without scan() and returns what a scan returns', () => {
    const source = spy(fixtureSource());
    const viaIndex = run(source, 'name = "cache"');
    expect(source.scans).toBe(0);
    expect(source.lookups).toEqual(['name=cache']);
    expect(viaIndex).toEqual({ ids: ['e5'], totalCount: 1 });
    const scanned = spy(unindexed);
    expect(run(scanned, 'name = "cache"')).toEqual(viaIndex);
    expect(scanned.scans).toBe(1);
  });

  it('answers id = / id in [...] with get(), without scan() or lookup()', () => {
    const source = spy(fixtureSource());
    expect(run(source, 'id in ["e5", "a1", "zz", "a1"]')).toEqual({ ids: ['a1', 'e5'], totalCount: 2 });
    expect(run(source, 'id = "c3"')).toEqual({ ids: ['c3'], totalCount: 1 });
    expect(run(source, 'id = "nope"')).toEqual({ ids: [], totalCount: 0 });
    expect(source.scans).toBe(0);
    expect(source.lookups).toEqual([]);
    expect(run(spy(unindexed), 'id in ["e5", "a1", "zz"]')).toEqual({ ids: ['a1', 'e5'], totalCount: 2 });
  });

  it('unions the ids of each value of an indexed in, then applies the whole predicate', () => {
    const source = spy(fixtureSource());
    const result = run(source, 'anyOf(roleAttributes) in ["web", "db"] and cost >= 10');
    expect(result).toEqual({ ids: ['a1', 'b2'], totalCount: 2 });
    expect(result).toEqual(run(unindexed, 'anyOf(roleAttributes) in ["web", "db"] and cost >= 10'));
    expect(source.scans).toBe(0);
    expect(source.lookups).toEqual(['roleAttributes=web', 'roleAttributes=db']);
  });

  it('picks the most selective hint and abandons larger ones early', () => {
    const source = spy(fixtureSource());
    const filter = 'anyOf(roleAttributes) = "web" and name = "web-server" and cost in [10, 20, 0]';
    const q = compileQuery(parseQuery(filter), FIXTURE_SYMBOLS);
    expect(chooseCandidates(source, q.indexHints)).toEqual(['a1']);
    source.gets = 0;
    expect(executeQuery(source, q, { limit: -1, offset: 0 }).rows.map((r) => r.id)).toEqual(['a1']);
    expect(source.scans).toBe(0);
    expect(source.gets).toBe(1); // only the single candidate was fetched
    expect(run(unindexed, filter).ids).toEqual(['a1']);
  });

  it('stops at an empty hint and returns nothing without scanning', () => {
    const source = spy(fixtureSource());
    expect(run(source, 'name = "missing" and anyOf(roleAttributes) = "web"')).toEqual({ ids: [], totalCount: 0 });
    expect(source.scans).toBe(0);
    expect(source.lookups).toEqual(['name=missing']);
  });

  it('scans when no hint is usable: or, not, unindexed symbols, lookup() returning undefined', () => {
    for (const filter of ['name = "cache" or cost = 10', 'not name = "cache"', 'type = "Router"']) {
      const source = spy(fixtureSource());
      expect(run(source, filter)).toEqual(run(unindexed, filter));
      expect(source.scans).toBe(1);
    }
    const source = spy(unindexed);
    expect(run(source, 'name = "cache"').ids).toEqual(['e5']);
    expect(source.lookups).toEqual(['name=cache']);
    expect(source.scans).toBe(1);
  });

  it('pages candidates and counts them all', () => {
    const source = spy(fixtureSource());
    expect(run(source, 'anyOf(roleAttributes) in ["web", "prod"]', { limit: 1, offset: 1 })).toEqual({
      ids: ['b2'],
      totalCount: 3,
    });
    expect(source.scans).toBe(0);
  });
});

describe('executor: default order, paging, counting', () => {
  it('returns rows in id order with the total of all matches', () => {
    expect(run(fixtureSource(), 'cost >= 0', { limit: 2, offset: 1 })).toEqual({ ids: ['b2', 'd4'], totalCount: 4 });
    expect(run(fixtureSource(), 'cost >= 0', { limit: 10, offset: 10 })).toEqual({ ids: [], totalCount: 4 });
    expect(run(fixtureSource(), 'cost >= 0', { limit: 0, offset: 0 })).toEqual({ ids: [], totalCount: 4 });
    expect(run(fixtureSource(), 'cost >= 0', { limit: -1, offset: 3 })).toEqual({ ids: ['e5'], totalCount: 4 });
  });

  it('without a filter, stops reading scan() once the page is full and reports size', () => {
    const source = spy(fixtureSource());
    expect(run(source, '', { limit: 2, offset: 1 })).toEqual({ ids: ['b2', 'c3'], totalCount: 5 });
    expect(source.scannedRows).toBe(3);
    expect(run(spy(fixtureSource()), 'true sort by id', { limit: 1, offset: 0 })).toEqual({
      ids: ['a1'],
      totalCount: 5,
    });
    const empty = spy(fixtureSource());
    expect(run(empty, '', { limit: 0, offset: 0 })).toEqual({ ids: [], totalCount: 5 });
    expect(empty.scans).toBe(0);
  });

  it('rejects invalid pages (programming errors)', () => {
    const q = compileQuery(parseQuery(''), FIXTURE_SYMBOLS);
    expect(() => executeQuery(fixtureSource(), q, { limit: -2, offset: 0 })).toThrow(/limit/);
    expect(() => executeQuery(fixtureSource(), q, { limit: 1, offset: -1 })).toThrow(/offset/);
    expect(() => executeQuery(fixtureSource(), q, { limit: 1.5, offset: 0 })).toThrow(/limit/);
  });
});

describe('executor: sorting (nulls first ascending, last descending, id asc tiebreak)', () => {
  const sorted = (text: string, page = { limit: -1, offset: 0 }) => run(fixtureSource(), text, page).ids;

  it('sorts strings by code unit with nulls first', () => {
    expect(sorted('sort by name')).toEqual(['d4', 'b2', 'e5', 'c3', 'a1']);
    expect(sorted('sort by name desc')).toEqual(['a1', 'c3', 'e5', 'b2', 'd4']);
  });

  it('sorts numbers, bools and datetimes (Date, epoch ms and ISO strings alike)', () => {
    expect(sorted('sort by cost')).toEqual(['c3', 'd4', 'a1', 'b2', 'e5']);
    expect(sorted('sort by cost desc')).toEqual(['e5', 'b2', 'a1', 'd4', 'c3']);
    expect(sorted('sort by ratio')).toEqual(['d4', 'a1', 'b2', 'c3', 'e5']);
    expect(sorted('sort by createdAt')).toEqual(['d4', 'a1', 'c3', 'b2', 'e5']);
    expect(sorted('sort by lastSeen')).toEqual(['b2', 'e5', 'd4', 'c3', 'a1']);
    expect(sorted('sort by enabled, name')).toEqual(['c3', 'b2', 'e5', 'd4', 'a1']);
  });

  it('breaks ties by id ascending whatever the direction', () => {
    expect(sorted('sort by type')).toEqual(['b2', 'a1', 'c3', 'd4', 'e5']);
    expect(sorted('sort by type desc')).toEqual(['d4', 'e5', 'a1', 'c3', 'b2']);
    expect(sorted('sort by type desc, cost')).toEqual(['d4', 'e5', 'c3', 'a1', 'b2']);
  });

  it('sorts by id in either direction', () => {
    expect(sorted('sort by id desc')).toEqual(['e5', 'd4', 'c3', 'b2', 'a1']);
    expect(sorted('cost >= 0 sort by id desc', { limit: 2, offset: 1 })).toEqual(['d4', 'b2']);
    expect(sorted('sort by id asc', { limit: 2, offset: 3 })).toEqual(['d4', 'e5']);
  });

  it('pages a sorted result (bounded top-k) and counts all matches', () => {
    expect(run(fixtureSource(), 'sort by cost', { limit: 2, offset: 1 })).toEqual({ ids: ['d4', 'a1'], totalCount: 5 });
    expect(run(fixtureSource(), 'cost != 20 sort by cost desc', { limit: 2, offset: 0 })).toEqual({
      ids: ['e5', 'a1'],
      totalCount: 4,
    });
    expect(run(fixtureSource(), 'sort by cost', { limit: 0, offset: 0 })).toEqual({ ids: [], totalCount: 5 });
    expect(run(fixtureSource(), 'sort by cost', { limit: 3, offset: 4 })).toEqual({ ids: ['e5'], totalCount: 5 });
    // every page of a top-k equals the same slice of the full sort
    const full = sorted('sort by name desc, cost');
    for (let offset = 0; offset < 6; offset++) {
      for (let limit = 1; limit < 4; limit++) {
        expect(sorted('sort by name desc, cost', { limit, offset })).toEqual(full.slice(offset, offset + limit));
      }
    }
  });

  it('sorts candidates from an index', () => {
    const source = spy(fixtureSource());
    expect(run(source, 'anyOf(roleAttributes) in ["web", "prod"] sort by cost desc').ids).toEqual(['b2', 'a1', 'd4']);
    expect(source.scans).toBe(0);
  });
});
