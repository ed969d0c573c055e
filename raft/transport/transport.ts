import type { Message, NodeId } from '../types.js';

export type PeerConnState = 'connecting' | 'connected' | 'waiting' | 'backoff';

/** Per-peer connection state and counters, for metrics and status pages. */
export interface PeerStats {
  id: NodeId;
  address: string;
  state: PeerConnState;
  /** True when this node dials the peer (one connection per pair: the smaller id dials). */
  dialer: boolean;
  queued_msgs: number;
  queued_bytes: number;
  sent_msgs: number;
  received_msgs: number;
  dropped_msgs: number;
  /** Connections established since the peer was added. */
  connects: number;
}

export type MessageHandler = (m: Message) => void;
/** Called when messages to `peer` were dropped (queue full, too large, peer unknown) or its connection was lost. */
export type UnreachableHandler = (peer: NodeId, dropped: Message[]) => void;

/**
 * Carries Raft messages between nodes. Delivery is best-effort: Raft tolerates loss, duplication and reordering
 * across connections, so a transport drops rather than blocks, and reports drops through onUnreachable.
 */
export interface Transport {
  readonly id: NodeId;
  /**
   * Largest encoded message this transport can carry (a larger one is dropped and reported unreachable).
   * The driver refuses to start when the core's maxMsgBytes or snapshotChunkBytes, plus the codec's framing
   * overhead, would not fit. Infinity when unbounded.
   */
  readonly maxPayload_bytes: number;
  send(msgs: Message[]): void;
  onMessage(handler: MessageHandler): void;
  onUnreachable(handler: UnreachableHandler): void;
  addPeer(id: NodeId, address: string): void;
  removePeer(id: NodeId): void;
  peers(): PeerStats[];
  close(): Promise<void>;
}

/** Bound on how many handlers of one kind a transport keeps (guards against a handler leak). */
export const MAX_HANDLERS = 16;
