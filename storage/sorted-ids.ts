import { assert } from './types.js';

/**
 * Ids kept in ascending (code-unit) order, in chunks of bounded size, so that an insert or delete moves at most
 * CHUNK_MAX entries instead of the whole collection. Iteration in order is a walk over the chunks.
 *
 * Entries are moved by a plain loop: `Array.prototype.copyWithin` on a JS array is V8's generic builtin, about 30×
 * slower than the loop at this size (15 µs against 0.5 µs per insert into 150 000 ids: bench in
 * docs/benchmarks.md, "The sorted id list"), and `splice` allocates the array of removed elements on every call.
 */
const CHUNK_MAX = 256;

export class SortedIds {
  private chunks: string[][] = [];
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Bulk load from ids already in ascending order (LevelDB iteration order). */
  static fromSorted(ids: string[]): SortedIds {
    const s = new SortedIds();
    for (let i = 0; i < ids.length; i += CHUNK_MAX / 2) s.chunks.push(ids.slice(i, i + CHUNK_MAX / 2));
    s.count = ids.length;
    for (let i = 1; i < ids.length; i++) assert(ids[i - 1]! < ids[i]!, 'fromSorted: ids not strictly ascending');
    return s;
  }

  private chunkFor(id: string): number {
    // last chunk whose first element <= id
    let lo = 0;
    let hi = this.chunks.length - 1;
    let ans = 0;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.chunks[mid]![0]! <= id) {
        ans = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return ans;
  }

  private static search(chunk: string[], id: string): number {
    let lo = 0;
    let hi = chunk.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (chunk[mid]! < id) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  insert(id: string): boolean {
    if (this.chunks.length === 0) {
      this.chunks.push([id]);
      this.count = 1;
      return true;
    }
    const ci = this.chunkFor(id);
    const chunk = this.chunks[ci]!;
    const pos = SortedIds.search(chunk, id);
    if (chunk[pos] === id) return false;
    let i = chunk.length;
    chunk.push(id);
    for (; i > pos; i--) chunk[i] = chunk[i - 1]!;
    chunk[pos] = id;
    this.count++;
    if (chunk.length > CHUNK_MAX) this.chunks.splice(ci, 1, chunk.slice(0, CHUNK_MAX / 2), chunk.slice(CHUNK_MAX / 2));
    return true;
  }

  delete(id: string): boolean {
    if (this.chunks.length === 0) return false;
    const ci = this.chunkFor(id);
    const chunk = this.chunks[ci]!;
    const pos = SortedIds.search(chunk, id);
    if (chunk[pos] !== id) return false;
    const last = chunk.length - 1;
    for (let i = pos; i < last; i++) chunk[i] = chunk[i + 1]!;
    chunk.pop();
    this.count--;
    if (chunk.length === 0) this.chunks.splice(ci, 1);
    return true;
  }

  *[Symbol.iterator](): IterableIterator<string> {
    for (const chunk of this.chunks) yield* chunk;
  }

  /** Ids from position `offset` on, in order (skips whole chunks). */
  *from(offset: number): IterableIterator<string> {
    let skip = offset;
    for (const chunk of this.chunks) {
      if (skip >= chunk.length) {
        skip -= chunk.length;
        continue;
      }
      for (let i = skip; i < chunk.length; i++) yield chunk[i]!;
      skip = 0;
    }
  }
}
