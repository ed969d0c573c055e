import type { Entry, Snapshot } from '../types.js';

/**
 * The application's replicated state machine, driven by RaftNode.
 *
 * - apply(entries): committed entries in log order, every index exactly once since the applied index given at
 *   start (entries of type 'noop' and 'conf' are included so the application can track its applied index;
 *   membership is already handled by the node). Must be deterministic.
 * - snapshot(): capture the state as of the last applied entry (never called while apply is running) and
 *   return it with that index. Used for log compaction and to catch up lagging or new members.
 * - restore(snap): replace the whole state with a snapshot's data (applied index becomes snap.meta.index).
 */
export interface StateMachine {
  apply(entries: Entry[]): Promise<void> | void;
  snapshot(): Promise<{ index: number; data: Uint8Array }>;
  restore(snap: Snapshot): Promise<void>;
}
