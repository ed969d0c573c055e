/**
 * A transaction's lookups see through its overlay (storage/txn.ts): the ids of overlay rows holding a value, kept
 * up to date by every write, delete and rollback, in the order the rows came to hold it, after the parent's ids.
 */
import { describe, expect, it } from 'vitest';
import { type StateReader, Txn } from '../../storage/txn.js';
import type { Row } from '../../storage/types.js';

const AT = '2026-01-01T00:00:00.000Z';
const row = (id: string, attrs: string[]): Row => ({ id, createdAt: AT, updatedAt: AT, tags: {}, attrs });

/** A published state in which `z` holds the attribute `p`. */
const parent: StateReader = {
  get: () => undefined,
  lookup: (_entity, field, value) => (field === 'attrs' && value === 'p' ? ['z'] : []),
};

describe('Txn lookups through the overlay', () => {
  it('follow the overlay rows holding a value: one, several, moved away, deleted, rolled back', () => {
    const t = new Txn(parent);
    t.put('people', row('a', ['p', 'q']));
    expect(t.lookup('people', 'attrs', 'p')).toEqual(['z', 'a']);
    // written after the overlay index was made: kept up to date
    t.put('people', row('b', ['p']));
    t.put('people', row('c', ['q']));
    t.put('people', row('b', ['p'])); // written again: held once
    expect(t.lookup('people', 'attrs', 'p')).toEqual(['z', 'a', 'b']);
    expect(t.lookup('people', 'attrs', 'q')).toEqual(['a', 'c']);
    // `a` stops holding `p` and holds `q` anew (after `c`)
    t.put('people', row('a', ['q']));
    expect(t.lookup('people', 'attrs', 'p')).toEqual(['z', 'b']);
    expect(t.lookup('people', 'attrs', 'q')).toEqual(['c', 'a']);
    t.del('people', 'b');
    t.put('people', row('c', []));
    expect(t.lookup('people', 'attrs', 'p')).toEqual(['z']);
    expect(t.lookup('people', 'attrs', 'q')).toEqual(['a']);
    // a command's writes undone: the overlay index as before it
    t.begin();
    t.put('people', row('d', ['q']));
    t.put('people', row('a', ['p']));
    t.put('people', row('e', ['p']));
    expect(t.lookup('people', 'attrs', 'q')).toEqual(['d']);
    expect(t.lookup('people', 'attrs', 'p')).toEqual(['z', 'a', 'e']);
    t.rollback();
    expect(t.lookup('people', 'attrs', 'p')).toEqual(['z']);
    expect(t.lookup('people', 'attrs', 'q')).toEqual(['a']);
    // a row rewritten by the overlay is no longer the parent's answer
    t.put('people', row('z', []));
    expect(t.lookup('people', 'attrs', 'p')).toEqual([]);
  });
});
