import { describe, expect, it } from 'vitest';
import { compileQuery } from './compile.js';
import { QueryError } from './errors.js';
import { executeQuery } from './executor.js';
import { FIXTURE_SYMBOLS, fixtureSource } from './fixture.js';
import { parseQuery } from './parser.js';
import { createSymbolTable } from './symbols.js';

const source = fixtureSource();

/** Ids (ascending) of the fixture rows matching a filter. Fixture: a1, b2, c3, d4, e5 (see fixture.ts). */
function ids(filter: string): string[] {
  const compiled = compileQuery(parseQuery(filter), FIXTURE_SYMBOLS);
  return executeQuery(source, compiled, { limit: -1, offset: 0 }).rows.map((r) => r.id);
}

function compileError(filter: string): QueryError {
  try {
    compileQuery(parseQuery(filter), FIXTURE_SYMBOLS);
  } catch (err) {
    if (err instanceof QueryError) return err;
    throw err;
  }
  throw new Error(`expected ${JSON.stringify(filter)} to fail`);
}

describe('string symbols', () => {
  it('compares with = != < <= > >= (code-unit order, null fails all but !=)', () => {
    expect(ids('name = "cache"')).toEqual(['e5']);
    expect(ids('name != "cache"')).toEqual(['a1', 'b2', 'c3', 'd4']);
    expect(ids('name < "c"')).toEqual(['b2']);
    expect(ids('name <= "cache"')).toEqual(['b2', 'e5']);
    expect(ids('name > "cache"')).toEqual(['a1', 'c3']);
    expect(ids('name >= "d"')).toEqual(['a1', 'c3']);
    expect(ids('name = "db \\"main\\"\\n"')).toEqual(['c3']);
  });

  it('converts number literals to strings', () => {
    expect(ids('description = 64')).toEqual(['e5']);
    expect(ids('description in [64, 1]')).toEqual(['e5']);
    expect(ids('description contains 6')).toEqual(['e5']);
  });

  it('contains is case-sensitive, icontains is not; negations are true for null', () => {
    expect(ids('name contains "eb"')).toEqual(['a1', 'b2']);
    expect(ids('name contains "Web"')).toEqual(['b2']);
    expect(ids('name icontains "WEB"')).toEqual(['a1', 'b2']);
    expect(ids('name not contains "web"')).toEqual(['b2', 'c3', 'd4', 'e5']);
    expect(ids('name not icontains "web"')).toEqual(['c3', 'd4', 'e5']);
  });

  it('in / not in (null is not in any list)', () => {
    expect(ids('name in ["cache", "web-server", "zzz"]')).toEqual(['a1', 'e5']);
    expect(ids('name not in ["cache"]')).toEqual(['a1', 'b2', 'c3', 'd4']);
    const many = Array.from({ length: 20 }, (_, i) => `"n${i}"`).join(',');
    expect(ids(`name in [${many}, "cache"]`)).toEqual(['e5']);
  });
});

describe('number symbols', () => {
  it('compares numerically, int and float alike', () => {
    expect(ids('cost = 10')).toEqual(['a1']);
    expect(ids('cost = 10.0')).toEqual(['a1']);
    expect(ids('cost != 10')).toEqual(['b2', 'c3', 'd4', 'e5']);
    expect(ids('cost < 10')).toEqual(['d4']);
    expect(ids('cost <= 10')).toEqual(['a1', 'd4']);
    expect(ids('cost > 10')).toEqual(['b2', 'e5']);
    expect(ids('cost >= 20')).toEqual(['b2', 'e5']);
    expect(ids('ratio = 1.25')).toEqual(['b2']);
    expect(ids('ratio > 1')).toEqual(['b2', 'c3', 'e5']);
    expect(ids('ratio < -1e0')).toEqual(['d4']);
    expect(ids('ratio = 1e3')).toEqual(['e5']);
  });

  it('in, between (half-open: lower <= x < upper) and their negations', () => {
    expect(ids('cost in [0, 20]')).toEqual(['b2', 'd4']);
    expect(ids('cost not in [0, 20]')).toEqual(['a1', 'c3', 'e5']);
    expect(ids('cost between 10 and 100')).toEqual(['a1', 'b2']);
    expect(ids('cost not between 10 and 100')).toEqual(['c3', 'd4', 'e5']);
    expect(ids('ratio between -2 and 0.5')).toEqual(['d4']);
  });

  it('contains tests the decimal text; `in` a string list compares as strings (OpenZiti quirk)', () => {
    expect(ids('cost contains 0')).toEqual(['a1', 'b2', 'd4', 'e5']);
    expect(ids('cost not contains 0')).toEqual(['c3']);
    expect(ids('cost contains "2"')).toEqual(['b2']);
    expect(ids('cost in ["10", "0"]')).toEqual(['a1', 'd4']);
  });

  it('null comparisons', () => {
    expect(ids('cost = null')).toEqual(['c3']);
    expect(ids('cost != null')).toEqual(['a1', 'b2', 'd4', 'e5']);
  });
});

