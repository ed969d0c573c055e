import type { Entry, Snapshot, SnapshotMeta } from '../types.js';

/** A snapshot produced as a stream: the state as of `index`, in chunks read one after another. */
export interface SnapshotChunks {
  index: number;
  /**
   * Total size of the chunks, when known before reading them: the node then assembles them into one buffer of
   * exactly this size (no second copy while reading). A stream that yields a different total is rejected.
   */
  size_bytes?: number;
  chunks: AsyncIterable<Uint8Array>;
}

/**
 * The application's replicated state machine, driven by RaftNode.
 *
 * - apply(entries): committed entries in log order, every index exactly once since the applied index given at
 *   start (entries of type 'noop' and 'conf' are included so the application can track its applied index;
 *   membership is already handled by the node). Must be deterministic.
 * - snapshot(): capture the state as of the last applied entry and return it with that index. Called between two
 *   applies, but the node takes snapshots in the background: apply may run again while the returned promise (or
 *   snapshotStream's chunks) is pending, so the state must be captured when the call is made (before its first
 *   await) and not read later. Used for log compaction and to catch up lagging or new members.
 * - restore(snap): replace the whole state with a snapshot's data (applied index becomes snap.meta.index).
 *
 * The streaming forms are optional and preferred when present: a store with millions of rows encodes them chunk
 * by chunk as it reads them (snapshotStream) and writes them batch by batch as they are handed over
 * (restoreStream), instead of holding every row and the whole encoding at once. `snapshot` and `restore` are
 * still required (the simplest machines implement only those).
 */
export interface StateMachine {
  apply(entries: Entry[]): Promise<void> | void;
  snapshot(): Promise<{ index: number; data: Uint8Array }>;
  restore(snap: Snapshot): Promise<void>;
  /** Streaming form of snapshot(): same contract, the data as a sequence of chunks (concatenated = the data). */
  snapshotStream?(): Promise<SnapshotChunks>;
  /**
   * Streaming form of restore(): replace the whole state with the snapshot whose data is the concatenation of
   * `chunks` (each at most the log's snapshot chunk size). Applied index becomes `meta.index`.
   */
  restoreStream?(meta: SnapshotMeta, chunks: AsyncIterable<Uint8Array>): Promise<void>;
  /**
   * Makes the state durable through the entries applied so far (at least those applied when called) and returns
   * an index it is durable at: the machine restarts from there at least. The node records the lower of that index
   * and its own applied index. Required by
   * RaftNodeOptions.snapshotDeferred: the node's periodic snapshots then record only that index (the machine's own
   * storage is the snapshot), and snapshot() is called only when a follower needs the bytes.
   */
  checkpoint?(): Promise<number>;
}
