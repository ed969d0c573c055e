export type RaftErrorCode =
  /** The node stopped before the operation completed. */
  | 'stopped'
  /** This node lost leadership before the entry was committed; it may still be committed by the new leader. */
  | 'leadership-lost'
  /** The entry at the proposal's index was replaced by another leader's entry: it will never be applied. */
  | 'overwritten'
  /** The bounded queue of pending proposals or reads is full; retry later. */
  | 'too-many-pending'
  /** The operation did not complete within its bound. */
  | 'timeout'
  /** The operation needs the leader and this node is not it (see status().leader). */
  | 'not-leader'
  /** The durable log or the state machine failed; the node stopped itself. */
  | 'fatal';

export class RaftError extends Error {
  readonly code: RaftErrorCode;
  constructor(code: RaftErrorCode, message: string) {
    super(`raft: ${message}`);
    this.name = 'RaftError';
    this.code = code;
  }
}