describe('datetime symbols (ISO strings, Date, epoch ms)', () => {
  it('compares instants across offsets and fractions', () => {
    expect(ids('createdAt = datetime(2024-01-01T00:00:00Z)')).toEqual(['a1']);
    expect(ids('createdAt = datetime(2024-01-01T02:00:00+01:00)')).toEqual(['c3']);
    expect(ids('createdAt = datetime(2024-03-15T12:30:00.25Z)')).toEqual(['b2']);
    expect(ids('createdAt != datetime(2024-01-01T00:00:00Z)')).toEqual(['b2', 'c3', 'd4', 'e5']);
    expect(ids('createdAt > datetime(2024-01-01T00:00:00Z)')).toEqual(['b2', 'c3', 'e5']);
    expect(ids('createdAt >= datetime(2024-01-01T00:00:00Z)')).toEqual(['a1', 'b2', 'c3', 'e5']);
    expect(ids('createdAt < datetime(2024-01-01T00:00:00Z)')).toEqual(['d4']);
    expect(ids('createdAt <= datetime(2024-01-01T00:00:00Z)')).toEqual(['a1', 'd4']);
  });

  it('in and between (half-open)', () => {
    expect(ids('createdAt in [datetime(2025-01-01T00:00:00Z), datetime(2022-06-01T00:00:00Z)]')).toEqual(['d4', 'e5']);
    expect(ids('createdAt between datetime(2024-01-01T00:00:00Z) and datetime(2024-01-01T01:00:00Z)')).toEqual(['a1']);
    expect(ids('createdAt not between datetime(2024-01-01T00:00:00Z) and datetime(2024-01-01T01:00:00Z)')).toEqual([
      'b2',
      'c3',
      'd4',
      'e5',
    ]);
  });

  it('normalises Date objects and epoch ms, and handles null', () => {
    expect(ids('lastSeen > datetime(2024-01-01T00:00:00Z)')).toEqual(['a1', 'c3']);
    expect(ids('lastSeen = datetime(2024-01-02T00:00:00Z)')).toEqual(['c3']);
    expect(ids('lastSeen = null')).toEqual(['b2', 'e5']);
  });
});

describe('bool symbols', () => {
  it('= / != read a missing value as false (as OpenZiti BoolSymbolNode)', () => {
    expect(ids('enabled = true')).toEqual(['a1', 'd4']);
    expect(ids('enabled = false')).toEqual(['b2', 'c3', 'e5']);
    expect(ids('enabled != true')).toEqual(['b2', 'c3', 'e5']);
    expect(ids('enabled != false')).toEqual(['a1', 'd4']);
  });

  it('a bool symbol is an expression; null comparisons see the real null', () => {
    expect(ids('enabled')).toEqual(['a1', 'd4']);
    expect(ids('not enabled')).toEqual(['b2', 'c3', 'e5']);
    expect(ids('enabled = null')).toEqual(['c3']);
    expect(ids('enabled != null')).toEqual(['a1', 'b2', 'd4', 'e5']);
  });
});

describe("map entries (type 'any'): the literal decides the operation type", () => {
  it('compares strings, numbers and bools', () => {
    expect(ids('tags.env = "prod"')).toEqual(['a1', 'd4']);
    expect(ids('tags.env != "prod"')).toEqual(['b2', 'c3', 'e5']);
    expect(ids('tags.tier = 1')).toEqual(['a1']);
    expect(ids('tags.tier > 1')).toEqual(['d4']);
    expect(ids('tags.tier = "3"')).toEqual(['e5']);
    expect(ids('tags.tier in [1, 2]')).toEqual(['a1', 'd4']);
    expect(ids('tags.tier between 1 and 3')).toEqual(['a1', 'd4']);
    expect(ids('tags.tier contains 3')).toEqual(['e5']);
    expect(ids('tags.managed = true')).toEqual(['a1']);
    expect(ids('tags.managed')).toEqual(['a1']);
  });

  it('missing keys are null', () => {
    expect(ids('tags.env = null')).toEqual(['c3']);
    expect(ids('tags.env != null')).toEqual(['a1', 'b2', 'd4', 'e5']);
    expect(ids('tags.nothing = null')).toEqual(['a1', 'b2', 'c3', 'd4', 'e5']);
  });
});

