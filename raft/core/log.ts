/**
 * The Raft log as the core sees it: durable entries through the LogView plus the unstable tail
 * (etcd's raftLog). Tracks the commit and applied indices.
 */
import {
  CompactedError,
  type Entry,
  entrySizeBytes,
  type LogView,
  type SnapshotInfo,
  UnavailableError,
} from '../types.js';
import { Unstable } from './unstable.js';
import { assert, limitSize } from './util.js';

/** "Nothing to take" (frozen: shared by every call). */
const NO_ENTRIES = Object.freeze([]) as unknown as Entry[];

export class RaftLog {
  readonly unstable: Unstable;
  committed: number;
  applied: number;
  /** Last committed index handed to the driver to apply (by a Ready or takeDurableCommitted); >= applied once set. */
  applying = 0;

  constructor(readonly storage: LogView) {
    const first = storage.firstIndex();
    const last = storage.lastIndex();
    assert(first >= 1 && last >= first - 1, `log: storage range first ${first} last ${last}`);
    this.unstable = new Unstable(last + 1);
    this.committed = first - 1;
    this.applied = first - 1;
  }

  firstIndex(): number {
    return this.unstable.maybeFirstIndex() ?? this.storage.firstIndex();
  }

  lastIndex(): number {
    return this.unstable.maybeLastIndex() ?? this.storage.lastIndex();
  }

  /** Term of `index`, or null when it is compacted (below firstIndex-1) or beyond the last index. */
  termOrNull(index: number): number | null {
    const u = this.unstable.maybeTerm(index);
    if (u !== null) return u;
    if (index < this.firstIndex() - 1 || index > this.lastIndex()) return null;
    if (index >= this.unstable.offset) return null;
    try {
      return this.storage.term(index);
    } catch (err) {
      if (err instanceof CompactedError || err instanceof UnavailableError) return null;
      throw err;
    }
  }

  /** Term of `index`; throws CompactedError / UnavailableError when out of range. */
  term(index: number): number {
    const t = this.termOrNull(index);
    if (t !== null) return t;
    if (index < this.firstIndex() - 1) throw new CompactedError(index);
    throw new UnavailableError(index);
  }

  /**
   * Last index of the durable prefix of this log: entries below the unstable offset were persisted and advanced
   * (entries handed out in the outstanding Ready are not durable yet).
   */
  durableLastIndex(): number {
    return this.unstable.offset - 1;
  }

  lastTerm(): number {
    const t = this.termOrNull(this.lastIndex());
    assert(t !== null, `log: no term for last index ${this.lastIndex()}`);
    return t;
  }

  matchTerm(index: number, term: number): boolean {
    return this.termOrNull(index) === term;
  }

