/** The list path over a real Collection answers indexed equality and `id in` without scanning. */
import { describe, expect, it } from 'vitest';
import { collectionSource } from '../../src/api/list.js';
import { Collection } from '../../storage/collection.js';
import type { Row } from '../../storage/types.js';
import { compileQuery, createSymbolTable, executeQuery, parseQuery } from '../../storage/zitiql/index.js';

function fixture(n: number) {
  const c = new Collection({
    name: 'things',
    type: 'thing',
    fields: { name: { type: 'string', unique: true }, attrs: { type: 'string', set: true, index: true } },
  });
  const rows: Row[] = [];
  for (let i = 0; i < n; i++) {
    rows.push({
      id: `id${String(i).padStart(6, '0')}`,
      createdAt: '',
      updatedAt: '',
      tags: {},
      name: `n${i}`,
      attrs: [`a${i % 10}`],
    });
  }
  c.load(rows);
  return c;
}

const symbols = createSymbolTable({
  symbols: {
    id: { type: 'string', set: false, get: (r: Row) => r.id, indexed: true },
    name: { type: 'string', set: false, get: (r: Row) => r.name, indexed: true },
    attrs: { type: 'string', set: true, get: (r: Row) => r.attrs, indexed: true },
  },
});

describe('list planning over a collection', () => {
  const c = fixture(20_000);
  const run = (filter: string) => {
    const source = collectionSource(c);
    let scanned = 0;
    const scan = source.scan;
    source.scan = () => {
      scanned++;
      return scan();
    };
    const result = executeQuery(source, compileQuery(parseQuery(filter), symbols), { limit: 10, offset: 0 });
    return { result, scanned };
  };

  it.each([
    ['name = "n123"', ['id000123']],
    ['id in ["id000007", "id000003", "nope"]', ['id000003', 'id000007']],
    ['name in ["n1", "n2"] and name != "n2"', ['id000001']],
  ])('%s uses the index, no scan', (filter, ids) => {
    const { result, scanned } = run(filter);
    expect(result.rows.map((r) => r.id)).toEqual(ids);
    expect(scanned).toBe(0);
  });

  it('anyOf on an indexed set uses the index and counts all matches', () => {
    const { result, scanned } = run('anyOf(attrs) = "a3"');
    expect(scanned).toBe(0);
    expect(result.totalCount).toBe(2000);
    expect(result.rows[0]!.id).toBe('id000003');
  });

  it('an unindexable filter scans (and still agrees)', () => {
    const { result, scanned } = run('name contains "n1234"');
    expect(scanned).toBe(1);
    expect(result.totalCount).toBe(11); // n1234, n12340..n12349
  });
});
