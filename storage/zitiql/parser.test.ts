import { describe, expect, it } from 'vitest';
import type { BoolExpr, Query } from './ast.js';
import { QueryError } from './errors.js';
import { MAX_FILTER_CHARS } from './lexer.js';
import { MAX_IN_VALUES, MAX_NESTING_DEPTH, parseQuery, parseSortSpec } from './parser.js';

function filterOf(text: string): BoolExpr {
  const q = parseQuery(text);
  if (q.filter === null) throw new Error(`no filter in ${text}`);
  return q.filter;
}

/** A compact rendering of the tree: makes precedence and structure assertions exact. */
function show(e: BoolExpr): string {
  const lhs = (l: Extract<BoolExpr, { kind: 'compare' }>['lhs']): string => {
    switch (l.kind) {
      case 'symbol':
        return l.symbol.name;
      case 'anyOf':
      case 'allOf':
        return `${l.kind}(${l.symbol.name})`;
      case 'count':
        return l.set.kind === 'set' ? `count(${l.set.symbol.name})` : `count(from ${l.set.symbol.name} where …)`;
    }
  };
  const lit = (l: import('./ast.js').Literal): string => {
    switch (l.kind) {
      case 'string':
        return JSON.stringify(l.value);
      case 'number':
        return String(l.value);
      case 'datetime':
        return `dt(${l.ms})`;
      case 'bool':
        return String(l.value);
      case 'null':
        return 'null';
    }
  };
  switch (e.kind) {
    case 'or':
      return `(${e.operands.map(show).join(' OR ')})`;
    case 'and':
      return `(${e.operands.map(show).join(' AND ')})`;
    case 'not':
      return `NOT ${show(e.operand)}`;
    case 'const':
      return String(e.value);
    case 'boolSymbol':
      return e.symbol.name;
    case 'isEmpty':
      return `isEmpty(${e.set.symbol.name}${e.set.kind === 'subquery' ? ' where …' : ''})`;
    case 'compare':
      return `${lhs(e.lhs)} ${e.op} ${lit(e.rhs)}`;
    case 'in':
      return `${lhs(e.lhs)} ${e.negated ? 'NOT IN' : 'IN'} [${e.values.map(lit).join(',')}]`;
    case 'between':
      return `${lhs(e.lhs)} ${e.negated ? 'NOT BETWEEN' : 'BETWEEN'} ${lit(e.lower)}..${lit(e.upper)}`;
    case 'contains':
      return `${lhs(e.lhs)} ${e.negated ? 'NOT ' : ''}${e.caseInsensitive ? 'ICONTAINS' : 'CONTAINS'} ${lit(e.rhs)}`;
  }
}

function parseError(text: string): QueryError {
  try {
    parseQuery(text);
  } catch (err) {
    if (err instanceof QueryError) return err;
    throw err;
  }
  throw new Error(`expected ${JSON.stringify(text)} to fail`);
}

