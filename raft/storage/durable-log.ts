import {
  type ConfState,
  type Entry,
  entrySizeBytes,
  type HardState,
  type LogView,
  type NodeId,
  type SnapshotChunk,
  type SnapshotInfo,
  type SnapshotMeta,
} from '../types.js';

/** The durable parts of one Ready, written by the driver in one synced batch (group commit). */
export interface PersistBatch {
  /** A received snapshot to record as the log's: every byte of it came through receiveSnapshot. */
  snapshot: SnapshotInfo | null;
  /** New entries; they overwrite the log from entries[0].index on. */
  entries: Entry[];
  hardState: HardState | null;
  /**
   * The caller has nothing to overlap this write with (a follower: its acknowledgement waits for the write, and
   * it sends nothing before). A log may then write on the calling thread, blocking it for the synced write,
   * instead of handing the write to a worker thread and being woken when it is done: one thread hand-off and one
   * wake-up less per batch. A hint only; a log may ignore it (the memory log, LevelDB's synced batches).
   */
  inline?: boolean;
}

/** Membership as applied by the driver, with the index of the entry (or snapshot) it reflects. */
export interface AppliedConf {
  index: number;
  conf: ConfState;
  /** Transport addresses of members, as carried by conf-change contexts (kept across snapshots). */
  addresses: Record<string, string>;
}

/**
 * A log the core reads synchronously (LogView) and the driver writes asynchronously.
 * Every mutating call resolves only once its data is durable (for the LevelDB log: an fsynced batch).
 * Mutations are applied in call order.
 */
export interface DurableLog extends LogView {
  /** Persist snapshot, then entries, then hard state, in one durable write. */
  persist(batch: PersistBatch): Promise<void>;
  append(entries: Entry[]): Promise<void>;
  setHardState(hs: HardState): Promise<void>;
  applySnapshot(snap: SnapshotInfo): Promise<void>;
  /** Discard entries up to and including `index` (which must be ≤ the snapshot index). */
  compact(index: number): Promise<void>;
  /**
   * Record a snapshot of the state machine at `index` (≤ lastIndex), its bytes written as `data` yields them
   * (never all in memory); a crash before it is recorded leaves the previous snapshot. Does not compact.
   * `data` null records a deferred snapshot (SnapshotInfo.deferred): its metadata only. A snapshot with bytes may
   * replace a deferred one at the same index; otherwise `index` must be above the recorded snapshot's.
   */
  createSnapshot(
    index: number,
    conf: ConfState,
    data: Uint8Array | AsyncIterable<Uint8Array> | null,
  ): Promise<SnapshotInfo>;
  /**
   * Durably store chunks of a snapshot being received, in order (Ready.snapshotChunks); offset 0 starts a new
   * one. persist({ snapshot }) then records it; until then the log's snapshot is unchanged.
   */
  receiveSnapshot(chunks: readonly SnapshotChunk[]): Promise<void>;
  /**
   * Bytes of the snapshot `meta` names from `offset_bytes` on, at most `max_bytes`; null when it is not the log's
   * any more, or is deferred.
   */
  readSnapshot(meta: SnapshotMeta, offset_bytes: number, max_bytes: number): Promise<Uint8Array | null>;
  /** The log's snapshot's bytes in bounded chunks, read one at a time (a deferred snapshot has none: throws). */
  snapshotChunks(): AsyncIterable<Uint8Array>;
  /** Membership the driver applied at `index`; initialState() returns the latest. */
  setConf(applied: AppliedConf): Promise<void>;
  appliedConf(): AppliedConf;
  /** True when the log holds nothing yet (a brand-new node). */
  isEmpty(): boolean;
  close(): Promise<void>;
}

/**
 * Whether a snapshot at `index` may be recorded over `current` (the log's snapshot, or null): above it, or at the
 * same index with bytes over a deferred one.
 */
export function supersedes(index: number, withData: boolean, current: SnapshotInfo | null): boolean {
  const at = current?.meta.index ?? 0;
  return index > at || (index === at && withData && current?.deferred === true);
}

export function emptyConf(): ConfState {
  return { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
}

/** Bytes an entry is counted for in LogView.entries(maxBytes) (the core's own measure). */
export function entrySize_bytes(e: Entry): number {
  return entrySizeBytes(e);
}

/** Every member of configuration `conf`: voters (incoming and outgoing) and learners (now and once joint is left). */
export function confMembers(conf: ConfState): Set<NodeId> {
  return new Set([...conf.voters, ...conf.votersOutgoing, ...conf.learners, ...conf.learnersNext]);
}

/**
 * The addresses to record with a received snapshot's configuration: for each of its members, the address the
 * snapshot carries (SnapshotMeta.addresses), else the one this log knew; nothing for a non-member.
 */
export function snapshotAddresses(meta: SnapshotMeta, known: Record<NodeId, string>): Record<NodeId, string> {
  const pairs: Array<[NodeId, string]> = [];
  for (const id of confMembers(meta.conf)) {
    const address = meta.addresses?.[id] ?? known[id];
    if (address !== undefined) pairs.push([id, address]);
  }
  return Object.fromEntries(pairs);
}

export function cloneConf(c: ConfState): ConfState {
  return {
    voters: [...c.voters],
    learners: [...c.learners],
    votersOutgoing: [...c.votersOutgoing],
    learnersNext: [...c.learnersNext],
    autoLeave: c.autoLeave,
  };
}

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

/** A ConfState as decoded from a stored record (anything else is corruption). */
/** A stored count or index: a non-negative safe integer. */
export function isNonNegInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

export function isConfState(v: unknown): v is ConfState {
  if (typeof v !== 'object' || v === null) return false;
  const c = v as Record<string, unknown>;
  return (
    isStringArray(c.voters) &&
    isStringArray(c.learners) &&
    isStringArray(c.votersOutgoing) &&
    isStringArray(c.learnersNext) &&
    typeof c.autoLeave === 'boolean'
  );
}
