/**
 * Deliberately broken cores (test-only): each overrides one protected seam of RaftCore to reintroduce a
 * classic Raft bug. The simulator must catch every one of them; see broken.test.ts.
 */
import { RaftCore } from '../core/raft.js';
import type { CoreOptions, Message } from '../types.js';

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

export const brokenCores = {
  noLogCheckVote: (o: CoreOptions) => new NoLogCheckVoteCore(o),
  staleVoteCounting: (o: CoreOptions) => new StaleVoteCountingCore(o),
  previousTermCommit: (o: CoreOptions) => new PreviousTermCommitCore(o),
};
