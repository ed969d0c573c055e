// An in-memory RowSource over an array of rows, with optional equality indexes (for association lists,
// tests and benchmarks).

import { assert } from './errors.js';
import type { RowSource } from './executor.js';

export interface MemorySourceOptions<R> {
  idOf(row: R): string;
  /** index name → the value(s) of a row under that index (an array for set fields) */
  indexes?: Record<string, (row: R) => unknown>;
}

export function memoryRowSource<R>(rows: readonly R[], options: MemorySourceOptions<R>): RowSource<R> {
  const { idOf } = options;
  const sorted = [...rows].sort((a, b) => {
    const x = idOf(a);
    const y = idOf(b);
    return x < y ? -1 : x > y ? 1 : 0;
  });
  const byId = new Map<string, R>();
  for (const row of sorted) {
    const id = idOf(row);
    assert(!byId.has(id), `duplicate id ${id}`);
    byId.set(id, row);
  }
  const indexes = new Map<string, Map<unknown, string[]>>();
  for (const [name, read] of Object.entries(options.indexes ?? {})) {
    const index = new Map<unknown, string[]>();
    for (const row of sorted) {
      const value = read(row);
      const values = Array.isArray(value) ? value : [value];
      for (const v of values) {
        if (v === null || v === undefined) continue;
        const ids = index.get(v);
        if (ids === undefined) index.set(v, [idOf(row)]);
        else if (ids[ids.length - 1] !== idOf(row)) ids.push(idOf(row));
      }
    }
    indexes.set(name, index);
  }
  return {
    size: sorted.length,
    scan: () => sorted,
    get: (id) => byId.get(id),
    idOf,
    lookup(name, value) {
      const index = indexes.get(name);
      if (index === undefined) return undefined;
      return index.get(value) ?? [];
    },
  };
}
