/**
 * A DurableLog held only in memory, for tests and the in-process cluster. It follows exactly the LevelLog's
 * write rules (serialized mutations, overwrite-from-first-entry, snapshot resets the log), so driver tests
 * exercise the same protocol. `crash()` returns a copy holding only what had been persisted, to emulate a restart.
 */

import { joinChunks } from '../node/snapshot-stream.js';
import { MemorySink, SnapshotReceipt } from '../snapshot-receipt.js';
import type { ConfState, HardState, SnapshotChunk, SnapshotInfo, SnapshotMeta } from '../types.js';
import { CachedLog } from './cached-log.js';
import {
  type AppliedConf,
  cloneConf,
  type DurableLog,
  type PersistBatch,
  snapshotAddresses,
  supersedes,
} from './durable-log.js';
import { LogStateError, SnapshotSupersededError } from './errors.js';

export class MemoryDurableLog extends CachedLog implements DurableLog {
  /** The hard state as of the last synced write (what survives a crash). */
  private syncedHs: HardState = { term: 0, vote: null, commit: 0 };
  private tail: Promise<void> = Promise.resolve();
  private closed = false;
  /** The recorded snapshot's bytes (this log is for tests: it keeps them in memory). */
  private snapData: Uint8Array = new Uint8Array(0);
  /** A snapshot being received, recorded by persist({ snapshot }). */
  private readonly incoming = new SnapshotReceipt<MemorySink>((reason) => new LogStateError(reason));
  /** Size of the pieces snapshotChunks() hands out. */
  static readonly READ_CHUNK_BYTES = 1 << 20;

  /** Optional artificial latency of each durable write, to emulate fsync in tests. */
  constructor(private readonly writeDelay_ms = 0) {
    super();
  }

  persist(batch: PersistBatch): Promise<void> {
    return this.serialize(() => {
      const { snapshot } = batch;
      if (snapshot !== null) {
        const snapIndex = this.snap?.meta.index ?? 0;
        if (snapshot.meta.index <= snapIndex) {
          throw new LogStateError(`snapshot at ${snapshot.meta.index} is not newer than ${snapIndex}`);
        }
        this.snapData = this.incoming.take(snapshot).bytes();
        this.cache.restart(snapshot.meta.index, snapshot.meta.term);
        this.snap = { meta: snapshot.meta, size_bytes: snapshot.size_bytes };
        if (snapshot.meta.index >= this.conf.index) {
          this.conf = {
            index: snapshot.meta.index,
            conf: cloneConf(snapshot.meta.conf),
            addresses: snapshotAddresses(snapshot.meta, this.conf.addresses),
          };
        }
      }
      const first = batch.entries[0]?.index;
      if (snapshot === null && first !== undefined && this.snap !== null && first <= this.snap.meta.index) {
        // Same rule as the LevelDB log: entries a snapshot covers were committed and are never rewritten.
        throw new LogStateError(
          `appending at ${first} would rewrite entries covered by snapshot ${this.snap.meta.index}`,
        );
      }
      if (batch.entries.length > 0) this.cache.append(batch.entries);
      const hs = batch.hardState ?? this.hs;
      if (hs.commit > this.cache.lastIndex()) {
        throw new LogStateError(`hard state commit ${hs.commit} beyond last index ${this.cache.lastIndex()}`);
      }
      // Same rule as the LevelDB log: a commit-only change is not synced; any synced write syncs it too.
      const sync =
        snapshot !== null || batch.entries.length > 0 || hs.term !== this.hs.term || hs.vote !== this.hs.vote;
      this.hs = { ...hs };
      if (sync) this.syncedHs = { ...hs };
      this.fresh = false;
    });
  }
  compact(index: number): Promise<void> {
    return this.serialize(() => {
      const snapIndex = this.snap?.meta.index ?? 0;
      if (index > snapIndex) throw new LogStateError(`cannot compact to ${index}: snapshot covers only ${snapIndex}`);
      this.cache.compact(index);
    });
  }
  async createSnapshot(
    index: number,
    conf: ConfState,
    data: Uint8Array | AsyncIterable<Uint8Array> | null,
  ): Promise<SnapshotInfo> {
    const bytes = data === null ? new Uint8Array(0) : data instanceof Uint8Array ? data : await joinChunks(data);
    return this.serialize(() => {
      if (!supersedes(index, data !== null, this.snap))
        throw new SnapshotSupersededError(index, this.snap?.meta.index ?? 0);
      if (index > this.cache.lastIndex()) throw new LogStateError(`snapshot at ${index} beyond last index`);
      const meta = { index, term: this.cache.term(index), conf: cloneConf(conf) };
      const snap: SnapshotInfo =
        data === null ? { meta, size_bytes: 0, deferred: true } : { meta, size_bytes: bytes.byteLength };
      this.snap = snap;
      this.snapData = bytes;
      this.syncedHs = { ...this.hs }; // a synced write makes every earlier write durable
      return snap;
    });
  }
  receiveSnapshot(chunks: readonly SnapshotChunk[]): Promise<void> {
    return this.serialize(() => {
      for (const c of chunks) this.incoming.accept(c, () => new MemorySink()).sink.write(c.data);
    });
  }
  async readSnapshot(meta: SnapshotMeta, offset_bytes: number, max_bytes: number): Promise<Uint8Array | null> {
    const s = this.snap;
    if (s === null || s.meta.index !== meta.index || s.meta.term !== meta.term) return null;
    if (s.deferred === true || offset_bytes > this.snapData.byteLength) return null;
    return this.snapData.subarray(offset_bytes, Math.min(this.snapData.byteLength, offset_bytes + max_bytes));
  }
  async *snapshotChunks(): AsyncGenerator<Uint8Array> {
    if (this.snap === null) throw new LogStateError('the log holds no snapshot');
    if (this.snap.deferred === true)
      throw new LogStateError(`snapshot ${this.snap.meta.index} is deferred: it has no bytes`);
    const data = this.snapData;
    const step = MemoryDurableLog.READ_CHUNK_BYTES;
    for (let off = 0; off < data.byteLength; off += step) yield data.subarray(off, off + step);
  }
  setConf(applied: AppliedConf): Promise<void> {
    return this.serialize(() => {
      if (applied.index < this.conf.index)
        throw new LogStateError(`conf at ${applied.index} is older than ${this.conf.index}`);
      this.conf = { index: applied.index, conf: cloneConf(applied.conf), addresses: { ...applied.addresses } };
      this.syncedHs = { ...this.hs };
      this.fresh = false;
    });
  }
  async close(): Promise<void> {
    this.closed = true;
    await this.tail;
  }

  /** A new log holding exactly the durable state of this one (what a restarted process would read). */
  crashCopy(): MemoryDurableLog {
    const copy = new MemoryDurableLog(this.writeDelay_ms);
    const last = this.cache.lastIndex();
    const first = this.cache.firstIndex();
    copy.cache.reset(
      this.cache.markerIndex(),
      this.cache.markerTerm(),
      last >= first ? this.cache.entries(first, last + 1, Infinity) : [],
    );
    copy.hs = { ...this.syncedHs };
    copy.syncedHs = { ...this.syncedHs };
    copy.conf = this.appliedConf();
    copy.snap = this.snap;
    copy.snapData = this.snapData;
    copy.fresh = this.fresh;
    return copy;
  }

  private serialize<T>(fn: () => T): Promise<T> {
    if (this.closed) return Promise.reject(new LogStateError('log is closed'));
    const delay = this.writeDelay_ms;
    const result = this.tail.then(async () => {
      if (delay > 0) await new Promise((r) => setTimeout(r, delay));
      return fn();
    });
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}
