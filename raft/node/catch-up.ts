/**
 * promote() callers waiting for a learner to catch up with the leader's log before it is made a voter (etcd's
 * isLearnerReady): adding a voter that cannot keep up raises the quorum without adding a working member.
 * A learner is caught up when the leader replicates to it steadily (progress state `replicate`, i.e. it has
 * acknowledged appends) and its match index is within `maxLag_entries` of the leader's last index.
 * Bounded in number; every waiter is settled exactly once (caught up, deadline, leadership lost, stop).
 */
import type { NodeId } from '../types.js';
import { RaftError } from './errors.js';

/** What the leader knows of one member's replication progress. */
export interface MemberProgress {
  match: number;
  state: 'probe' | 'replicate' | 'snapshot';
}

/** The driver's view at a check: null when this node does not lead (with the leader it knows of). */
export type LeaderView =
  | { leading: true; lastIndex: number; progress: (id: NodeId) => MemberProgress | null }
  | { leading: false; leader: NodeId | null };

interface Waiter {
  id: NodeId;
  deadline_ms: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

export class CatchUpWaiters {
  private waiters: Waiter[] = [];

  constructor(
    readonly max: number,
    readonly maxLag_entries: number,
  ) {
    if (!(max > 0)) throw new RangeError('raft: the bound on waiting promotions must be positive');
    if (!(Number.isSafeInteger(maxLag_entries) && maxLag_entries >= 0))
      throw new RangeError('raft: promoteMaxLag_entries must be a non-negative integer');
  }

  get size(): number {
    return this.waiters.length;
  }

  /** Resolves once `id` is caught up (checked on every check()), rejects `not-caught-up` after timeout_ms. */
  wait(id: NodeId, now_ms: number, timeout_ms: number): Promise<void> {
    if (this.waiters.length >= this.max) {
      return Promise.reject(new RaftError('too-many-pending', `${this.waiters.length} promotions waiting`));
    }
    return new Promise((resolve, reject) =>
      this.waiters.push({ id, deadline_ms: now_ms + timeout_ms, resolve, reject }),
    );
  }

  /** Settles every waiter whose learner caught up, whose deadline passed, or whose leader stopped leading. */
  check(now_ms: number, view: LeaderView): void {
    if (this.waiters.length === 0) return;
    const keep: Waiter[] = [];
    const settle: Array<() => void> = [];
    for (const w of this.waiters) {
      if (!view.leading) {
        const err = new RaftError('not-leader', `stopped leading while ${w.id} was catching up`, {
          leader: view.leader,
        });
        settle.push(() => w.reject(err));
        continue;
      }
      const pr = view.progress(w.id);
      if (pr === null) {
        settle.push(() => w.reject(new RaftError('not-caught-up', `${w.id} is no longer a member`)));
        continue;
      }
      const lag = view.lastIndex - pr.match;
      if (pr.state === 'replicate' && lag <= this.maxLag_entries) {
        settle.push(w.resolve);
        continue;
      }
      if (now_ms >= w.deadline_ms) {
        const err = new RaftError(
          'not-caught-up',
          `${w.id} did not catch up in time: match ${pr.match} (${pr.state}), leader's last index ${view.lastIndex}, ` +
            `allowed lag ${this.maxLag_entries}`,
        );
        settle.push(() => w.reject(err));
        continue;
      }
      keep.push(w);
    }
    this.waiters = keep;
    for (const fn of settle) fn();
  }

  rejectAll(err: Error): void {
    const all = this.waiters;
    this.waiters = [];
    for (const w of all) w.reject(err);
  }
}
