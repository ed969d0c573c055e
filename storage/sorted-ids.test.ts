import { describe, expect, it } from 'vitest';
import { rng } from '../test/support/rng.js';
import { Collection } from './collection.js';
import { ShardedSet, SPLIT_AT } from './sharded.js';
import { SortedIds } from './sorted-ids.js';
import { CHUNK_MAX } from './sorted-rows.js';
import type { EntityDef, Row } from './types.js';

const sorted = (ids: Iterable<string>) => [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

describe('SortedIds', () => {
  it('behaves as a Set of ids iterated in order, under appends, inserts out of order and deletes', () => {
    const rand = rng(11);
    const set = new SortedIds();
    const want = new Set<string>();
    // mostly ascending ids (creation time) with some older ones and repeats, through many chunk splits
    let clock = 0;
    const id = () => {
      const r = rand();
      const t = r < 0.8 ? clock++ : Math.floor(rand() * (clock + 1));
      return `${t.toString(36).padStart(6, '0')}${Math.floor(rand() * 4)}`;
    };
    for (let i = 0; i < 20 * CHUNK_MAX; i++) {
      const k = id();
      if (rand() < 0.85) {
        expect(set.add(k)).toBe(set);
        want.add(k);
      } else {
        expect(set.delete(k)).toBe(want.delete(k));
      }
      expect(set.size).toBe(want.size);
      const probe = id();
      expect(set.has(probe)).toBe(want.has(probe));
    }
    expect([...set]).toEqual(sorted(want));
    expect([...set.values()]).toEqual(sorted(want));
    expect([...set.entries()].map(([a]) => a)).toEqual(sorted(want));
    const seen: string[] = [];
    set.forEach((v) => {
      seen.push(v);
    });
    expect(seen).toEqual(sorted(want));
    // emptied: every chunk goes
    for (const k of want) expect(set.delete(k)).toBe(true);
    expect(set.size).toBe(0);
    expect([...set]).toEqual([]);
    expect(set.has('x')).toBe(false);
    expect(set.delete('x')).toBe(false);
  });

  it('is made from a set in any order', () => {
    const ids = Array.from({ length: 3 * CHUNK_MAX }, (_, i) => `id${(i * 7919) % 10007}`);
    const s = SortedIds.of(new Set(ids));
    expect(s.size).toBe(ids.length);
    expect([...s]).toEqual(sorted(ids));
    s.add('id0000');
    expect(s.has('id0000')).toBe(true);
    expect(s.has('id0001')).toBe(false);
  });
});

describe('a collection equality index held by most rows', () => {
  const def: EntityDef = {
    name: 'people',
    type: 'person',
    fields: { kind: { type: 'string', index: true }, attrs: { type: 'string', set: true, index: true } },
  } as unknown as EntityDef;
  const row = (id: string, kind: string): Row =>
    ({ id, createdAt: 'x', updatedAt: 'x', tags: {}, kind, attrs: ['a'] }) as unknown as Row;

  it('answers lookups, sizes and integrity checks the same past SPLIT_AT rows, rows written in and out of order', () => {
    const c = new Collection(def);
    const n = SPLIT_AT + 2 * CHUNK_MAX;
    const ids = Array.from({ length: n }, (_, i) => `r${String(i).padStart(7, '0')}`);
    // in order, but every tenth one late (out of order)
    const late = ids.filter((_, i) => i % 10 === 5);
    for (const id of ids) if (!late.includes(id)) c.put(row(id, 'user'));
    for (const id of late) c.put(row(id, 'user'));
    c.put(row('r9999999', 'admin'));
    expect(c.lookupSize('kind', 'user')).toBe(n);
    // held in order past SPLIT_AT (a set field's index stays hashed, for the policy engine's membership tests)
    expect(c.lookup('kind', 'user')).toBeInstanceOf(SortedIds);
    expect(c.lookup('attrs', 'a')).toBeInstanceOf(ShardedSet);
    expect([...c.lookup('kind', 'user')!]).toEqual(ids);
    expect([...c.lookup('kind', 'admin')!]).toEqual(['r9999999']);
    // a row changing value and one deleted leave the held set
    c.put(row(ids[3]!, 'admin'));
    c.delete(ids[4]!);
    expect(c.lookupSize('kind', 'user')).toBe(n - 2);
    expect([...c.lookup('kind', 'user')!]).not.toContain(ids[3]);
    expect([...c.lookup('kind', 'user')!]).not.toContain(ids[4]);
    expect(sorted(c.lookup('kind', 'admin')!)).toEqual([ids[3], 'r9999999']);
    expect(c.indexProblems(10)).toEqual([]);
    // the set field's index is there too, every row holding `a`
    expect(c.lookupSize('attrs', 'a')).toBe(n);
  });

  it('finds the newest row and answers a missing id past it without a row', () => {
    const c = new Collection(def);
    expect(c.get('a')).toBeUndefined();
    for (const id of ['b', 'd', 'c']) c.put(row(id, 'user'));
    expect(c.get('d')?.id).toBe('d');
    expect(c.get('c')?.id).toBe('c');
    expect(c.get('e')).toBeUndefined();
    expect(c.get('a')).toBeUndefined();
    c.delete('d');
    expect(c.get('d')).toBeUndefined();
    expect(c.get('c')?.id).toBe('c');
  });
});
