import { describe, expect, it } from 'vitest';
import { s } from './s.js';
import { nilArraysAsEmpty, validate } from './validate.js';

const item = s.obj({ hashes: s.arr(s.str()), name: s.str() });
const body = s.obj(
  {
    tags: s.arr(s.str()),
    roles: s.arr(s.str()),
    labels: s.nullable(s.arr(s.str())),
    note: s.str(),
    processes: s.arr(item),
    nested: s.obj({ list: s.arr(s.int()) }),
  },
  ['roles'],
);

describe('nilArraysAsEmpty', () => {
  it('reads null for an optional array as [], at any depth, and leaves every other null alone', () => {
    const value = {
      tags: null,
      roles: null,
      labels: null,
      note: null,
      processes: [{ hashes: null, name: 'x' }],
      nested: { list: null },
    };
    nilArraysAsEmpty(body, value);
    expect(value).toEqual({
      tags: [],
      // required: left for validation, which refuses it
      roles: null,
      // declared nullable: the handler reads null itself
      labels: null,
      // not an array
      note: null,
      processes: [{ hashes: [], name: 'x' }],
      nested: { list: [] },
    });
    expect(validate(body, value)?.field).toBe('roles');
  });

  it('leaves values of other shapes as they are', () => {
    for (const v of [null, 1, 'x', [null], { processes: 'no' }, { nested: [null] }]) {
      const copy = structuredClone(v);
      expect(nilArraysAsEmpty(body, v)).toEqual(copy);
    }
  });
});
