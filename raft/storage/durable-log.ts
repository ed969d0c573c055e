import { type ConfState, type Entry, entrySizeBytes, type HardState, type LogView, type Snapshot } from '../types.js';

/** The durable parts of one Ready, written by the driver in one synced batch (group commit). */
export interface PersistBatch {
  snapshot: Snapshot | null;
  /** New entries; they overwrite the log from entries[0].index on. */
  entries: Entry[];
  hardState: HardState | null;
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
  applySnapshot(snap: Snapshot): Promise<void>;
  /** Discard entries up to and including `index` (which must be ≤ the snapshot index). */
  compact(index: number): Promise<void>;
  /** Record a snapshot of the state machine at `index` (≤ lastIndex); does not compact. */
  createSnapshot(index: number, conf: ConfState, data: Uint8Array): Promise<Snapshot>;
  /** Membership the driver applied at `index`; initialState() returns the latest. */
  setConf(applied: AppliedConf): Promise<void>;
  appliedConf(): AppliedConf;
  /** True when the log holds nothing yet (a brand-new node). */
  isEmpty(): boolean;
  close(): Promise<void>;
}

export function emptyConf(): ConfState {
  return { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
}

/** Bytes an entry is counted for in LogView.entries(maxBytes) (the core's own measure). */
export function entrySize_bytes(e: Entry): number {
  return entrySizeBytes(e);
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