describe('boolean logic', () => {
  it('and / or / not / parentheses / constants', () => {
    expect(ids('type = "Router" and cost > 5')).toEqual(['a1']);
    expect(ids('type = "Router" or cost > 50')).toEqual(['a1', 'c3', 'e5']);
    expect(ids('type = "Identity" or type = "Service" and cost > 50')).toEqual(['b2', 'e5']);
    expect(ids('(type = "Identity" or type = "Service") and cost > 10')).toEqual(['b2', 'e5']);
    expect(ids('name contains "e" and not (type = "Router")')).toEqual(['b2', 'e5']);
    expect(ids('not not enabled')).toEqual(['a1', 'd4']);
    expect(ids('true')).toEqual(['a1', 'b2', 'c3', 'd4', 'e5']);
    expect(ids('false')).toEqual([]);
    expect(ids('false or enabled')).toEqual(['a1', 'd4']);
    expect(ids('')).toEqual(['a1', 'b2', 'c3', 'd4', 'e5']);
    expect(ids('cost = 1 or true')).toEqual(['a1', 'b2', 'c3', 'd4', 'e5']);
  });
});

describe('set symbols', () => {
  it('anyOf: some element matches; allOf: every element matches (vacuously true when empty/null)', () => {
    expect(ids('anyOf(roleAttributes) = "web"')).toEqual(['a1', 'b2']);
    expect(ids('anyOf(roleAttributes) != "web"')).toEqual(['a1', 'd4']);
    expect(ids('allOf(roleAttributes) = "web"')).toEqual(['b2', 'c3', 'e5']);
    expect(ids('anyOf(roleAttributes) in ["db", "x"]')).toEqual(['d4']);
    expect(ids('allOf(roleAttributes) in ["web", "prod"]')).toEqual(['a1', 'b2', 'c3', 'e5']);
    expect(ids('anyOf(roleAttributes) contains "ro"')).toEqual(['a1', 'd4']);
    expect(ids('anyOf(roleAttributes) icontains "WE"')).toEqual(['a1', 'b2']);
    expect(ids('anyOf(scores) > 4')).toEqual(['c3', 'e5']);
    expect(ids('allOf(scores) < 5')).toEqual(['a1', 'b2', 'd4']);
    expect(ids('anyOf(scores) between 2 and 3')).toEqual(['a1', 'd4']);
  });

  it('not in / not between negate the whole set function; not contains applies per element', () => {
    expect(ids('anyOf(roleAttributes) not in ["web"]')).toEqual(['c3', 'd4', 'e5']);
    expect(ids('anyOf(scores) not between 2 and 3')).toEqual(['b2', 'c3', 'e5']);
    expect(ids('anyOf(roleAttributes) not contains "web"')).toEqual(['a1', 'd4']);
  });

  it('count and isEmpty', () => {
    expect(ids('count(roleAttributes) = 2')).toEqual(['a1', 'd4']);
    expect(ids('count(roleAttributes) = 0')).toEqual(['c3', 'e5']);
    expect(ids('count(links) >= 1')).toEqual(['a1', 'c3', 'd4']);
    expect(ids('count(scores) between 1 and 3')).toEqual(['c3', 'd4', 'e5']);
    expect(ids('isEmpty(roleAttributes)')).toEqual(['c3', 'e5']);
    expect(ids('not isEmpty(links) and count(links) = 3')).toEqual(['d4']);
  });

  it('from <relation> where <query> sub-queries', () => {
    expect(ids('count(from links where up = true) = 2')).toEqual(['d4']);
    expect(ids('count(from links where up) = 1')).toEqual(['a1', 'c3']);
    expect(ids('isEmpty(from links where cost > 5)')).toEqual(['b2', 'c3', 'e5']);
    expect(ids('isEmpty(from links where name = "alpha" and not up)')).toEqual(['a1', 'b2', 'c3', 'd4', 'e5']);
    expect(ids('not isEmpty(from links where name in ["gamma", "delta"])')).toEqual(['c3', 'd4']);
  });

  it('dotted traversal through a relation', () => {
    expect(ids('anyOf(links.name) = "alpha"')).toEqual(['a1', 'd4']);
    expect(ids('anyOf(links.cost) > 8')).toEqual(['d4']);
    expect(ids('allOf(links.up) = true')).toEqual(['b2', 'c3', 'e5']);
    expect(ids('count(links.name) = 3')).toEqual(['d4']);
  });
});

