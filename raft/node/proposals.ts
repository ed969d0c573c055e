/** Proposals waiting to be applied locally, keyed by log index. Bounded; resolved or rejected exactly once. */
import { RaftError } from './errors.js';

export interface ProposalResult {
  index: number;
  term: number;
}

interface Pending {
  term: number;
  resolve: (r: ProposalResult) => void;
  reject: (err: Error) => void;
}

export class PendingProposals {
  private readonly byIndex = new Map<number, Pending>();

  constructor(readonly max: number) {
    if (!(max > 0)) throw new RangeError('raft: maxPendingProposals must be positive');
  }

  get size(): number {
    return this.byIndex.size;
  }

  isFull(): boolean {
    return this.byIndex.size >= this.max;
  }

  add(index: number, term: number): Promise<ProposalResult> {
    const existing = this.byIndex.get(index);
    // A proposal at an index we already wait for means the old entry was replaced before we noticed.
    existing?.reject(new RaftError('overwritten', `entry ${index} (term ${existing.term}) was overwritten`));
    return new Promise((resolve, reject) => this.byIndex.set(index, { term, resolve, reject }));
  }

  /** Settles proposals for applied entries [first, last] whose terms are given by termAt. */
  applied(first: number, last: number, termAt: (index: number) => number | undefined): void {
    if (this.byIndex.size === 0) return;
    if (last - first + 1 > this.byIndex.size) {
      for (const [index, p] of this.byIndex) {
        if (index < first || index > last) continue;
        this.settle(index, p, termAt(index));
      }
      return;
    }
    for (let i = first; i <= last; i++) {
      const p = this.byIndex.get(i);
      if (p !== undefined) this.settle(i, p, termAt(i));
    }
  }

  /** Rejects every proposal at an index ≤ `index` that has not been settled (e.g. skipped by a snapshot). */
  skippedThrough(index: number): void {
    for (const [i, p] of this.byIndex) {
      if (i > index) continue;
      this.byIndex.delete(i);
      p.reject(new RaftError('leadership-lost', `entry ${i} was superseded by a snapshot; its outcome is unknown`));
    }
  }

  /** Rejects proposals above `commit` (leadership lost: they may or may not be committed later). */
  rejectAbove(commit: number, err: RaftError): void {
    for (const [i, p] of this.byIndex) {
      if (i <= commit) continue;
      this.byIndex.delete(i);
      p.reject(err);
    }
  }

  rejectAll(err: Error): void {
    const all = [...this.byIndex.values()];
    this.byIndex.clear();
    for (const p of all) p.reject(err);
  }

  private settle(index: number, p: Pending, term: number | undefined): void {
    this.byIndex.delete(index);
    if (term === p.term) p.resolve({ index, term });
    else p.reject(new RaftError('overwritten', `entry ${index} (term ${p.term}) was overwritten by term ${term}`));
  }
}
