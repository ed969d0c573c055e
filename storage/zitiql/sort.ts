// Sort keys and row ordering. As boltz (query_sort.go): a null value sorts before every non-null value in
// ascending order (so after them in descending order), and `id asc` always breaks ties.

import type { CompiledSort } from './compile.js';
import { assert } from './errors.js';
import type { QuerySymbol } from './symbols.js';
import { toDatetimeValue, toNumberValue, toStringValue } from './values.js';

export type SortKey = string | number | null;

export interface SortEntry<R> {
  row: R;
  id: string;
  keys: SortKey[];
}

/** Reads a comparable key: strings compare by UTF-16 code units, numbers/datetimes (epoch ms)/bools (0/1) numerically. */
export function sortKeyReader(symbol: QuerySymbol): (row: any) => SortKey {
  const get = symbol.get;
  switch (symbol.type) {
    case 'string':
      return (row) => toStringValue(get(row));
    case 'number':
      return (row) => toNumberValue(get(row));
    case 'datetime':
      return (row) => toDatetimeValue(get(row));
    case 'bool':
      return (row) => {
        const v = get(row);
        return v === true ? 1 : v === false ? 0 : null;
      };
    case 'any':
      // mixed values (only when a symbol of type 'any' is explicitly sortable): null < bool/number < string
      return (row) => {
        const v = get(row);
        if (typeof v === 'boolean') return v ? 1 : 0;
        if (typeof v === 'number') return Number.isNaN(v) ? null : v;
        return toStringValue(v);
      };
  }
}

export function compareKeys(a: SortKey, b: SortKey): number {
  if (a === null) return b === null ? 0 : -1;
  if (b === null) return 1;
  if (typeof a === typeof b) return a < b ? -1 : a > b ? 1 : 0;
  return typeof a === 'number' ? -1 : 1;
}

export function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export type EntryComparator<R> = (a: SortEntry<R>, b: SortEntry<R>) => number;

export function entryComparator<R>(sort: CompiledSort[]): EntryComparator<R> {
  const desc = sort.map((field) => field.desc);
  const n = desc.length;
  return (a, b) => {
    for (let i = 0; i < n; i++) {
      const c = compareKeys(a.keys[i]!, b.keys[i]!);
      if (c !== 0) return desc[i] ? -c : c;
    }
    return compareIds(a.id, b.id);
  };
}

/**
 * Keeps the `capacity` smallest entries seen (a binary max-heap: the largest kept entry is on top and is the
 * one evicted). Memory is bounded by capacity whatever the number of rows offered.
 */
export class TopK<R> {
  private readonly heap: SortEntry<R>[] = [];

  constructor(
    private readonly capacity: number,
    private readonly compare: EntryComparator<R>,
  ) {
    assert(Number.isInteger(capacity) && capacity > 0, 'top-k capacity is a positive integer');
  }

  offer(entry: SortEntry<R>): void {
    const heap = this.heap;
    if (heap.length < this.capacity) {
      heap.push(entry);
      this.siftUp(heap.length - 1);
      return;
    }
    if (this.compare(entry, heap[0]!) >= 0) return;
    heap[0] = entry;
    this.siftDown(0);
  }

  /** The kept entries, smallest first. */
  sorted(): SortEntry<R>[] {
    return [...this.heap].sort(this.compare);
  }

  private siftUp(i: number): void {
    const heap = this.heap;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.compare(heap[i]!, heap[parent]!) <= 0) return;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  private siftDown(i: number): void {
    const heap = this.heap;
    const n = heap.length;
    while (true) {
      const left = 2 * i + 1;
      if (left >= n) return;
      const right = left + 1;
      let largest = left;
      if (right < n && this.compare(heap[right]!, heap[left]!) > 0) largest = right;
      if (this.compare(heap[largest]!, heap[i]!) <= 0) return;
      [heap[i], heap[largest]] = [heap[largest]!, heap[i]!];
      i = largest;
    }
  }
}
