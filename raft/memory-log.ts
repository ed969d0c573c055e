/**
 * In-memory durable log: a LogView plus the mutators a driver uses after persisting a Ready.
 * Used by tests and the simulator (where it models the *synced* state of a disk).
 *
 * Layout (like etcd's MemoryStorage): `ents[0]` is a dummy entry holding the index and term of the
 * last compacted entry (the snapshot point); real entries follow it contiguously.
 */
import { bootstrapEntries } from './core/bootstrap.js';
import { MemorySink, SnapshotReceipt } from './snapshot-receipt.js';
import { supersedes } from './storage/durable-log.js';
import {
  CompactedError,
  type ConfState,
  type Entry,
  entrySizeBytes,
  type HardState,
  type LogView,
  type Message,
  type NodeId,
  type Snapshot,
  type SnapshotChunk,
  type SnapshotInfo,
  type SnapshotMeta,
  UnavailableError,
} from './types.js';

export interface MemoryLogOptions {
  /**
   * Test shortcut: membership reported by initialState() until a snapshot exists, as if a snapshot at
   * index 0 carried it. Nodes that join later cannot learn it; real clusters use bootstrap() instead.
   */
  conf?: ConfState;
  hardState?: HardState;
}

export function emptyConfState(): ConfState {
  return { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
}

export function copyConfState(cs: ConfState): ConfState {
  return {
    voters: [...cs.voters],
    learners: [...cs.learners],
    votersOutgoing: [...cs.votersOutgoing],
    learnersNext: [...cs.learnersNext],
    autoLeave: cs.autoLeave,
  };
}

export class MemoryLog implements LogView {
  private hardState: HardState;
  private snap: Snapshot | null = null;
  /** The snapshot is deferred (createSnapshot without bytes): its state is the application's own. */
  private snapDeferred = false;
  /** A snapshot being received (receiveSnapshot), adopted by applySnapshot once complete. */
  private readonly incoming = new SnapshotReceipt<MemorySink>((reason) => new Error(`memory-log: ${reason}`));
  private readonly bootConf: ConfState;
  /** Membership the driver recorded as applied (setConf), with the index of its conf entry. */
  private recordedConf: { index: number; conf: ConfState } | null = null;
  private ents: Entry[];

  constructor(opts: MemoryLogOptions = {}) {
    this.bootConf = copyConfState(opts.conf ?? emptyConfState());
    this.hardState = opts.hardState ? { ...opts.hardState } : { term: 0, vote: null, commit: 0 };
    this.ents = [dummy(0, 0)];
  }

  /**
   * The membership is the newer of the latest snapshot's and the one recorded with setConf(), or the
   * bootstrap configuration when there is neither.
   */
  initialState(): { hardState: HardState; conf: ConfState } {
    const rec = this.recordedConf;
    const snapIndex = this.snap ? this.snap.meta.index : 0;
    let conf = this.snap ? this.snap.meta.conf : this.bootConf;
    if (rec !== null && rec.index > snapIndex) conf = rec.conf;
    return { hardState: { ...this.hardState }, conf: copyConfState(conf) };
  }

  /** Index of the entry (or snapshot) whose membership initialState() reports; 0 for the bootstrap one. */
  confIndex(): number {
    return Math.max(this.recordedConf ? this.recordedConf.index : 0, this.snap ? this.snap.meta.index : 0);
  }

  /**
   * Records the membership a driver applied at conf entry `index` (like DurableLog.setConf): a restart then
   * starts the core with it, and the driver must not apply conf entries at or below confIndex() again.
   */
  setConf(index: number, conf: ConfState): void {
    const current = this.recordedConf ? this.recordedConf.index : 0;
    if (index < current) throw new Error(`memory-log: conf at ${index} is older than recorded conf at ${current}`);
    if (index > this.lastIndex()) throw new Error(`memory-log: conf at ${index} beyond last index ${this.lastIndex()}`);
    this.recordedConf = { index, conf: copyConfState(conf) };
  }

  firstIndex(): number {
    return this.offset() + 1;
  }

  lastIndex(): number {
    return this.offset() + this.ents.length - 1;
  }

  term(index: number): number {
    const offset = this.offset();
    if (index < offset) throw new CompactedError(index);
    if (index - offset >= this.ents.length) throw new UnavailableError(index);
    return (this.ents[index - offset] as Entry).term;
  }

  entries(lo: number, hi: number, maxBytes: number): Entry[] {
    const offset = this.offset();
    if (lo <= offset) throw new CompactedError(lo);
    if (hi > this.lastIndex() + 1) throw new UnavailableError(hi - 1);
    if (lo > hi) throw new Error(`memory-log: invalid range [${lo}, ${hi})`);
    const out: Entry[] = [];
    let size = 0;
    for (let i = lo; i < hi; i++) {
      const e = this.ents[i - offset] as Entry;
      size += entrySizeBytes(e);
      if (out.length > 0 && size > maxBytes) break;
      out.push(e);
    }
    return out;
  }

  snapshot(): SnapshotInfo | null {
    if (this.snap === null) return null;
    if (this.snapDeferred) return { meta: this.snap.meta, size_bytes: 0, deferred: true };
    return { meta: this.snap.meta, size_bytes: this.snap.data.byteLength };
  }

  /** The latest snapshot's bytes (tests and the simulator); null for none or a deferred one. */
  snapshotData(): Uint8Array | null {
    return this.snapDeferred ? null : (this.snap?.data ?? null);
  }

  /**
   * Bytes of the snapshot `meta` names from `offset_bytes` on, at most `max_bytes` of them; null when that is not
   * the latest snapshot any more (the driver then reports the stream failed).
   */
  readSnapshot(meta: SnapshotMeta, offset_bytes: number, max_bytes: number): Uint8Array | null {
    const snap = this.snap;
    if (snap === null || snap.meta.index !== meta.index || snap.meta.term !== meta.term) return null;
    if (this.snapDeferred || offset_bytes > snap.data.byteLength) return null;
    return snap.data.subarray(offset_bytes, Math.min(snap.data.byteLength, offset_bytes + max_bytes));
  }

  /** Stores received snapshot chunks (Ready.snapshotChunks) in order; offset 0 starts a new snapshot. */
  receiveSnapshot(chunks: readonly SnapshotChunk[]): void {
    for (const c of chunks) this.incoming.accept(c, () => new MemorySink()).sink.write(c.data);
  }

  /**
   * Writes the initial membership of a new cluster as committed conf entries (see core/bootstrap.ts).
   * The log must be empty.
   */
  bootstrap(voters: readonly NodeId[], learners: readonly NodeId[] = []): void {
    if (this.lastIndex() !== 0 || this.snap !== null) throw new Error('memory-log: bootstrap needs an empty log');
    const { entries, hardState } = bootstrapEntries(voters, learners);
    for (const e of entries) this.ents.push(e);
    this.hardState = hardState;
  }

  /** The persisted hard state (for drivers and tests). */
  getHardState(): HardState {
    return { ...this.hardState };
  }

  /** Appends entries, overwriting any existing suffix from entries[0].index on. */
  append(entries: Entry[]): void {
    if (entries.length === 0) return;
    const first = this.firstIndex();
    const head = entries[0] as Entry;
    const last = head.index + entries.length - 1;
    for (let i = 1; i < entries.length; i++) {
      if ((entries[i] as Entry).index !== head.index + i)
        throw new Error('memory-log: appended entries are not contiguous');
    }
    if (last < first) return; // everything is already compacted
    if (head.index <= this.hardState.commit) {
      throw new Error(
        `memory-log: append at ${head.index} would overwrite committed entries (commit ${this.hardState.commit})`,
      );
    }
    const toAppend = head.index < first ? entries.slice(first - head.index) : entries;
    const offset = (toAppend[0] as Entry).index - this.offset();
    if (offset > this.ents.length) {
      throw new Error(
        `memory-log: missing log entries [last ${this.lastIndex()}, append at ${(toAppend[0] as Entry).index}]`,
      );
    }
    if (offset < this.ents.length) this.ents.length = offset;
    for (const e of toAppend) this.ents.push(e);
  }

  setHardState(hs: HardState): void {
    if (hs.commit > this.lastIndex()) {
      throw new Error(`memory-log: commit ${hs.commit} beyond last index ${this.lastIndex()}`);
    }
    this.hardState = { ...hs };
  }

  /**
   * Replaces the whole log with a snapshot received from the leader: one whose bytes came through
   * receiveSnapshot (a SnapshotInfo from Ready.snapshot), or a whole one (tests).
   */
  applySnapshot(snap: SnapshotInfo | Snapshot): void {
    const current = this.snap ? this.snap.meta.index : 0;
    if (snap.meta.index <= current) {
      throw new Error(`memory-log: snapshot at ${snap.meta.index} is not newer than ${current}`);
    }
    const data = 'data' in snap ? snap.data : this.incoming.take(snap).bytes();
    this.snap = { meta: { ...snap.meta, conf: copyConfState(snap.meta.conf) }, data };
    this.snapDeferred = false;
    this.ents = [dummy(snap.meta.index, snap.meta.term)];
    if (this.hardState.commit < snap.meta.index) this.hardState = { ...this.hardState, commit: snap.meta.index };
  }

  /** Discards entries up to and including `index`. Only allowed up to the latest snapshot's index. */
  compact(index: number): void {
    const offset = this.offset();
    if (index <= offset) return;
    if (index > this.lastIndex()) throw new Error(`memory-log: compact ${index} beyond last index ${this.lastIndex()}`);
    const snapIndex = this.snap ? this.snap.meta.index : 0;
    if (index > snapIndex) throw new Error(`memory-log: compact ${index} beyond snapshot index ${snapIndex}`);
    const term = this.term(index);
    this.ents = [dummy(index, term), ...this.ents.slice(index - offset + 1)];
  }

  /**
   * Records a snapshot of the state machine at `index`, which the caller must have applied (hence committed).
   * Only `index <= lastIndex()` is checked: like the LevelDB log, the persisted commit index may lag what was
   * applied when commit-only changes are written lazily. `data` null records a deferred snapshot (its state is the
   * application's own); bytes may replace a deferred snapshot at the same index.
   */
  createSnapshot(index: number, conf: ConfState, data: Uint8Array | null): SnapshotInfo {
    if (!supersedes(index, data !== null, this.snapshot()))
      throw new Error(`memory-log: snapshot at ${index} does not supersede ${this.snap?.meta.index ?? 0}`);
    if (index > this.lastIndex()) {
      throw new Error(`memory-log: snapshot at ${index} beyond last index ${this.lastIndex()}`);
    }
    const snap: Snapshot = {
      meta: { index, term: this.term(index), conf: copyConfState(conf) },
      data: data ?? new Uint8Array(0),
    };
    this.snap = snap;
    this.snapDeferred = data === null;
    return this.snapshot()!;
  }

  private offset(): number {
    return (this.ents[0] as Entry).index;
  }
}

function dummy(index: number, term: number): Entry {
  return { index, term, type: 'noop', data: new Uint8Array(0) };
}

/**
 * A leader core's outgoing snapshot chunk (emitted without bytes) with its bytes read from `log`, up to
 * `chunk_bytes` (the core's snapshotChunkBytes); null when `log` no longer holds that snapshot. Other messages
 * are returned as they are.
 */
export function withChunkData(m: Message, log: MemoryLog, chunk_bytes: number): Message | null {
  const c = m.snapshot;
  if (m.type !== 'snapshot' || c === undefined) return m;
  const data = log.readSnapshot(c.meta, c.offset_bytes, chunk_bytes);
  return data === null ? null : { ...m, snapshot: { ...c, data } };
}