describe('parseQuery: grammar rules', () => {
  it('parses every comparison operator with each literal type', () => {
    expect(show(filterOf('name = "web"'))).toBe('name = "web"');
    expect(show(filterOf('name != "web"'))).toBe('name != "web"');
    expect(show(filterOf('cost < 5'))).toBe('cost < 5');
    expect(show(filterOf('cost <= 5'))).toBe('cost <= 5');
    expect(show(filterOf('cost > -5'))).toBe('cost > -5');
    expect(show(filterOf('cost >= 5.5'))).toBe('cost >= 5.5');
    expect(show(filterOf('name<"m"'))).toBe('name < "m"');
    expect(show(filterOf('enabled = true'))).toBe('enabled = true');
    expect(show(filterOf('enabled != FALSE'))).toBe('enabled != false');
    expect(show(filterOf('name = null'))).toBe('name = null');
    expect(show(filterOf('name != NULL'))).toBe('name != null');
    expect(show(filterOf('createdAt > datetime(2024-01-01T00:00:00Z)'))).toBe(
      `createdAt > dt(${Date.UTC(2024, 0, 1)})`,
    );
  });

  it('parses in and not in with string, number and datetime lists', () => {
    expect(show(filterOf('id in ["a", "b"]'))).toBe('id IN ["a","b"]');
    expect(show(filterOf('cost not in [1,2.5, -3]'))).toBe('cost NOT IN [1,2.5,-3]');
    expect(show(filterOf('createdAt in [datetime(2024-01-01T00:00:00Z)]'))).toBe(
      `createdAt IN [dt(${Date.UTC(2024, 0, 1)})]`,
    );
  });

  it('parses between and not between (the AND inside between is not a boolean and)', () => {
    expect(show(filterOf('cost between 0 and 100 and name = "x"'))).toBe('(cost BETWEEN 0..100 AND name = "x")');
    expect(show(filterOf('cost not between 1e2 and 2E+3'))).toBe('cost NOT BETWEEN 100..2000');
    expect(show(filterOf('createdAt between datetime(2024-01-01T00:00:00Z) and datetime(2025-01-01T00:00:00Z)'))).toBe(
      `createdAt BETWEEN dt(${Date.UTC(2024, 0, 1)})..dt(${Date.UTC(2025, 0, 1)})`,
    );
  });

  it('parses contains / icontains and their negations', () => {
    expect(show(filterOf('name contains "corp"'))).toBe('name CONTAINS "corp"');
    expect(show(filterOf('name not contains 12'))).toBe('name NOT CONTAINS 12');
    expect(show(filterOf('name icontains "Web"'))).toBe('name ICONTAINS "Web"');
    expect(show(filterOf('name NOT ICONTAINS "Web"'))).toBe('name NOT ICONTAINS "Web"');
  });

  it('binds and tighter than or, and not tighter than and', () => {
    expect(show(filterOf('a = 1 or b = 2 and c = 3'))).toBe('(a = 1 OR (b = 2 AND c = 3))');
    expect(show(filterOf('a = 1 and b = 2 or c = 3'))).toBe('((a = 1 AND b = 2) OR c = 3)');
    expect(show(filterOf('not a = 1 and b = 2'))).toBe('(NOT a = 1 AND b = 2)');
    expect(show(filterOf('a = 1 and b = 2 and c = 3 or d = 4 or e = 5'))).toBe(
      '((a = 1 AND b = 2 AND c = 3) OR d = 4 OR e = 5)',
    );
  });

  it('parses parentheses and nested not', () => {
    expect(show(filterOf('(a = 1 or b = 2) and c = 3'))).toBe('((a = 1 OR b = 2) AND c = 3)');
    expect(show(filterOf('not not (a = 1)'))).toBe('NOT NOT a = 1');
    expect(show(filterOf('not (a = 1 or not b = 2)'))).toBe('NOT (a = 1 OR NOT b = 2)');
    expect(show(filterOf('((((enabled))))'))).toBe('enabled');
  });

  it('parses set functions: anyOf, allOf, count, isEmpty and from ... where sub-queries', () => {
    expect(show(filterOf('anyOf(roleAttributes) = "web"'))).toBe('anyOf(roleAttributes) = "web"');
    expect(show(filterOf('allOf(roleAttributes) in ["a","b"]'))).toBe('allOf(roleAttributes) IN ["a","b"]');
    expect(show(filterOf('count(links) >= 2'))).toBe('count(links) >= 2');
    expect(show(filterOf('isEmpty(links)'))).toBe('isEmpty(links)');
    expect(show(filterOf('not isEmpty(links) and count(links) = 3'))).toBe('(NOT isEmpty(links) AND count(links) = 3)');
    const sub = filterOf('count(from links where up = true and cost > 2) = 1');
    expect(show(sub)).toBe('count(from links where …) = 1');
    if (sub.kind !== 'compare' || sub.lhs.kind !== 'count' || sub.lhs.set.kind !== 'subquery') throw new Error('shape');
    expect(show(sub.lhs.set.query.filter!)).toBe('(up = true AND cost > 2)');
    const empty = filterOf('isEmpty(from links where name = "x" sort by name limit 1)');
    if (empty.kind !== 'isEmpty' || empty.set.kind !== 'subquery') throw new Error('shape');
    expect(empty.set.query.sort.map((s) => s.symbol.name)).toEqual(['name']);
    expect(empty.set.query.limit?.value).toBe(1);
  });

  it('parses datetimes per RFC 3339 with offsets, fractions and inner whitespace', () => {
    const ms = (text: string): number => {
      const f = filterOf(`createdAt = ${text}`);
      if (f.kind !== 'compare' || f.rhs.kind !== 'datetime') throw new Error('shape');
      return f.rhs.ms;
    };
    expect(ms('datetime(2021-01-01T00:00:00Z)')).toBe(Date.UTC(2021, 0, 1));
    expect(ms('datetime(2021-01-01T02:30:00+02:30)')).toBe(Date.UTC(2021, 0, 1));
    expect(ms('datetime(2020-12-31T19:00:00-05:00)')).toBe(Date.UTC(2021, 0, 1));
    expect(ms('datetime( 2021-01-01t00:00:00.125z )')).toBe(Date.UTC(2021, 0, 1) + 125);
    expect(ms('datetime(2021-01-01T00:00:00.0005Z)')).toBeCloseTo(Date.UTC(2021, 0, 1) + 0.5, 6);
    expect(ms('DATETIME(2024-02-29T23:59:59Z)')).toBe(Date.UTC(2024, 1, 29, 23, 59, 59));
  });

  it('parses numbers: int, float, exponent, negative', () => {
    const num = (text: string): number => {
      const f = filterOf(`cost = ${text}`);
      if (f.kind !== 'compare' || f.rhs.kind !== 'number') throw new Error('shape');
      return f.rhs.value;
    };
    expect(num('0')).toBe(0);
    expect(num('42')).toBe(42);
    expect(num('-7')).toBe(-7);
    expect(num('3.25')).toBe(3.25);
    expect(num('-0.5')).toBe(-0.5);
    expect(num('1e3')).toBe(1000);
    expect(num('2.5E-2')).toBe(0.025);
  });

  it('parses strings with every escape', () => {
    const f = filterOf('name = "a\\"b\\\\c\\fd\\ne\\rf\\tg"');
    if (f.kind !== 'compare' || f.rhs.kind !== 'string') throw new Error('shape');
    expect(f.rhs.value).toBe('a"b\\c\fd\ne\rf\tg');
    const unicode = filterOf('name = "héllo – ✓"');
    if (unicode.kind !== 'compare' || unicode.rhs.kind !== 'string') throw new Error('shape');
    expect(unicode.rhs.value).toBe('héllo – ✓');
  });

  it('parses quoted identifiers, which may be keywords', () => {
    expect(show(filterOf("'limit' = 5"))).toBe('limit = 5');
    expect(show(filterOf("'count' > 1 and 'tags.env' = \"x\""))).toBe('(count > 1 AND tags.env = "x")');
    expect(show(filterOf("'isEmpty'"))).toBe('isEmpty');
  });

  it('parses dotted paths', () => {
    expect(show(filterOf('tags.env = "prod"'))).toBe('tags.env = "prod"');
    expect(show(filterOf('anyOf(links.router.name) = "r"'))).toBe('anyOf(links.router.name) = "r"');
    expect(show(filterOf('tags.my-key = 1'))).toBe('tags.my-key = 1');
  });

  it('parses bool symbols and bool constants as expressions', () => {
    expect(show(filterOf('enabled'))).toBe('enabled');
    expect(show(filterOf('enabled and not isAdmin'))).toBe('(enabled AND NOT isAdmin)');
    expect(show(filterOf('true'))).toBe('true');
    expect(show(filterOf('false or TRUE'))).toBe('(false OR true)');
  });

  it('parses sort by, skip and limit', () => {
    const q = parseQuery('name icontains "Web" sort by name desc, createdAt asc, cost skip 20 limit 10');
    expect(q.sort.map((s) => [s.symbol.name, s.desc])).toEqual([
      ['name', true],
      ['createdAt', false],
      ['cost', false],
    ]);
    expect(q.skip?.value).toBe(20);
    expect(q.limit?.value).toBe(10);
    expect(parseQuery('true limit none').limit?.value).toBe(-1);
    expect(parseQuery('skip -5').skip?.value).toBe(-5);
    const onlySort: Query = parseQuery('sort by name');
    expect(onlySort.filter).toBeNull();
    expect(onlySort.sort).toHaveLength(1);
    expect(parseQuery('limit 3').limit?.value).toBe(3);
    expect(parseQuery('skip 1 limit 2').skip?.value).toBe(1);
  });

  it('treats keywords case-insensitively', () => {
    const q = parseQuery(
      'NaMe CoNtAiNs "x" AnD AnYoF(roleAttributes) NoT In ["y"] Or IsEmPtY(links) SoRt By name DeSc SkIp 1 LiMiT NoNe',
    );
    expect(show(q.filter!)).toBe('((NaMe CONTAINS "x" AND anyOf(roleAttributes) NOT IN ["y"]) OR isEmpty(links))');
    expect(q.sort[0]?.desc).toBe(true);
    expect(q.limit?.value).toBe(-1);
  });

  it('treats an empty or blank filter as true', () => {
    for (const text of ['', '   ', '\n\t ']) {
      const q = parseQuery(text);
      expect(q.filter).toBeNull();
      expect(q.sort).toEqual([]);
      expect(q.skip).toBeNull();
      expect(q.limit).toBeNull();
    }
  });

  it('accepts any whitespace [ \\t\\r\\n] between tokens and records positions', () => {
    const f = filterOf('\n  name\t=\r\n"x"');
    if (f.kind !== 'compare' || f.lhs.kind !== 'symbol') throw new Error('shape');
    expect(f.lhs.symbol.pos).toEqual({ line: 2, column: 2, offset: 3 });
    expect(f.rhs.pos).toEqual({ line: 3, column: 0, offset: 11 });
  });

  it('parses the sort param as sort fields with positions inside the param', () => {
    const q = parseSortSpec('name desc, cost');
    expect(q.sort.map((s) => [s.symbol.name, s.desc, s.symbol.pos.column])).toEqual([
      ['name', true, 0],
      ['cost', false, 11],
    ]);
  });
});

