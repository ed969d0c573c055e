import { describe, expect, it } from 'vitest';
import { QueryError } from './errors.js';
import { FIXTURE_SYMBOLS } from './fixture.js';
import { type ListQueryParams, resolveListQuery } from './pagination.js';

const resolve = (params: ListQueryParams) => resolveListQuery(params, FIXTURE_SYMBOLS);
const page = (params: ListQueryParams) => {
  const r = resolve(params);
  return { limit: r.limit, offset: r.offset };
};

function failure(params: ListQueryParams): QueryError {
  try {
    resolve(params);
  } catch (err) {
    if (err instanceof QueryError) return err;
    throw err;
  }
  throw new Error(`expected ${JSON.stringify(params)} to fail`);
}

describe('resolveListQuery: limit and offset params', () => {
  it('defaults to limit 10, offset 0', () => {
    expect(page({})).toEqual({ limit: 10, offset: 0 });
    expect(page({ limit: '', offset: '' })).toEqual({ limit: 10, offset: 0 });
  });

  it('applies checkLimits: 0 or < -1 → 10, > 500 → 500, -1 passes', () => {
    expect(page({ limit: '7' })).toEqual({ limit: 7, offset: 0 });
    expect(page({ limit: '+7' })).toEqual({ limit: 7, offset: 0 });
    expect(page({ limit: '0' })).toEqual({ limit: 10, offset: 0 });
    expect(page({ limit: '-2' })).toEqual({ limit: 10, offset: 0 });
    expect(page({ limit: '-1' })).toEqual({ limit: -1, offset: 0 });
    expect(page({ limit: '500' })).toEqual({ limit: 500, offset: 0 });
    expect(page({ limit: '501' })).toEqual({ limit: 500, offset: 0 });
    expect(page({ limit: '9223372036854775807' })).toEqual({ limit: 500, offset: 0 });
  });

  it('clamps offset to [0, 100000]', () => {
    expect(page({ offset: '5' })).toEqual({ limit: 10, offset: 5 });
    expect(page({ offset: '-1' })).toEqual({ limit: 10, offset: 0 });
    expect(page({ offset: '100000' })).toEqual({ limit: 10, offset: 100000 });
    expect(page({ offset: '100001' })).toEqual({ limit: 10, offset: 100000 });
  });

  it('rejects a non-integer limit or offset with INVALID_PAGINATION naming the field', () => {
    for (const bad of ['abc', '1.5', ' 5', '5 ', '1e2', '0x10', '9223372036854775808', '-']) {
      const err = failure({ limit: bad });
      expect(err.code).toBe('INVALID_PAGINATION');
      expect(err.field).toBe('limit');
      expect(err.value).toBe(bad);
      expect(err.reason).toBe('could not parse limit, value is not an integer');
    }
    const err = failure({ offset: 'ten' });
    expect(err.code).toBe('INVALID_PAGINATION');
    expect(err.field).toBe('offset');
    expect(err.reason).toBe('could not parse offset, value is not an integer');
  });

  it('reports bad pagination before a bad filter (as OpenZiti parses paging first)', () => {
    expect(failure({ limit: 'x', filter: 'nope = 1' }).code).toBe('INVALID_PAGINATION');
  });
});

describe("resolveListQuery: the filter's skip/limit win, then checkLimits applies", () => {
  it('uses the filter values over the params', () => {
    expect(page({ filter: 'true skip 2 limit 3', limit: '50', offset: '9' })).toEqual({ limit: 3, offset: 2 });
    expect(page({ filter: 'true skip 4', limit: '50', offset: '9' })).toEqual({ limit: 50, offset: 4 });
    expect(page({ filter: 'true limit 4', limit: '50', offset: '9' })).toEqual({ limit: 4, offset: 9 });
  });

  it('clamps the filter values too; limit none is -1', () => {
    expect(page({ filter: 'true limit none', limit: '5' })).toEqual({ limit: -1, offset: 0 });
    expect(page({ filter: 'limit -1' })).toEqual({ limit: -1, offset: 0 });
    expect(page({ filter: 'limit 1000' })).toEqual({ limit: 500, offset: 0 });
    expect(page({ filter: 'limit 0' })).toEqual({ limit: 10, offset: 0 });
    expect(page({ filter: 'skip -3' })).toEqual({ limit: 10, offset: 0 });
    expect(page({ filter: 'skip 200000' })).toEqual({ limit: 10, offset: 100000 });
  });

  it('keeps the compiled filter, its skip/limit as written, and match-all for an empty filter', () => {
    const r = resolve({ filter: 'cost > 5 limit 1000' });
    expect(r.compiled.limit).toBe(1000);
    expect(r.compiled.predicate({ cost: 6 })).toBe(true);
    expect(r.compiled.predicate({ cost: 5 })).toBe(false);
    expect(resolve({}).compiled.matchesAll).toBe(true);
  });

  it('reports a bad filter as INVALID_FILTER on field filter', () => {
    const err = failure({ filter: 'name = ' });
    expect(err.code).toBe('INVALID_FILTER');
    expect(err.field).toBe('filter');
    expect(err.value).toBe('name = ');
    expect(err.position?.column).toBe(7);
  });
});

describe('resolveListQuery: the sort param', () => {
  it('is parsed as `true sort by <sort>`', () => {
    const r = resolve({ sort: 'name desc, cost' });
    expect(r.compiled.sort.map((s) => [s.name, s.desc])).toEqual([
      ['name', true],
      ['cost', false],
    ]);
    expect(resolve({ sort: 'type ASC' }).compiled.sort.map((s) => [s.name, s.desc])).toEqual([['type', false]]);
  });

  it('is ignored when the filter has its own sort by; its skip/limit never apply', () => {
    expect(resolve({ filter: 'true sort by cost', sort: 'name' }).compiled.sort.map((s) => s.name)).toEqual(['cost']);
    expect(page({ sort: 'name skip 2 limit 3' })).toEqual({ limit: 10, offset: 0 });
    expect(resolve({ sort: 'name limit 3' }).compiled.sort.map((s) => s.name)).toEqual(['name']);
  });

  it('keeps at most 5 sort fields', () => {
    expect(resolve({ sort: 'type, name, cost, ratio, enabled, createdAt, lastSeen' }).compiled.sort).toHaveLength(5);
  });

  it('reports problems as INVALID_SORT_IDENTIFIER on field sort, positioned in the param', () => {
    const cases: [string, string, number][] = [
      ['nope', "unknown symbol 'nope'", 0],
      ['name, nope desc', "unknown symbol 'nope'", 6],
      ['roleAttributes', "invalid sort field 'roleAttributes': set symbols cannot be sorted", 0],
      ['description', "invalid sort field 'description': symbol is not sortable", 0],
      ['name sideways', "mismatched input 'sideways'", 5],
      ['name,', "mismatched input '<EOF>' expecting IDENTIFIER", 5],
      ['name desc) or (true', "mismatched input ')'", 9],
      ['#', 'token recognition error', 0],
    ];
    for (const [sort, reason, column] of cases) {
      const err = failure({ sort });
      expect(err.code).toBe('INVALID_SORT_IDENTIFIER');
      expect(err.field).toBe('sort');
      expect(err.value).toBe(sort);
      expect(err.reason).toContain(reason);
      expect(err.position?.column).toBe(column);
    }
  });

  it('is not validated when the filter already sorts (as OpenZiti)', () => {
    expect(() => resolve({ filter: 'sort by name', sort: 'nope' })).not.toThrow();
  });
});
