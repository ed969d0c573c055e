/** Public entry of Keel's Raft library: what an application needs to run a replicated state machine. */

/** To read membership changes (and their context) from `conf` entries handed to StateMachine.apply. */
export { decodeConfChange } from './core/raft.js';
export { decodeAddresses as decodeConfAddresses } from './node/conf-context.js';
export { forceNewCluster } from './node/force-new-cluster.js';
export { checkedChunks, joinChunks } from './node/snapshot-stream.js';
export {
  type NodeStatus,
  type ProposalResult,
  RaftError,
  type RaftErrorCode,
  RaftNode,
  type RaftNodeOptions,
  type SnapshotChunks,
  type StateMachine,
} from './node.js';
export type { AppliedConf, DurableLog, PersistBatch } from './storage/durable-log.js';
export { confMembers } from './storage/durable-log.js';
export { LogCorruptError, LogStateError, SnapshotSupersededError } from './storage/errors.js';
export { LevelLog, type LevelLogOptions } from './storage/level-log.js';
export type { LogDb, LogDbIterator, LogDbOp, LogDbRange } from './storage/log-db.js';
export { MemoryDurableLog } from './storage/memory-durable-log.js';
/** Framing allowance: maxMsgBytes and snapshotChunkBytes plus this must fit the transport's maxPayload_bytes. */
export { MESSAGE_OVERHEAD_BYTES } from './transport/codec.js';
export {
  answerWithLinkHeaders,
  type LinkCheck,
  type LinkRefusal,
  LinkRefusedError,
  printable,
  REFUSAL_LINGER_MS,
  rejectUpgrade,
} from './transport/handshake.js';
export { MemoryNetwork, type MemoryNetworkOptions, MemoryTransport, type NetworkFilter } from './transport/memory.js';
export type {
  MessageHandler,
  PeerConnState,
  PeerStats,
  Transport,
  UnreachableHandler,
} from './transport/transport.js';
export { type TransportTlsOptions, WebSocketTransport, type WebSocketTransportOptions } from './transport/websocket.js';
export * from './types.js';