  /** A candidate's log (lastIndex, lastTerm) is at least as up to date as ours (Raft §5.4.1). */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    const ourTerm = this.lastTerm();
    return lastTerm > ourTerm || (lastTerm === ourTerm && lastIndex >= this.lastIndex());
  }

  /**
   * Appends `ents` after (prevIndex, prevTerm) if that entry matches, truncating a conflicting suffix, and
   * advances the commit index. Returns the index of the last new entry, or -1 when prev does not match.
   */
  maybeAppend(prevIndex: number, prevTerm: number, committed: number, ents: Entry[]): number {
    if (!this.matchTerm(prevIndex, prevTerm)) return -1;
    const lastNew = prevIndex + ents.length;
    const ci = this.findConflict(ents);
    if (ci !== 0) {
      assert(ci > this.committed, `log: entry ${ci} conflicts with committed entry (committed ${this.committed})`);
      const offset = prevIndex + 1;
      assert(ci - offset < ents.length, `log: conflict index ${ci} out of range`);
      this.append(ents.slice(ci - offset));
    }
    this.commitTo(Math.min(committed, lastNew));
    return lastNew;
  }

  append(ents: Entry[]): number {
    if (ents.length === 0) return this.lastIndex();
    const after = (ents[0] as Entry).index - 1;
    assert(after >= this.committed, `log: append after ${after} is below committed ${this.committed}`);
    this.unstable.truncateAndAppend(ents);
    return this.lastIndex();
  }

  /** Index of the first entry of `ents` that is not in the log with the same term (0 when all match). */
  findConflict(ents: Entry[]): number {
    for (const e of ents) {
      if (!this.matchTerm(e.index, e.term)) return e.index;
    }
    return 0;
  }

  /**
   * The largest index <= `index` whose term is <= `term`, with that term (etcd's findConflictByTerm).
   * When the term is unknown (compacted) returns [index, 0].
   */
  findConflictByTerm(index: number, term: number): [number, number] {
    for (; index > 0; index--) {
      const ours = this.termOrNull(index);
      if (ours === null) return [index, 0];
      if (ours <= term) return [index, ours];
    }
    return [0, 0];
  }

  commitTo(toCommit: number): void {
    if (this.committed < toCommit) {
      assert(
        toCommit <= this.lastIndex(),
        `log: commit ${toCommit} beyond last index ${this.lastIndex()} (log corrupted or lost?)`,
      );
      this.committed = toCommit;
    }
  }

  /** Commits `maxIndex` if it moves the commit index and `allowed` (the current-term rule) holds. */
  maybeCommit(maxIndex: number, allowed: (index: number) => boolean): boolean {
    if (maxIndex > this.committed && maxIndex <= this.lastIndex() && allowed(maxIndex)) {
      this.commitTo(maxIndex);
      return true;
    }
    return false;
  }

  appliedTo(index: number): void {
    if (index <= this.applied) return;
    assert(index <= this.committed, `log: applied ${index} beyond committed ${this.committed}`);
    this.applied = index;
  }

  /** Entries in [lo, hi) of at most maxBytes (at least one). Throws CompactedError if lo is compacted. */
  slice(lo: number, hi: number, maxBytes: number): Entry[] {
    assert(lo <= hi, `log: invalid slice [${lo}, ${hi})`);
    const first = this.firstIndex();
    if (lo < first) throw new CompactedError(lo);
    const last = this.lastIndex();
    if (hi > last + 1) throw new UnavailableError(hi - 1);
    if (lo === hi) return [];
    const uOffset = this.unstable.offset;
    let ents: Entry[] = [];
    if (lo < uOffset) {
      const storedHi = Math.min(hi, uOffset);
      ents = this.storage.entries(lo, storedHi, maxBytes);
      assert(ents.length > 0, `log: storage returned no entries for [${lo}, ${storedHi})`);
      if (ents.length < storedHi - lo) return ents;
      if (storedHi === hi) return ents;
    }
    const unstable = this.unstable.slice(Math.max(lo, uOffset), hi);
    if (ents.length === 0) return limitSize(unstable, maxBytes);
    let size = 0;
    for (const e of ents) size += entrySizeBytes(e);
    const out = ents.slice();
    for (const e of unstable) {
      size += entrySizeBytes(e);
      if (size > maxBytes) break;
      out.push(e);
    }
    return out;
  }

  hasNextCommittedEnts(): boolean {
    return this.committed > Math.max(this.applied, this.applying, this.firstIndex() - 1);
  }

  /** Committed entries not handed out yet (at most maxBytes, at least one); they count as handed out. */
  nextCommittedEnts(maxBytes: number): Entry[] {
    const lo = Math.max(this.applied + 1, this.applying + 1, this.firstIndex());
    const hi = this.committed + 1;
    if (lo >= hi) return [];
    const ents = this.slice(lo, hi, maxBytes);
    this.applying = (ents[ents.length - 1] as Entry).index;
    return ents;
  }

  /**
   * Committed entries not handed out yet that this log holds durably (below the unstable part), up to the first
   * membership change and at most maxBytes (at least one); none while a snapshot is being installed. They count as
   * handed out.
   */
  takeDurableCommitted(maxBytes: number): Entry[] {
    if (this.unstable.snapshot !== null) return NO_ENTRIES;
    const lo = Math.max(this.applied + 1, this.applying + 1, this.firstIndex());
    const hi = Math.min(this.committed, this.durableLastIndex()) + 1;
    if (lo >= hi) return NO_ENTRIES;
    let ents = this.slice(lo, hi, maxBytes);
    const conf = ents.findIndex((e) => e.type === 'conf');
    if (conf >= 0) ents = ents.slice(0, conf);
    if (ents.length > 0) this.applying = (ents[ents.length - 1] as Entry).index;
    return ents;
  }

  hasPendingSnapshot(): boolean {
    return this.unstable.snapshot !== null;
  }

  /** The newest snapshot: an unstable one being installed, else the durable one. */
  snapshot(): SnapshotInfo | null {
    return this.unstable.snapshot ?? this.storage.snapshot();
  }

  restore(snap: SnapshotInfo): void {
    assert(
      snap.meta.index > this.committed,
      `log: restoring snapshot ${snap.meta.index} <= committed ${this.committed}`,
    );
    this.committed = snap.meta.index;
    this.unstable.restore(snap);
  }
}
