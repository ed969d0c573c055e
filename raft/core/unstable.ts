/**
 * Entries (and possibly a snapshot) that are not yet durable (etcd's `unstable`). The core hands them out
 * in a Ready; once the driver has persisted them and called advance(), they are dropped from here and read
 * back through the LogView.
 */
import type { Entry, SnapshotInfo } from '../types.js';
import { assert } from './util.js';

export class Unstable {
  snapshot: SnapshotInfo | null = null;
  /** The snapshot was handed out in the outstanding Ready. */
  snapshotInProgress = false;
  entries: Entry[] = [];
  /** Index of entries[0]. */
  offset: number;
  /** Entries with index < offsetInProgress were handed out in the outstanding Ready. */
  offsetInProgress: number;

  constructor(offset: number) {
    this.offset = offset;
    this.offsetInProgress = offset;
  }

  maybeFirstIndex(): number | null {
    return this.snapshot ? this.snapshot.meta.index + 1 : null;
  }

  maybeLastIndex(): number | null {
    if (this.entries.length > 0) return this.offset + this.entries.length - 1;
    return this.snapshot ? this.snapshot.meta.index : null;
  }

  maybeTerm(index: number): number | null {
    if (index < this.offset) {
      if (this.snapshot && this.snapshot.meta.index === index) return this.snapshot.meta.term;
      return null;
    }
    const e = this.entries[index - this.offset];
    return e ? e.term : null;
  }

  hasNextEntries(): boolean {
    return this.offsetInProgress < this.offset + this.entries.length;
  }

  nextEntries(): Entry[] {
    const start = this.offsetInProgress - this.offset;
    if (start >= this.entries.length) return [];
    return this.entries.slice(Math.max(0, start));
  }

  nextSnapshot(): SnapshotInfo | null {
    return this.snapshot && !this.snapshotInProgress ? this.snapshot : null;
  }

  /** Marks everything currently held as handed out. */
  acceptInProgress(): void {
    this.offsetInProgress = this.offset + this.entries.length;
    if (this.snapshot) this.snapshotInProgress = true;
  }

  /** Entries up to (index, term) are durable. Ignored if the entry at `index` was replaced meanwhile. */
  stableTo(index: number, term: number): void {
    if (index < this.offset) return;
    const t = this.maybeTerm(index);
    if (t === null || t !== term) return;
    this.entries = this.entries.slice(index + 1 - this.offset);
    this.offset = index + 1;
    this.offsetInProgress = Math.max(this.offsetInProgress, this.offset);
  }

  stableSnapTo(index: number): void {
    if (this.snapshot && this.snapshot.meta.index === index) {
      this.snapshot = null;
      this.snapshotInProgress = false;
    }
  }

  restore(snap: SnapshotInfo): void {
    this.offset = snap.meta.index + 1;
    this.offsetInProgress = this.offset;
    this.entries = [];
    this.snapshot = snap;
    this.snapshotInProgress = false;
  }

  truncateAndAppend(ents: Entry[]): void {
    if (ents.length === 0) return;
    const from = (ents[0] as Entry).index;
    const end = this.offset + this.entries.length;
    if (from === end) {
      for (const e of ents) this.entries.push(e);
    } else if (from <= this.offset) {
      assert(!this.snapshot || from > this.snapshot.meta.index, `unstable: truncating below snapshot at ${from}`);
      this.entries = ents.slice();
      this.offset = from;
    } else {
      assert(from < end, `unstable: gap appending ${from} after ${end - 1}`);
      this.entries = this.entries.slice(0, from - this.offset).concat(ents);
    }
    this.offsetInProgress = Math.min(this.offsetInProgress, from);
  }

  /** Entries in [lo, hi); the caller guarantees the range is within the unstable entries. */
  slice(lo: number, hi: number): Entry[] {
    assert(
      lo >= this.offset && hi <= this.offset + this.entries.length && lo <= hi,
      `unstable: slice [${lo}, ${hi}) out of [${this.offset}, ${this.offset + this.entries.length})`,
    );
    return this.entries.slice(lo - this.offset, hi - this.offset);
  }
}
