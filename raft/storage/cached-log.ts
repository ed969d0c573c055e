/**
 * What every durable log shares: the state it keeps in memory for the core's synchronous reads (entries since the
 * last compaction in a LogCache, the hard state, the applied membership, the snapshot) and the read side of
 * `LogView`/`DurableLog` over it. Subclasses own persistence.
 */
import type { ConfState, Entry, HardState, NodeId, SnapshotInfo } from '../types.js';
import { type AppliedConf, cloneConf, emptyConf, type PersistBatch } from './durable-log.js';
import { LogCache } from './log-cache.js';

export abstract class CachedLog {
  protected readonly cache = new LogCache();
  protected hs: HardState = { term: 0, vote: null, commit: 0 };
  protected conf: AppliedConf = { index: 0, conf: emptyConf(), addresses: {} };
  protected snap: SnapshotInfo | null = null;
  /** True until the first write (or a recovered non-empty store). */
  protected fresh = true;

  initialState(): { hardState: HardState; conf: ConfState } {
    return { hardState: { ...this.hs }, conf: cloneConf(this.conf.conf) };
  }

  firstIndex(): number {
    return this.cache.firstIndex();
  }

  lastIndex(): number {
    return this.cache.lastIndex();
  }

  term(index: number): number {
    return this.cache.term(index);
  }

  entries(lo: number, hi: number, maxBytes: number): Entry[] {
    return this.cache.entries(lo, hi, maxBytes);
  }

  snapshot(): SnapshotInfo | null {
    return this.snap;
  }

  hardState(): HardState {
    return { ...this.hs };
  }

  /** Whether `id` is a member (voter or learner, either side of a joint one) of the applied conf; copies nothing. */
  confHas(id: NodeId): boolean {
    const c = this.conf.conf;
    return (
      c.voters.includes(id) || c.votersOutgoing.includes(id) || c.learners.includes(id) || c.learnersNext.includes(id)
    );
  }

  appliedConf(): AppliedConf {
    return { index: this.conf.index, conf: cloneConf(this.conf.conf), addresses: { ...this.conf.addresses } };
  }

  isEmpty(): boolean {
    return this.fresh;
  }

  /** One durable write of a Ready's snapshot, entries and hard state (subclasses define what durable means). */
  abstract persist(batch: PersistBatch): Promise<void>;

  append(entries: Entry[]): Promise<void> {
    return this.persist({ snapshot: null, entries, hardState: null });
  }

  setHardState(hs: HardState): Promise<void> {
    return this.persist({ snapshot: null, entries: [], hardState: hs });
  }

  applySnapshot(snap: SnapshotInfo): Promise<void> {
    return this.persist({ snapshot: snap, entries: [], hardState: null });
  }

  /** Number of entries held in memory (bounded by compaction). */
  entryCount(): number {
    return this.cache.count();
  }
}