describe('parseQuery: errors carry code, field, position and a reason', () => {
  it('reports a mismatched token with the expected set', () => {
    const err = parseError('name = "x" and count(links)');
    expect(err.code).toBe('INVALID_FILTER');
    expect(err.field).toBe('filter');
    expect(err.value).toBe('name = "x" and count(links)');
    expect(err.position).toEqual({ line: 1, column: 27, offset: 27 });
    expect(err.reason).toBe(
      "line 1:27 mismatched input '<EOF>' expecting {'=', '!=', '<', '<=', '>', '>=', IN, NOT IN, BETWEEN, NOT BETWEEN, CONTAINS, NOT CONTAINS, ICONTAINS, NOT ICONTAINS}",
    );
  });

  it('reports a missing operand', () => {
    const err = parseError('name =');
    expect(err.position?.column).toBe(6);
    expect(err.reason).toContain("mismatched input '<EOF>' expecting {STRING, NUMBER, DATETIME, BOOL, NULL}");
  });

  it('reports trailing input after a complete query', () => {
    const err = parseError('name = "a" "b"');
    expect(err.position?.column).toBe(11);
    expect(err.reason).toBe(`line 1:11 mismatched input '"b"' expecting {AND, OR, SORT BY, SKIP, LIMIT, <EOF>}`);
    expect(parseError('true limit 5 skip 1').reason).toBe("line 1:13 mismatched input 'skip' expecting <EOF>");
  });

  it('reports an expression that cannot start', () => {
    const err = parseError('= 5');
    expect(err.reason).toBe(
      "line 1:0 mismatched input '=' expecting {'(', NOT, TRUE, FALSE, ISEMPTY, ANYOF, ALLOF, COUNT, IDENTIFIER}",
    );
    expect(parseError('name = "x" and').position?.column).toBe(14);
  });

  it('reports unbalanced parentheses', () => {
    expect(parseError('(a = 1').reason).toBe("line 1:6 mismatched input '<EOF>' expecting ')'");
    expect(parseError('a = 1)').position?.column).toBe(5);
  });

  it('reports lexical errors: unknown character, bad number, unterminated string', () => {
    expect(parseError('name = #').reason).toBe("line 1:7 token recognition error at: '#'");
    expect(parseError('cost = 01').position?.column).toBe(8);
    expect(parseError('cost = 1x').reason).toBe("line 1:8 token recognition error at: 'x'");
    expect(parseError('cost = -').position?.column).toBe(7);
    expect(parseError('name ! "x"').position?.column).toBe(5);
    const unterminated = parseError('name = "abc');
    expect(unterminated.position?.column).toBe(7);
    expect(unterminated.reason).toContain('unterminated string');
  });

  it('reports invalid string escapes and raw control characters at the character', () => {
    const esc = parseError('name = "a\\qb"');
    expect(esc.position?.column).toBe(9);
    expect(esc.reason).toContain("invalid escape sequence '\\q'");
    const ctl = parseError('name = "a\u0001"');
    expect(ctl.position?.column).toBe(9);
    expect(ctl.reason).toContain('control character');
    expect(parseError('name = "a\nb"').reason).toContain('control character');
  });

  it('reports invalid datetimes', () => {
    const month = parseError('createdAt > datetime(2024-13-01T00:00:00Z)');
    expect(month.position?.column).toBe(21);
    expect(month.reason).toContain('month out of range');
    expect(parseError('createdAt > datetime(2023-02-29T00:00:00Z)').reason).toContain('day out of range');
    expect(parseError('createdAt > datetime(2024-01-01 00:00:00Z)').reason).toContain('not an RFC 3339 date-time');
    expect(parseError('createdAt > datetime(2024-01-01T00:00:00)').reason).toContain('not an RFC 3339 date-time');
    expect(parseError('createdAt > datetime(2024-01-01T00:00:00Z').reason).toContain('unterminated datetime');
    expect(parseError('createdAt > datetime(2024-01-01T24:00:00Z)').reason).toContain('hour out of range');
  });

  it('rejects bool and null with ordering operators', () => {
    expect(parseError('enabled < true').reason).toBe(
      "line 1:10 mismatched input 'true' expecting {STRING, NUMBER, DATETIME}",
    );
    expect(parseError('name > null').position?.column).toBe(7);
  });

  it('rejects empty, mixed and over-long in lists', () => {
    expect(parseError('id in []').reason).toBe("line 1:7 mismatched input ']' expecting {STRING, NUMBER, DATETIME}");
    const mixed = parseError('id in ["a", 1]');
    expect(mixed.position?.column).toBe(12);
    expect(mixed.reason).toContain('expecting STRING');
    expect(parseError('id in "a"').reason).toContain("expecting '['");
    const long = `cost in [${Array.from({ length: MAX_IN_VALUES + 1 }, (_, i) => i).join(',')}]`;
    expect(parseError(long).reason).toContain(`more than ${MAX_IN_VALUES} values`);
  });

  it('rejects between with mismatched or non-numeric bounds', () => {
    expect(parseError('cost between 1 and datetime(2024-01-01T00:00:00Z)').reason).toContain('expecting NUMBER');
    expect(parseError('cost between "a" and "b"').reason).toContain('expecting {NUMBER, DATETIME}');
    expect(parseError('cost between 1 or 2').reason).toContain("mismatched input 'or' expecting AND");
  });

  it('rejects not without in/between/contains after a left-hand side', () => {
    expect(parseError('name not = "x"').reason).toBe(
      "line 1:9 mismatched input '=' expecting {IN, BETWEEN, CONTAINS, ICONTAINS}",
    );
  });

  it('rejects contains with a non-string operand and set functions without an identifier', () => {
    expect(parseError('name contains true').reason).toContain('expecting {STRING, NUMBER}');
    expect(parseError('anyOf(from links where true) = 1').reason).toContain(
      "mismatched input 'from' expecting IDENTIFIER",
    );
    expect(parseError('count() = 1').reason).toContain('expecting {FROM, IDENTIFIER}');
    expect(parseError('isEmpty(from links up = true)').reason).toContain('expecting WHERE');
  });

  it('rejects malformed sort, skip and limit clauses', () => {
    expect(parseError('true sort name').reason).toContain('expecting BY');
    expect(parseError('true sort by').reason).toContain('expecting IDENTIFIER');
    expect(parseError('true sort by name up').reason).toContain(
      "mismatched input 'up' expecting {',', ASC, DESC, SKIP, LIMIT, <EOF>}",
    );
    expect(parseError('true skip 1.5').reason).toBe('line 1:10 expected integer value for skip, but got 1.5');
    expect(parseError('true limit 1e2').reason).toContain('expected integer value for limit');
    expect(parseError('true limit all').reason).toContain("mismatched input 'all' expecting {NUMBER, NONE}");
    expect(parseError('true limit 5 sort by name').position?.column).toBe(13);
  });

  it('reports positions on later lines', () => {
    const err = parseError('name = "x"\nand\n  cost > "a" +');
    expect(err.position).toEqual({ line: 3, column: 13, offset: 28 });
    expect(err.reason.startsWith('line 3:13 ')).toBe(true);
  });

  it('bounds nesting depth and filter length', () => {
    const deep = `${'('.repeat(MAX_NESTING_DEPTH + 1)}true${')'.repeat(MAX_NESTING_DEPTH + 1)}`;
    expect(parseError(deep).reason).toContain(`nested more than ${MAX_NESTING_DEPTH} levels`);
    expect(() => parseQuery(`${'('.repeat(MAX_NESTING_DEPTH)}true${')'.repeat(MAX_NESTING_DEPTH)}`)).not.toThrow();
    expect(parseError('not '.repeat(MAX_NESTING_DEPTH + 1) + 'true').reason).toContain('nested more than');
    expect(parseError(`name = "${'x'.repeat(MAX_FILTER_CHARS)}"`).reason).toContain('maximum is');
  });

  it('rejects invalid quoted identifiers', () => {
    expect(parseError("'na me' = 1").reason).toContain('invalid quoted identifier');
    expect(parseError("'name = 1").reason).toContain('unterminated quoted identifier');
  });

  it('reports sort-param errors with positions inside the param', () => {
    let caught: unknown;
    try {
      parseSortSpec('name sideways');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(QueryError);
    expect((caught as QueryError).position).toEqual({ line: 1, column: 5, offset: 5 });
    expect((caught as QueryError).field).toBe('sort');
    expect(() => parseSortSpec('#')).toThrow(expect.objectContaining({ field: 'sort', value: '#' }));
  });
});
