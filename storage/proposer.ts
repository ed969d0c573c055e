import type { Command, CommandResult } from './types.js';

/**
 * The one write contract the controller knows: hand a command to the replicated state machine and resolve with
 * the `CommandResult` that `applyCommand` recorded for it, once it is durable and applied on this node (so the
 * caller reads its own write here). Two implementations: `LocalProposer` (single node) and `RaftProposer`
 * (src/cluster). Rejections that are not recorded results are `ProposalError`s (or the single node's
 * `OverloadedError`).
 */
export interface Proposer {
  propose(cmd: Command): Promise<CommandResult>;
  /** Whether a resolved proposal is fsync'd (false only in tests of non-durable paths). */
  readonly syncWrites: boolean;
  close(): Promise<void>;
}

/**
 * Why a proposal did not produce a recorded result.
 * - `no-leader`: the cluster has no leader this node can reach (nothing was proposed);
 * - `overloaded`: a bounded queue is full (nothing was proposed);
 * - `unknown-outcome`: the command may or may not be applied later (a forward or a leader was lost, or the wait
 *   timed out); the caller must not retry blindly;
 * - `stopped`: this node is shutting down or stopped itself;
 * - `upgrading`: the command needs a newer state-machine version than every member applies yet (a rolling upgrade
 *   under way; nothing was proposed).
 */
export type ProposalErrorCode = 'no-leader' | 'overloaded' | 'unknown-outcome' | 'stopped' | 'upgrading';

export class ProposalError extends Error {
  constructor(
    readonly code: ProposalErrorCode,
    message: string,
    /** What a client should wait before trying again (`Retry-After`). */
    readonly retryAfter_s = 1,
  ) {
    super(message);
    this.name = 'ProposalError';
  }
}
