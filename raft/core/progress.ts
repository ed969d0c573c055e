/**
 * The leader's view of one follower: how far its log matches, what to send next, and flow control
 * (etcd's tracker.Progress and tracker.Inflights, plus the state of a chunked snapshot stream).
 */
import type { SnapshotInfo } from '../types.js';
import { assert } from './util.js';

export type ProgressState = 'probe' | 'replicate' | 'snapshot';

/** A bounded ring of the last indices of in-flight append messages (the pipelining window). */
export class Inflights {
  private readonly ring: number[];
  private start = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    assert(Number.isInteger(capacity) && capacity >= 1, `inflights capacity ${capacity}`);
    this.ring = new Array<number>(capacity).fill(0);
  }

  get size(): number {
    return this.count;
  }

  full(): boolean {
    return this.count === this.capacity;
  }

  /** Records an append message whose last entry is `lastIndex`. */
  add(lastIndex: number): void {
    assert(!this.full(), 'inflights: add to a full window');
    if (this.count > 0) {
      const newest = this.ring[(this.start + this.count - 1) % this.capacity] as number;
      assert(lastIndex > newest, `inflights: index ${lastIndex} not after ${newest}`);
    }
    this.ring[(this.start + this.count) % this.capacity] = lastIndex;
    this.count++;
  }

  /** Frees every message whose last index is <= `index` (they are acknowledged). */
  freeLE(index: number): void {
    while (this.count > 0 && (this.ring[this.start] as number) <= index) {
      this.start = (this.start + 1) % this.capacity;
      this.count--;
    }
    if (this.count === 0) this.start = 0;
  }

  reset(): void {
    this.start = 0;
    this.count = 0;
  }
}

/** A snapshot being streamed to one follower in chunks (go-back-N over a window of maxInflightMsgs chunks). */
export class SnapshotStream {
  readonly totalChunks: number;
  /** Next chunk to send. */
  nextChunk = 0;
  /** Chunks the follower confirmed it holds (in order). */
  ackedChunks = 0;
  /** Heartbeat responses seen without any acknowledged progress. */
  stalledBeats = 0;

  constructor(
    readonly snapshot: SnapshotInfo,
    readonly chunkBytes: number,
  ) {
    assert(chunkBytes >= 1, `snapshot chunk bytes ${chunkBytes}`);
    assert(
      Number.isSafeInteger(snapshot.size_bytes) && snapshot.size_bytes >= 0,
      `snapshot size ${snapshot.size_bytes}`,
    );
    this.totalChunks = Math.max(1, Math.ceil(snapshot.size_bytes / chunkBytes));
  }

  /** Number of whole chunks covered by `bytes` received by the follower. */
  chunksFor(bytes: number): number {
    if (bytes >= this.snapshot.size_bytes) return this.snapshot.size_bytes === 0 ? 0 : this.totalChunks;
    return Math.floor(bytes / this.chunkBytes);
  }
}

export class Progress {
  match = 0;
  next: number;
  state: ProgressState = 'probe';
  /** Index of the snapshot being sent (state `snapshot`). */
  pendingSnapshot = 0;
  /** Heard from since the last check-quorum round. */
  recentActive = false;
  /** Probe sent (probe state) or window full (replicate state): hold further appends until a response. */
  msgAppFlowPaused = false;
  isLearner: boolean;
  readonly inflights: Inflights;
  stream: SnapshotStream | null = null;

  constructor(next: number, inflights: Inflights, isLearner: boolean) {
    this.next = next;
    this.isLearner = isLearner;
    this.inflights = inflights;
  }

  /** A copy whose learner flag may be changed independently (used by the configuration changer). */
  clone(): Progress {
    // The in-flight window and snapshot stream move to the copy; the original is discarded by the caller.
    const p = new Progress(this.next, this.inflights, this.isLearner);
    p.match = this.match;
    p.state = this.state;
    p.pendingSnapshot = this.pendingSnapshot;
    p.recentActive = this.recentActive;
    p.msgAppFlowPaused = this.msgAppFlowPaused;
    p.stream = this.stream;
    return p;
  }

  resetState(state: ProgressState): void {
    this.msgAppFlowPaused = false;
    this.pendingSnapshot = 0;
    this.state = state;
    this.inflights.reset();
    this.stream = null;
  }

  becomeProbe(): void {
    if (this.state === 'snapshot') {
      const pending = this.pendingSnapshot;
      this.resetState('probe');
      this.next = Math.max(this.match + 1, pending + 1);
    } else {
      this.resetState('probe');
      this.next = this.match + 1;
    }
  }

  becomeReplicate(): void {
    this.resetState('replicate');
    this.next = this.match + 1;
  }

  becomeSnapshot(snapshotIndex: number, stream: SnapshotStream): void {
    this.resetState('snapshot');
    this.pendingSnapshot = snapshotIndex;
    this.next = snapshotIndex + 1;
    this.stream = stream;
  }

  /** Called on a successful append response for `n`; true if the match index moved. */
  maybeUpdate(n: number): boolean {
    let updated = false;
    if (this.match < n) {
      this.match = n;
      updated = true;
      this.msgAppFlowPaused = false;
    }
    this.next = Math.max(this.next, n + 1);
    return updated;
  }

  /**
   * Called on a rejected append of `rejected` (the prevLogIndex the follower refused) with the follower's hint.
   * Returns false when the rejection is stale.
   */
  maybeDecrTo(rejected: number, matchHint: number): boolean {
    if (this.state === 'replicate') {
      if (rejected <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    // Outside replicate state the follower is probed one message at a time: a rejection for anything but
    // next-1 is stale.
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, matchHint + 1), this.match + 1);
    this.msgAppFlowPaused = false;
    return true;
  }

  isPaused(): boolean {
    if (this.state === 'snapshot') return true;
    return this.msgAppFlowPaused;
  }

  /** Book-keeping after sending an append carrying `count` entries, the last of which is `lastIndex`. */
  sentEntries(count: number, lastIndex: number): void {
    if (this.state === 'replicate') {
      if (count > 0) {
        this.next = lastIndex + 1;
        this.inflights.add(lastIndex);
      }
      this.msgAppFlowPaused = this.inflights.full();
    } else if (this.state === 'probe') {
      if (count > 0) this.msgAppFlowPaused = true;
    } else {
      assert(false, 'sentEntries in snapshot state');
    }
  }
}
