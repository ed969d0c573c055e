import type { NodeId } from '../types.js';

export type RaftErrorCode =
  /** The node stopped before the operation completed. */
  | 'stopped'
  /** This node lost leadership before the entry was committed; it may still be committed by the new leader. */
  | 'leadership-lost'
  /** The entry at the proposal's index was replaced by another leader's entry: it will never be applied. */
  | 'overwritten'
  /** A bounded queue (pending proposals or reads, the leader's uncommitted bytes) is full; retry later. */
  | 'too-many-pending'
  /** The operation did not complete within its bound. */
  | 'timeout'
  /** The operation needs the leader and this node is not it (or is handing leadership over); see `leader`. */
  | 'not-leader'
  /** The proposal's entry would exceed maxMsgBytes (it could never be sent to a follower). */
  | 'too-large'
  /** promote(): the learner did not catch up with the leader's log within the bound. */
  | 'not-caught-up'
  /** The core refused the membership change (another change still pending, invalid for the configuration). */
  | 'conf-change-refused'
  /** The durable log, the state machine or the core failed; the node stopped itself. */
  | 'fatal';

export class RaftError extends Error {
  readonly code: RaftErrorCode;
  /** For `not-leader`: the leader this node knows of, to forward to (null when none is known). */
  readonly leader: NodeId | null;

  constructor(code: RaftErrorCode, message: string, opts: { leader?: NodeId | null; cause?: unknown } = {}) {
    super(`raft: ${message}`, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'RaftError';
    this.code = code;
    this.leader = opts.leader ?? null;
  }
}
