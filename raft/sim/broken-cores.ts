/**
 * Deliberately broken cores (test-only): each overrides one protected seam of RaftCore (or wraps a public
 * method) to reintroduce a classic Raft bug. The simulator must catch every one of them; see broken.test.ts
 * and checks.test.ts.
 */
import { RaftCore } from '../core/raft.js';
import type { CoreOptions, Message, Ready } from '../types.js';

/** Grants votes without the log up-to-date check (breaks leader completeness). */
export class NoLogCheckVoteCore extends RaftCore {
  protected override candidateLogUpToDate(): boolean {
    return true;
  }
}

/** Counts vote responses from earlier terms toward the current election (breaks election safety). */
export class StaleVoteCountingCore extends RaftCore {
  protected override acceptLowerTermMessage(m: Message): boolean {
    return m.type === 'voteResp';
  }
}

/** Commits any replicated entry by counting, including entries of earlier terms (Raft paper, Figure 8). */
export class PreviousTermCommitCore extends RaftCore {
  protected override commitAllowed(index: number): boolean {
    return this.termAt(index) !== null;
  }
}

/**
 * A leader that counts its own entries toward a commit as soon as it appends them (etcd's rule with synchronous
 * writes), while the driver sends its appends before its own write is durable: a commit can then rest on a copy
 * that a crash of the leader loses. Caught by the commit-durability check when the leader decides such a commit.
 */
export class SelfAckAtAppendCore extends RaftCore {
  override ready(): Ready {
    if (this.basicStatus().role === 'leader') {
      this.tracker.progress.get(this.id)?.maybeUpdate(this.log.lastIndex());
      // The commit rule is private: reach it the way only a test may.
      (this as unknown as { leaderMaybeCommit(): boolean }).leaderMaybeCommit();
    }
    return super.ready();
  }
}

/**
 * A leader-transfer target that takes over in the current term instead of campaigning in a new one (a
 * "handover" without an election): the old leader still leads that term. Caught by election safety (two leaders
 * of one term) at the step that makes it leader, before any vote, log or commit check can see it.
 */
export class SameTermTakeoverCore extends RaftCore {
  override step(m: Message): void {
    const s = this.basicStatus();
    if (m.type !== 'timeoutNow' || m.term !== s.term || s.role !== 'follower') {
      super.step(m);
      return;
    }
    // The seams are private: reach them the way only a test may.
    const core = this as unknown as { state: string; becomeLeader(): void; bcastAppend(): void };
    core.state = 'candidate';
    core.becomeLeader();
    core.bcastAppend();
  }
}

/**
 * A leader that writes its entries to disk through a codec that differs from the wire's (a stray trailing byte on
 * every non-empty proposal): its durable copy of an entry differs from the copy its followers persist. Caught by log
 * matching (one content per index and term) when the second copy becomes durable; nothing is applied before, since
 * an entry commits only once durable on the leader and on the followers that count for it.
 */
export class LeaderDiskCodecCore extends RaftCore {
  override ready(): Ready {
    const rd = super.ready();
    if (this.basicStatus().role !== 'leader') return rd;
    rd.entries = rd.entries.map((e) => {
      if (e.type !== 'normal' || e.data.byteLength === 0) return e;
      const data = new Uint8Array(e.data.byteLength + 1);
      data.set(e.data);
      return { ...e, data };
    });
    return rd;
  }
}

/**
 * A leader that ignores its learners' append responses: a learner keeps getting its first batch again and
 * stalls once the log outgrows one message. No safety property breaks; the convergence check catches it.
 */
export class IgnoreLearnerAcksCore extends RaftCore {
  override step(m: Message): void {
    if (m.type === 'appendResp' && this.basicStatus().role === 'leader') {
      if (this.status({ progress: false }).conf.learners.includes(m.from)) return;
    }
    super.step(m);
  }
}

export const brokenCores = {
  noLogCheckVote: (o: CoreOptions) => new NoLogCheckVoteCore(o),
  staleVoteCounting: (o: CoreOptions) => new StaleVoteCountingCore(o),
  previousTermCommit: (o: CoreOptions) => new PreviousTermCommitCore(o),
  selfAckAtAppend: (o: CoreOptions) => new SelfAckAtAppendCore(o),
  ignoreLearnerAcks: (o: CoreOptions) => new IgnoreLearnerAcksCore(o),
  sameTermTakeover: (o: CoreOptions) => new SameTermTakeoverCore(o),
  leaderDiskCodec: (o: CoreOptions) => new LeaderDiskCodecCore(o),
};
