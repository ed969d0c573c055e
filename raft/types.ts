/**
 * Shared vocabulary of the Raft library. The pure core (raft/core), the durable log (raft/storage),
 * the transports (raft/transport), the driver (raft/node) and the simulator (raft/sim) all speak it.
 *
 * Nothing here does I/O. Units are in names: *_ms for milliseconds, *_bytes for sizes, ticks for core time.
 * raft/ imports nothing from src/, http/ or storage/.
 */

export type NodeId = string;

/** `normal` carries application data; `conf` carries an encoded ConfChange; `noop` is the empty entry a new leader appends. */
export type EntryType = 'normal' | 'conf' | 'noop';

export interface Entry {
  term: number;
  index: number;
  type: EntryType;
  /** Opaque application bytes (for `conf`: encoded ConfChange; for `noop`: empty). */
  data: Uint8Array;
}

/** State that must be durable before any message that depends on it is sent. */
export interface HardState {
  term: number;
  vote: NodeId | null;
  commit: number;
}

/** Cluster membership. `votersOutgoing` is non-empty only while in a joint configuration. */
export interface ConfState {
  voters: NodeId[];
  learners: NodeId[];
  votersOutgoing: NodeId[];
  /** Learners that become voters when the joint configuration is left (etcd's LearnersNext). */
  learnersNext: NodeId[];
  /** True when leaving the joint configuration happens automatically once it is committed. */
  autoLeave: boolean;
}

export type ConfChangeType = 'addVoter' | 'addLearner' | 'removeNode';

export interface ConfChangeSingle {
  type: ConfChangeType;
  node: NodeId;
}

/** A membership change: one change is a simple change; several (or `transition: 'joint'`) use joint consensus. An empty `changes` list leaves a joint configuration. */
export interface ConfChange {
  changes: ConfChangeSingle[];
  transition?: 'auto' | 'joint';
  /** Opaque application context (e.g. the new member's addresses), delivered with the applied entry. */
  context?: Uint8Array;
}

export interface SnapshotMeta {
  index: number;
  term: number;
  conf: ConfState;
  /**
   * Transport addresses of the configuration's members, as the node streaming the snapshot knew them (carried in
   * the chunk message's context). The entries that announced them (conf-change contexts) may be compacted away, so
   * a node that catches up by this snapshot learns them here. Absent when the sender is of an earlier version.
   */
  addresses?: Record<NodeId, string>;
}

/**
 * A snapshot as the core knows it: its metadata and its size. The bytes stay in the driver's storage (the log's
 * chunk records): the core never holds them. It sends a lagging follower chunk messages whose data the driver
 * reads from storage as it sends them, and hands a follower's received chunks to its driver to store.
 */
export interface SnapshotInfo {
  meta: SnapshotMeta;
  size_bytes: number;
  /**
   * A deferred snapshot: only its metadata is recorded (size_bytes 0). Its state is the state machine's own durable
   * state, which held at least meta.index when it was recorded (StateMachine.checkpoint). It compacts the log but
   * cannot be streamed: a follower that needs a snapshot gets one taken for it (the core asks its driver,
   * takeSnapshotRequest).
   */
  deferred?: true;
}

/** A whole snapshot in one buffer: for simple state machines (StateMachine.restore) and in-memory logs. */
export interface Snapshot {
  meta: SnapshotMeta;
  data: Uint8Array;
}

export type MessageType =
  | 'preVote'
  | 'preVoteResp'
  | 'vote'
  | 'voteResp'
  | 'append'
  | 'appendResp'
  | 'heartbeat'
  | 'heartbeatResp'
  | 'snapshot'
  | 'snapshotResp'
  | 'timeoutNow'
  | 'readIndex'
  | 'readIndexResp'
  | 'propose'
  | 'transferLeader';

/**
 * One message between nodes. Fields not meaningful for a type are left at 0 / empty.
 * A message is plain data: it is framed with msgpackr by the transports.
 */
export interface Message {
  type: MessageType;
  from: NodeId;
  to: NodeId;
  term: number;
  /** Term of the entry at `index` (append: prevLogTerm; vote: lastLogTerm). */
  logTerm: number;
  /** append: prevLogIndex; vote: lastLogIndex; appendResp: last matched index or the rejected index. */
  index: number;
  entries: Entry[];
  commit: number;
  reject: boolean;
  /** On a rejected append: the follower's hint for fast backtracking (index to retry from). */
  rejectHint: number;
  /** Term at rejectHint, for the leader's term-skipping backtrack. */
  rejectTerm?: number;
  /** For snapshot messages: one chunk of the snapshot being streamed. */
  snapshot?: SnapshotChunk;
  /** Opaque request context (read-index requests, heartbeats that carry them). */
  context?: Uint8Array;
}

/**
 * A bounded piece of a snapshot. The leader's core emits chunks with empty `data` (it does not hold the bytes):
 * the driver fills in the snapshot's bytes from offset_bytes on (up to its snapshotChunkBytes) from its storage
 * before sending. A follower's core checks the order and hands every chunk
 * it accepts to its driver in `Ready.snapshotChunks`, and installs (`Ready.snapshot`) on `done`.
 */
