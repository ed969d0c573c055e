/**
 * Stored rows keep their values in the cheapest form (storage/row-values.ts): empty objects and arrays shared and
 * frozen, the same data written, read, reloaded and restored.
 */
import { describe, expect, it } from 'vitest';
import { NO_FIELDS, NO_ITEMS, ownString, storedValue } from '../../storage/row-values.js';
import { Schema } from '../../storage/schema.js';
import { Store } from '../../storage/store.js';
import type { EntityDef } from '../../storage/types.js';
import { tempDirs } from '../support/temp-dir.js';

const defs: EntityDef[] = [
  {
    name: 'things',
    type: 'thing',
    fields: { name: { type: 'string', unique: true }, attrs: { type: 'string', set: true, index: true } },
  },
];
const AT = '2026-01-01T00:00:00.000Z';
const tempDir = tempDirs('keel-row-values-');

describe('row values', () => {
  it('share one frozen empty object and array; other values are kept as they are', () => {
    expect(storedValue({})).toBe(NO_FIELDS);
    expect(storedValue([])).toBe(NO_ITEMS);
    expect(Object.isFrozen(NO_FIELDS) && Object.isFrozen(NO_ITEMS)).toBe(true);
    const list = ['a', 'a long attribute value, sliced or not'];
    expect(storedValue(list)).toEqual(['a', 'a long attribute value, sliced or not']);
    expect(storedValue({ k: 1 })).toEqual({ k: 1 });
    expect(storedValue(Object.create(null))).not.toBe(NO_FIELDS); // not a plain object: kept
    for (const s of ['', 'short', 'x'.repeat(40), 'lone \ud800 surrogate kept as is', 'é✓😀'.repeat(10)]) {
      expect(ownString(s)).toBe(s);
    }
  });

  it('rows written, reloaded and restored hold the same data, their empty values shared and frozen', async () => {
    const dir = tempDir();
    let store = await Store.open(dir, new Schema(defs));
    const results = await store.applyGroup(
      [
        { op: 'create', entity: 'things', id: 'a', data: { name: 'first of the things', attrs: [] }, at: AT },
        { op: 'create', entity: 'things', id: 'b', data: { name: 'b', attrs: ['x', 'y'], tags: { k: 'v' } }, at: AT },
        { op: 'update', entity: 'things', id: 'b', set: { attrs: [], tags: {} }, at: AT },
      ],
      { sync: true, index: 1 },
    );
    expect(results.every((r) => r.ok)).toBe(true);
    const check = (s: Store) => {
      const a = s.get('things', 'a')!;
      const b = s.get('things', 'b')!;
      expect(a).toEqual({ name: 'first of the things', attrs: [], id: 'a', createdAt: AT, updatedAt: AT, tags: {} });
      expect(b).toEqual({ name: 'b', attrs: [], id: 'b', createdAt: AT, updatedAt: AT, tags: {} });
      expect([a.tags, b.tags, a.attrs, b.attrs]).toEqual([NO_FIELDS, NO_FIELDS, NO_ITEMS, NO_ITEMS]);
      expect(a.tags).toBe(NO_FIELDS);
      expect(b.attrs).toBe(NO_ITEMS);
      expect(() => (a.attrs as string[]).push('z')).toThrow(TypeError);
    };
    check(store);
    const snap = await store.snapshot();
    await store.close();
    store = await Store.open(dir, new Schema(defs));
    check(store);
    const other = await Store.open(tempDir(), new Schema(defs));
    await other.restore(snap.data);
    check(other);
    await other.close();
    await store.close();
  });
});
