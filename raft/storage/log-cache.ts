/**
 * The in-memory, non-compacted part of a log plus its compaction marker (index and term of the last discarded
 * entry). Both the LevelDB log and the memory log keep one so the core can read synchronously.
 * Its size is bounded by the driver's snapshot-and-compact policy.
 */
import { CompactedError, type Entry, UnavailableError } from '../types.js';
import { entrySize_bytes } from './durable-log.js';

export class LogCache {
  /** Index and term of the entry just before the first held entry (0/0 for a fresh log). */
  private marker = { index: 0, term: 0 };
  private ents: Entry[] = [];

  /** Rebuilds from recovered state; `ents` must be contiguous from marker.index + 1. */
  reset(markerIndex: number, markerTerm: number, ents: Entry[]): void {
    for (let i = 0; i < ents.length; i++) {
      if (ents[i]!.index !== markerIndex + 1 + i)
        throw new Error(`raft log cache: non-contiguous entry ${ents[i]!.index}`);
    }
    this.marker = { index: markerIndex, term: markerTerm };
    this.ents = ents;
  }

  markerIndex(): number {
    return this.marker.index;
  }

  markerTerm(): number {
    return this.marker.term;
  }

  firstIndex(): number {
    return this.marker.index + 1;
  }

  lastIndex(): number {
    return this.marker.index + this.ents.length;
  }

  lastTerm(): number {
    const last = this.ents[this.ents.length - 1];
    return last === undefined ? this.marker.term : last.term;
  }

  count(): number {
    return this.ents.length;
  }

  term(index: number): number {
    if (index < this.marker.index) throw new CompactedError(index);
    if (index > this.lastIndex()) throw new UnavailableError(index);
    if (index === this.marker.index) return this.marker.term;
    return this.ents[index - this.marker.index - 1]!.term;
  }

  entry(index: number): Entry {
    if (index <= this.marker.index) throw new CompactedError(index);
    const e = this.ents[index - this.marker.index - 1];
    if (e === undefined) throw new UnavailableError(index);
    return e;
  }

  /** Entries in [lo, hi), at most maxBytes (but at least one). */
  entries(lo: number, hi: number, maxBytes: number): Entry[] {
    if (lo <= this.marker.index) throw new CompactedError(lo);
    if (hi > this.lastIndex() + 1) throw new UnavailableError(hi - 1);
    if (lo > hi) throw new RangeError(`raft log: invalid range [${lo}, ${hi})`);
    const out: Entry[] = [];
    let size_bytes = 0;
    for (let i = lo; i < hi; i++) {
      const e = this.ents[i - this.marker.index - 1]!;
      size_bytes += entrySize_bytes(e);
      if (out.length > 0 && size_bytes > maxBytes) break;
      out.push(e);
    }
    return out;
  }

  /**
   * Appends entries, overwriting from entries[0].index (a conflicting tail is dropped). Entries at or below the
   * marker are skipped (already compacted). Returns the index range of old entries removed past the new last index.
   */
  append(entries: Entry[]): { removedFrom: number; removedTo: number } {
    const oldLast = this.lastIndex();
    let start = 0;
    while (start < entries.length && entries[start]!.index <= this.marker.index) start++;
    const fresh = start === 0 ? entries : entries.slice(start);
    if (fresh.length === 0) return { removedFrom: 0, removedTo: -1 };
    const first = fresh[0]!.index;
    if (first > oldLast + 1) throw new Error(`raft log: gap: appending ${first} after last index ${oldLast}`);
    for (let i = 1; i < fresh.length; i++) {
      if (fresh[i]!.index !== first + i) throw new Error(`raft log: non-contiguous append at ${fresh[i]!.index}`);
    }
    this.ents.length = first - this.marker.index - 1;
    for (const e of fresh) this.ents.push(e);
    const newLast = this.lastIndex();
    return { removedFrom: newLast + 1, removedTo: oldLast };
  }

  /** Discards entries ≤ index. index must be ≤ lastIndex. */
  compact(index: number): void {
    if (index <= this.marker.index) return;
    if (index > this.lastIndex()) throw new Error(`raft log: compact ${index} beyond last index ${this.lastIndex()}`);
    const term = this.term(index);
    this.ents = this.ents.slice(index - this.marker.index);
    this.marker = { index, term };
  }

  /** Drops all entries; the log restarts after (index, term) — used when installing a snapshot. */
  restart(index: number, term: number): void {
    this.marker = { index, term };
    this.ents = [];
  }
}