export interface SnapshotChunk {
  meta: SnapshotMeta;
  offset_bytes: number;
  data: Uint8Array;
  done: boolean;
}

export type Role = 'follower' | 'preCandidate' | 'candidate' | 'leader';

export interface SoftState {
  leader: NodeId | null;
  role: Role;
}

/** Answer to a ReadIndex request: once the applied index reaches `index`, a read tagged `context` is linearizable. */
export interface ReadState {
  index: number;
  context: Uint8Array;
}

/**
 * Work the core hands to its driver. The driver must, in this order:
 * 1. store `snapshotChunks`, then persist `snapshot` (if any), then `entries` (overwriting from entries[0].index),
 *    then `hardState` — synced;
 * 2. send `messages` (only after step 1 is durable);
 * 3. apply `committed` entries to the state machine (a snapshot first, if any);
 * 4. call `advance(ready)`.
 */
export interface Ready {
  softState: SoftState | null;
  hardState: HardState | null;
  entries: Entry[];
  /**
   * Chunks of a snapshot being received, in order, to be stored durably in step 1 before anything else: a chunk
   * at offset 0 starts a new snapshot (a partial one is discarded). Acknowledgements of them are in `messages`.
   */
  snapshotChunks: SnapshotChunk[];
  /** A received snapshot to install: every byte of it arrived in `snapshotChunks` of this or earlier Readies. */
  snapshot: SnapshotInfo | null;
  committed: Entry[];
  messages: Message[];
  readStates: ReadState[];
}

/** Read-only view of durable log storage the core consults (the LevelDB log implements it, as does the in-memory one). */
export interface LogView {
  initialState(): { hardState: HardState; conf: ConfState };
  /** Index of the first entry still held (after compaction: snapshot index + 1). */
  firstIndex(): number;
  lastIndex(): number;
  /** Term of entry `index`; for firstIndex()-1 returns the snapshot term. Throws CompactedError / UnavailableError otherwise. */
  term(index: number): number;
  /** Entries in [lo, hi), at most maxBytes (at least one entry if any exists). */
  entries(lo: number, hi: number, maxBytes: number): Entry[];
  /** The latest snapshot's metadata and size (its bytes are read by the driver, never by the core). */
  snapshot(): SnapshotInfo | null;
}

export class CompactedError extends Error {
  constructor(index: number) {
    super(`raft: requested index ${index} is compacted`);
    this.name = 'CompactedError';
  }
}

export class UnavailableError extends Error {
  constructor(index: number) {
    super(`raft: requested index ${index} is unavailable`);
    this.name = 'UnavailableError';
  }
}

/** Deterministic randomness injected into the core (seeded in tests and the simulator). */
export interface Random {
  /** Integer in [0, n). */
  int(n: number): number;
}

/** Options of the pure core. Time is measured in ticks; the driver decides how long a tick is. */
export interface CoreOptions {
  id: NodeId;
  storage: LogView;
  random: Random;
  electionTicks: number;
  heartbeatTicks: number;
  preVote: boolean;
  checkQuorum: boolean;
  /** Max bytes of entries in one append message. */
  maxMsgBytes: number;
  /** Max append messages in flight to one follower (pipelining window). */
  maxInflightMsgs: number;
  /** Max bytes of proposed-but-uncommitted entries on the leader; further proposals are dropped (ProposalDroppedError). */
  maxUncommittedBytes: number;
  /** Max bytes per snapshot chunk streamed to a follower. */
  snapshotChunkBytes: number;
  /** Max snapshot chunks in flight to one follower (each up to snapshotChunkBytes). Default maxInflightMsgs. */
  maxInflightSnapshotChunks?: number;
  /** Index already applied by the state machine at start (committed entries up to it are not handed out again). */
  applied: number;
  /** Max bytes of committed entries handed out in one Ready (at least one entry is always handed out). Default 16 MiB. */
  maxCommittedBytesPerReady?: number;
  /** Max read-index requests queued on a leader (waiting for a heartbeat round or a current-term commit). Default 4096. */
  maxPendingReadIndex?: number;
}

/** Per-entry overhead counted on top of the payload when sizing appends and Ready batches. */
export const ENTRY_OVERHEAD_BYTES = 16;

/** The size an entry counts for in `maxMsgBytes` / `LogView.entries(maxBytes)` limits. */
export function entrySizeBytes(e: Entry): number {
  return e.data.byteLength + ENTRY_OVERHEAD_BYTES;
}

export class ProposalDroppedError extends Error {
  /** The leader this node knows of (null if none), so the application can forward the request itself. */
  readonly leader: NodeId | null;
  constructor(reason: string, leader: NodeId | null = null) {
    super(`raft: proposal dropped: ${reason}`);
    this.name = 'ProposalDroppedError';
    this.leader = leader;
  }
}