describe('type and symbol errors → INVALID_FILTER naming the symbol and the problem', () => {
  const cases: [string, string, number][] = [
    ['nmae = "x"', "unknown symbol 'nmae'", 0],
    ['cost > 1 and tags = "x"', "unknown symbol 'tags'", 13],
    ['roleAttributes = "web"', "symbol 'roleAttributes' is a set symbol but is used in non-set function context", 0],
    ['anyOf(name) = "x"', "symbol 'name' is not a set symbol but is used in set function anyOf", 6],
    ['allOf(cost) = 1', "symbol 'cost' is not a set symbol but is used in set function allOf", 6],
    ['count(name) = 1', "symbol 'name' is not a set symbol but is used in set function count", 6],
    ['isEmpty(name)', "symbol 'name' is not a set symbol but is used in set function isEmpty", 8],
    ['enabled < 1', "operation '<' is not supported with operand types bool (symbol 'enabled') and number", 0],
    [
      'enabled contains "t"',
      "operation 'contains' is not supported with operand types bool (symbol 'enabled') and string",
      0,
    ],
    ['createdAt icontains "2024"', "operation 'icontains' is not supported with operand types datetime", 0],
    [
      'createdAt = "2024-01-01T00:00:00Z"',
      "operation '=' is not supported with operand types datetime (symbol 'createdAt') and string",
      0,
    ],
    ['createdAt > 5', "operation '>' is not supported with operand types datetime", 0],
    ['cost = "10"', "operation '=' is not supported with operand types number (symbol 'cost') and string", 0],
    [
      'name = datetime(2024-01-01T00:00:00Z)',
      "operation '=' is not supported with operand types string (symbol 'name') and datetime",
      0,
    ],
    ['name = true', "operation '=' is not supported with operand types string (symbol 'name') and bool", 0],
    ['enabled = "true"', "operation '=' is not supported with operand types bool (symbol 'enabled') and string", 0],
    ['name', "symbol 'name' is of type string, not bool, and cannot be used as a boolean expression", 0],
    ['enabled and cost', "symbol 'cost' is of type number, not bool", 12],
    [
      'name between 1 and 2',
      "operation 'between' is not supported with operand types string (symbol 'name') and numbers",
      0,
    ],
    [
      'cost between datetime(2024-01-01T00:00:00Z) and datetime(2025-01-01T00:00:00Z)',
      "operation 'between' is not supported with operand types number (symbol 'cost') and datetimes",
      0,
    ],
    [
      'name in [datetime(2024-01-01T00:00:00Z)]',
      "operation 'in' is not supported with operand types string (symbol 'name') and datetime array",
      0,
    ],
    ['enabled in ["true"]', "operation 'in' is not supported with operand types bool", 0],
    ['count(links) = null', "operation '=' is not supported with operand types number (count(links)) and null", 0],
    ['count(links) = "2"', "operation '=' is not supported with operand types number (count(links)) and string", 0],
    ['anyOf(scores) = "x"', "operation '=' is not supported with operand types number (anyOf(scores)) and string", 0],
    ['count(from roleAttributes where true) = 1', 'attempt to subquery on non-entity symbol roleAttributes', 11],
    ['isEmpty(from links where nope = 1)', "unknown symbol 'nope'", 25],
    [
      'isEmpty(from links where cost = "x")',
      "operation '=' is not supported with operand types number (symbol 'cost') and string",
      25,
    ],
    ['anyOf(links.nope) = 1', "unknown symbol 'links.nope'", 6],
    ['true sort by nope', "unknown symbol 'nope'", 13],
    ['true sort by roleAttributes', "invalid sort field 'roleAttributes': set symbols cannot be sorted", 13],
    ['true sort by description', "invalid sort field 'description': symbol is not sortable", 13],
    ['true sort by tags.env', "invalid sort field 'tags.env': symbol is not sortable", 13],
  ];
  for (const [filter, reason, column] of cases) {
    it(`${filter} → ${reason}`, () => {
      const err = compileError(filter);
      expect(err.code).toBe('INVALID_FILTER');
      expect(err.field).toBe('filter');
      expect(err.value).toBe(filter);
      expect(err.reason).toContain(reason);
      expect(err.position?.column).toBe(column);
      expect(err.reason.startsWith(`line 1:${column} `)).toBe(true);
    });
  }

  it('accepts what OpenZiti accepts', () => {
    for (const ok of [
      'cost contains "1"',
      'tags.env contains 1',
      'anyOf(roleAttributes) = null',
      'count(links) contains 1',
      'description < 5',
      'anyOf(scores) in ["1"]',
      'anyOf(roleAttributes) > 5',
    ]) {
      expect(() => compileQuery(parseQuery(ok), FIXTURE_SYMBOLS)).not.toThrow();
    }
  });
});

