/**
 * Cluster configuration plus the per-peer progress and the votes of the current election
 * (etcd's tracker.ProgressTracker).
 */
import type { ConfState, NodeId } from '../types.js';
import type { Progress } from './progress.js';
import { jointCommittedIndex, jointVoteResult, type VoteResult } from './quorum.js';

export interface TrackerConfig {
  /** Voters of the incoming (or only) configuration. */
  incoming: Set<NodeId>;
  /** Voters of the outgoing configuration; non-empty only while joint. */
  outgoing: Set<NodeId>;
  learners: Set<NodeId>;
  /** Learners to add when the joint configuration is left (they are still voters in `outgoing`). */
  learnersNext: Set<NodeId>;
  autoLeave: boolean;
}

export function emptyTrackerConfig(): TrackerConfig {
  return { incoming: new Set(), outgoing: new Set(), learners: new Set(), learnersNext: new Set(), autoLeave: false };
}

export function copyTrackerConfig(c: TrackerConfig): TrackerConfig {
  return {
    incoming: new Set(c.incoming),
    outgoing: new Set(c.outgoing),
    learners: new Set(c.learners),
    learnersNext: new Set(c.learnersNext),
    autoLeave: c.autoLeave,
  };
}

export class ProgressTracker {
  readonly votes = new Map<NodeId, boolean>();

  constructor(
    public config: TrackerConfig,
    public progress: Map<NodeId, Progress>,
    readonly maxInflight: number,
  ) {}

  isJoint(): boolean {
    return this.config.outgoing.size > 0;
  }

  isVoter(id: NodeId): boolean {
    return this.config.incoming.has(id) || this.config.outgoing.has(id);
  }

  /** Exactly one voter and not joint. */
  isSingleton(): boolean {
    return this.config.incoming.size === 1 && this.config.outgoing.size === 0;
  }

  /** Highest index replicated on a (joint) quorum of voters. */
  committed(): number {
    return jointCommittedIndex(this.config.incoming, this.config.outgoing, (id) => this.progress.get(id)?.match ?? 0);
  }

  voteResult(vote: (id: NodeId) => boolean | undefined): VoteResult {
    return jointVoteResult(this.config.incoming, this.config.outgoing, vote);
  }

  /** Records the first vote of `id` in this election (later ones are ignored). */
  recordVote(id: NodeId, granted: boolean): void {
    if (!this.votes.has(id)) this.votes.set(id, granted);
  }

  tallyVotes(): VoteResult {
    return this.voteResult((id) => this.votes.get(id));
  }

  resetVotes(): void {
    this.votes.clear();
  }

  /** True when a quorum of voters was recently active (`self` counts as active). */
  quorumActive(self: NodeId): boolean {
    const active = (id: NodeId): boolean => {
      if (id === self) return true;
      const pr = this.progress.get(id);
      return pr ? pr.recentActive : false;
    };
    return this.voteResult(active) === 'won';
  }

  /** All voters (incoming and outgoing), sorted. */
  voterIds(): NodeId[] {
    const ids = new Set<NodeId>(this.config.incoming);
    for (const id of this.config.outgoing) ids.add(id);
    return [...ids].sort();
  }

  confState(): ConfState {
    return {
      voters: [...this.config.incoming].sort(),
      learners: [...this.config.learners].sort(),
      votersOutgoing: [...this.config.outgoing].sort(),
      learnersNext: [...this.config.learnersNext].sort(),
      autoLeave: this.config.autoLeave,
    };
  }
}
