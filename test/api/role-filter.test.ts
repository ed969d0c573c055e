// roleFilterIds (src/api/list.ts) under AllOf reads only the rows of the attribute held by the fewest.
import { describe, expect, it } from 'vitest';
import { roleFilterIds } from '../../src/api/list.js';
import type { Collection } from '../../storage/collection.js';

/** A collection of rows with role attributes, indexed by attribute, counting the rows read by id. */
function fakeCollection(rows: { id: string; roleAttributes: string[] }[]) {
  const byAttr = new Map<string, Set<string>>();
  for (const r of rows) for (const a of r.roleAttributes) byAttr.set(a, (byAttr.get(a) ?? new Set()).add(r.id));
  const byId = new Map(rows.map((r) => [r.id, r]));
  const reads = { n: 0 };
  const c = {
    get(id: string) {
      reads.n++;
      return byId.get(id);
    },
    lookup: (_field: string, v: unknown) => byAttr.get(v as string) ?? [],
    lookupSize: (_field: string, v: unknown) => byAttr.get(v as string)?.size ?? 0,
    scan: () => rows.values(),
  };
  return { c: c as unknown as Collection, reads };
}

describe('roleFilter AllOf', () => {
  const rows = Array.from({ length: 5_000 }, (_, i) => ({
    id: `id${i}`,
    roleAttributes: i % 1000 === 7 ? ['common', 'rare'] : ['common'],
  }));

  it('reads only the holders of the attribute held by the fewest, whatever the order of the entries', () => {
    for (const roles of [
      ['#common', '#rare'],
      ['#rare', '#common'],
    ]) {
      const { c, reads } = fakeCollection(rows);
      const ids = roleFilterIds(c, 'roleAttributes', roles, 'AllOf');
      expect([...ids!].sort()).toEqual(['id1007', 'id2007', 'id3007', 'id4007', 'id7']);
      expect(reads.n).toBe(5);
    }
  });

  it('an attribute nobody holds selects nothing and reads nothing', () => {
    const { c, reads } = fakeCollection(rows);
    expect(roleFilterIds(c, 'roleAttributes', ['#common', '#nobody'], 'AllOf')!.size).toBe(0);
    expect(reads.n).toBe(0);
  });
});