describe('compiled query shape', () => {
  it('keeps skip/limit from the text, at most 5 sort fields, and flags match-all', () => {
    const q = compileQuery(
      parseQuery('sort by type, name desc, cost, ratio, enabled, createdAt skip 3 limit none'),
      FIXTURE_SYMBOLS,
    );
    expect(q.sort.map((s) => [s.name, s.desc])).toEqual([
      ['type', false],
      ['name', true],
      ['cost', false],
      ['ratio', false],
      ['enabled', false],
    ]);
    expect(q.skip).toBe(3);
    expect(q.limit).toBe(-1);
    expect(q.matchesAll).toBe(true);
    expect(compileQuery(parseQuery('true'), FIXTURE_SYMBOLS).matchesAll).toBe(true);
    expect(compileQuery(parseQuery('enabled'), FIXTURE_SYMBOLS).matchesAll).toBe(false);
    const plain = compileQuery(parseQuery('enabled'), FIXTURE_SYMBOLS);
    expect(plain.skip).toBeNull();
    expect(plain.limit).toBeNull();
  });

  it('derives index hints from top-level AND conjuncts on indexed symbols only', () => {
    const hints = (filter: string) => compileQuery(parseQuery(filter), FIXTURE_SYMBOLS).indexHints;
    expect(hints('name = "cache"')).toEqual([{ name: 'name', values: ['cache'] }]);
    expect(hints('id in ["a", "b", "a"]')).toEqual([{ name: 'id', values: ['a', 'b'] }]);
    expect(hints('anyOf(roleAttributes) in ["web", "db"] and cost = 10 and type = "Router"')).toEqual([
      { name: 'roleAttributes', values: ['web', 'db'] },
      { name: 'cost', values: [10] },
    ]);
    expect(hints('name = 5')).toEqual([{ name: 'name', values: ['5'] }]);
    expect(hints('name = "a" or cost = 1')).toEqual([]);
    expect(hints('not name = "a"')).toEqual([]);
    expect(hints('name not in ["a"]')).toEqual([]);
    expect(hints('name != "a"')).toEqual([]);
    expect(hints('allOf(roleAttributes) = "web"')).toEqual([]);
    expect(hints('cost in ["1"]')).toEqual([]);
    expect(hints('type = "Router"')).toEqual([]);
    expect(hints('type = "x" and (cost = 2 and (name = "b" or cost = 3))')).toEqual([{ name: 'cost', values: [2] }]);
    expect(hints('(name = "a" and cost = 1)')).toEqual([
      { name: 'name', values: ['a'] },
      { name: 'cost', values: [1] },
    ]);
  });

  it('resolves a relation whose rows are not sets (a foreign key) to a scalar, sortable symbol', () => {
    const owners = createSymbolTable({
      symbols: { name: { type: 'string', set: false, get: (o: { name: string }) => o.name } },
    });
    const table = createSymbolTable({
      symbols: {
        id: { type: 'string', set: false, get: (r: { id: string }) => r.id },
        owner: {
          type: 'string',
          set: false,
          get: (r: { owner: { name: string } | null }) => r.owner?.name ?? null,
          relation: { symbols: owners, rows: (r: { owner: { name: string } | null }) => (r.owner ? [r.owner] : []) },
        },
      },
    });
    const q = compileQuery(parseQuery('owner.name = "ann" sort by owner.name'), table);
    expect(q.predicate({ id: 'x', owner: { name: 'ann' } })).toBe(true);
    expect(q.predicate({ id: 'y', owner: null })).toBe(false);
    expect(q.sort[0]?.symbol.set).toBe(false);
  });
});
