import { CHUNK_MAX, chunkFor, searchIds } from './sorted-rows.js';
import { assert } from './types.js';

interface Chunk {
  ids: string[];
}

/**
 * A set of ids kept in ascending (code-unit) order, in chunks of at most CHUNK_MAX: the ids holding a value of a
 * scalar equality index that many rows share (`typeId = User`, `isAdmin = false`, `authPolicyId = default`). Ids sort
 * by creation time (src/util/ids.ts), so a new row's id goes after every id held: one comparison and a push, where
 * a hashed set probes a table as large as the collection (a cache miss or more per insert, three indexes per
 * identity create on every member). An id takes one array slot instead of a hash entry. `has` and `delete` are a
 * binary search (O(log n) comparisons); an id out of order (older data) is inserted in its place, moving at most
 * CHUNK_MAX entries. Iteration is in id order. An iteration must not outlive a change (as with the sharded sets).
 */
export class SortedIds implements ReadonlySet<string> {
  private chunks: Chunk[] = [];
  private count = 0;

  /** A SortedIds of the ids of `set`. */
  static of(set: Iterable<string>): SortedIds {
    const ids = [...set].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const s = new SortedIds();
    for (let i = 0; i < ids.length; i += CHUNK_MAX / 2) s.chunks.push({ ids: ids.slice(i, i + CHUNK_MAX / 2) });
    s.count = ids.length;
    for (let i = 1; i < ids.length; i++) assert(ids[i - 1]! < ids[i]!, 'SortedIds.of: ids not distinct');
    return s;
  }

  get size(): number {
    return this.count;
  }

  has(id: string): boolean {
    if (this.chunks.length === 0) return false;
    const { ids } = this.chunks[chunkFor(this.chunks, id)]!;
    return ids[searchIds(ids, id)] === id;
  }

  add(id: string): this {
    const n = this.chunks.length;
    const tail = n === 0 ? undefined : this.chunks[n - 1]!.ids;
    if (tail === undefined || tail[tail.length - 1]! < id) {
      // past every id held: the common case
      if (tail === undefined || tail.length >= CHUNK_MAX) this.chunks.push({ ids: [id] });
      else tail.push(id);
      this.count++;
      return this;
    }
    const ci = chunkFor(this.chunks, id);
    const { ids } = this.chunks[ci]!;
    const pos = searchIds(ids, id);
    if (ids[pos] === id) return this;
    let i = ids.length;
    ids.push(id);
    for (; i > pos; i--) ids[i] = ids[i - 1]!;
    ids[pos] = id;
    this.count++;
    if (ids.length > CHUNK_MAX)
      this.chunks.splice(ci, 1, { ids: ids.slice(0, CHUNK_MAX / 2) }, { ids: ids.slice(CHUNK_MAX / 2) });
    return this;
  }

  delete(id: string): boolean {
    if (this.chunks.length === 0) return false;
    const ci = chunkFor(this.chunks, id);
    const { ids } = this.chunks[ci]!;
    const pos = searchIds(ids, id);
    if (ids[pos] !== id) return false;
    const last = ids.length - 1;
    for (let i = pos; i < last; i++) ids[i] = ids[i + 1]!;
    ids.pop();
    this.count--;
    if (ids.length === 0) this.chunks.splice(ci, 1);
    return true;
  }

  forEach(visit: (value: string, key: string, set: ReadonlySet<string>) => void, thisArg?: unknown): void {
    for (const id of this) visit.call(thisArg, id, id, this);
  }

  *keys(): SetIterator<string> {
    for (const { ids } of this.chunks) for (let i = 0; i < ids.length; i++) yield ids[i]!;
  }

  values(): SetIterator<string> {
    return this.keys();
  }

  *entries(): SetIterator<[string, string]> {
    for (const id of this.keys()) yield [id, id];
  }

  [Symbol.iterator](): SetIterator<string> {
    return this.keys();
  }
}
