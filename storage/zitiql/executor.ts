// Planner + executor. Plan: the most selective usable index hint gives candidate ids (union of the ids of each
// value of an `in`), else every row via scan(); the full predicate is evaluated on each candidate.
// Order: default (no sort / `sort by id asc`) is id ascending, `sort by id desc` is id descending, anything else
// is a bounded top-(offset+limit) selection by the sort fields then `id asc`.

import type { CompiledQuery, IndexHint } from './compile.js';
import { assert } from './errors.js';
import { entryComparator, type SortEntry, sortKeyReader, TopK } from './sort.js';

export interface RowSource<R> {
  size: number;
  /** Every row, ascending id order. */
  scan(): Iterable<R>;
  /** Every row, ascending id order, captured at once as an array (when the source can do it cheaply). */
  rows?(): R[];
  get(id: string): R | undefined;
  idOf(row: R): string;
  /** Ids having that value; undefined = not indexed. */
  lookup(name: string, value: unknown): Iterable<string> | undefined;
}

export interface PageRequest {
  /** -1 = no limit */
  limit: number;
  offset: number;
}

export interface QueryResult<R> {
  rows: R[];
  /** Every row matching the filter, whatever the page. */
  totalCount: number;
}

/** The hint named `id` is answered by RowSource.get: the symbol `id` must be the row id (idOf). */
export const ID_SYMBOL = 'id';

/**
 * Candidate ids (ascending) from the most selective usable hint, or null when no hint is usable (scan instead).
 * A hint whose candidates reach the size of the best one so far is abandoned early.
 */
export function chooseCandidates<R>(source: RowSource<R>, hints: IndexHint[]): string[] | null {
  let best: Set<string> | null = null;
  for (const hint of hints) {
    const ids = new Set<string>();
    let usable = true;
    collect: for (const value of hint.values) {
      if (hint.name === ID_SYMBOL) {
        if (typeof value === 'string' && source.get(value) !== undefined) ids.add(value);
        continue;
      }
      const found = source.lookup(hint.name, value);
      if (found === undefined) {
        usable = false;
        break;
      }
      for (const id of found) {
        ids.add(id);
        if (best !== null && ids.size >= best.size) {
          usable = false;
          break collect;
        }
      }
    }
    if (usable && (best === null || ids.size < best.size)) best = ids;
    if (best !== null && best.size === 0) break;
  }
  if (best === null) return null;
  return [...best].sort();
}

function* rowsOf<R>(source: RowSource<R>, ids: string[]): Iterable<R> {
  for (const id of ids) {
    const row = source.get(id);
    if (row !== undefined) yield row;
  }
}

type Order = 'idAsc' | 'idDesc' | 'fields';

function orderOf(q: CompiledQuery): Order {
  const first = q.sort[0];
  if (first === undefined) return 'idAsc';
  if (first.name === ID_SYMBOL) return first.desc ? 'idDesc' : 'idAsc';
  return 'fields';
}

export function executeQuery<R>(source: RowSource<R>, q: CompiledQuery, page: PageRequest): QueryResult<R> {
  assert(Number.isInteger(page.offset) && page.offset >= 0, `offset is a non-negative integer (got ${page.offset})`);
  assert(Number.isInteger(page.limit) && page.limit >= -1, `limit is an integer >= -1 (got ${page.limit})`);
  assert(Number.isInteger(source.size) && source.size >= 0, 'source size is a non-negative integer');
  const { offset } = page;
  const end = page.limit < 0 ? Number.POSITIVE_INFINITY : offset + page.limit;
  const candidates = q.indexHints.length > 0 ? chooseCandidates(source, q.indexHints) : null;
  const order = orderOf(q);

  if (order === 'idAsc' && q.matchesAll && candidates === null) {
    // no filter, default order: scan() is already in id order; stop once the page is full
    if (end <= offset) return { rows: [], totalCount: source.size };
    const all = source.scan();
    if (Array.isArray(all)) return { rows: all.slice(offset, end), totalCount: source.size };
    const rows: R[] = [];
    let seen = 0;
    for (const row of all) {
      if (seen >= offset) rows.push(row);
      seen++;
      if (seen >= end) break;
    }
    return { rows, totalCount: source.size };
  }

  const input = candidates === null ? source.scan() : rowsOf(source, candidates);
  const predicate = q.predicate;

  if (order === 'idAsc') {
    const rows: R[] = [];
    let total = 0;
    for (const row of input) {
      if (!predicate(row)) continue;
      if (total >= offset && total < end) rows.push(row);
      total++;
    }
    return { rows, totalCount: total };
  }

  if (order === 'idDesc') {
    const matches: R[] = [];
    for (const row of input) if (predicate(row)) matches.push(row);
    const total = matches.length;
    const rows: R[] = [];
    // walk from the highest id down, skipping `offset`
    for (let i = total - 1 - offset; i >= 0 && rows.length < end - offset; i--) rows.push(matches[i]!);
    return { rows, totalCount: total };
  }

  const readers = q.sort.map((field) => sortKeyReader(field.symbol));
  const compare = entryComparator<R>(q.sort);
  const entryOf = (row: R): SortEntry<R> => ({ row, id: source.idOf(row), keys: readers.map((read) => read(row)) });
  let total = 0;
  let sorted: SortEntry<R>[];
  if (end === Number.POSITIVE_INFINITY) {
    const all: SortEntry<R>[] = [];
    for (const row of input) {
      if (!predicate(row)) continue;
      all.push(entryOf(row));
      total++;
    }
    sorted = all.sort(compare);
  } else if (end === 0) {
    for (const row of input) if (predicate(row)) total++;
    sorted = [];
  } else {
    const top = new TopK<R>(end, compare);
    for (const row of input) {
      if (!predicate(row)) continue;
      top.offer(entryOf(row));
      total++;
    }
    sorted = top.sorted();
  }
  const rows = sorted.slice(offset).map((entry) => entry.row);
  assert(page.limit < 0 || rows.length <= page.limit, 'page holds at most limit rows');
  return { rows, totalCount: total };
}
