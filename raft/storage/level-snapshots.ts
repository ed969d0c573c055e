/**
 * Snapshot bytes of the LevelDB log, in chunk records, never all in memory.
 *
 * A snapshot is written chunk record by chunk record (each at most `chunk_bytes`, every record but the last exactly
 * that size) under a generation of its own: the state machine's snapshot as it streams it (LevelLog.createSnapshot),
 * or a snapshot received from the leader as its chunks arrive (LevelLog.receiveSnapshot). Records are written in
 * synced batches of a few chunks; the snapshot becomes the log's snapshot only with the synced batch that writes
 * its metadata record (and deletes the previous generation's records). A crash before that leaves the previous
 * snapshot in place and the new generation's records as garbage, deleted on the next open. Reads (to stream the
 * snapshot to a follower, or to restore the state machine from it) fetch one record at a time.
 */

import { crc32 } from 'node:zlib';
import type { ConfState, SnapshotInfo, SnapshotMeta } from '../types.js';
import { CHUNK_RANGE, chunkKey, decodeChunkKey, decodeMeta, describeKey, encodeMeta } from './codec.js';
import { isConfState, isNonNegInt } from './durable-log.js';
import { LogCorruptError } from './errors.js';
import type { LogDb, LogDbOp } from './log-db.js';

/** Records written per synced batch while a snapshot streams in (bounds the memory held: this many chunks). */
export const RECORDS_PER_BATCH = 4;
/** Bound on the records of one snapshot (2^20 records: 1 TiB at 1 MiB each). */
export const MAX_SNAPSHOT_RECORDS = 1 << 20;
/** Bound on the generation counter (u32 keys). */
const MAX_GEN = 0xffff_ffff;

/** The metadata record (key snapshot-meta). `gen` and `chunk_bytes` are absent in logs written before generations. */
export interface SnapMetaRecord {
  index: number;
  term: number;
  conf: ConfState;
  size_bytes: number;
  chunks: number;
  crc: number;
  gen?: number;
  chunk_bytes?: number;
  /** A deferred snapshot (SnapshotInfo.deferred): no records. Absent otherwise. */
  deferred?: true;
}

/** The recorded snapshot: where its records are. */
export interface StoredSnapshot {
  info: SnapshotInfo;
  gen: number;
  chunks: number;
  /** Size of every record but the last. */
  chunk_bytes: number;
}

/**
 * A snapshot being written: bytes go in through write() in pieces of any size, come out as records of exactly
 * `chunk_bytes`, written in synced batches; finish() returns the ops for the last records, to go in the batch that
 * records the snapshot.
 */
export class SnapshotWriter {
  size_bytes = 0;
  records = 0;
  private crc = 0;
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  private ops: LogDbOp[] = [];

  constructor(
    private readonly db: LogDb,
    readonly gen: number,
    readonly chunk_bytes: number,
  ) {}

  /** Appends `bytes`; writes full records once RECORDS_PER_BATCH of them are ready (one synced batch). */
  async write(bytes: Uint8Array): Promise<void> {
    this.crc = crc32(bytes, this.crc);
    this.size_bytes += bytes.byteLength;
    let rest = bytes;
    while (rest.byteLength > 0) {
      const take = Math.min(rest.byteLength, this.chunk_bytes - this.pendingBytes);
      this.pending.push(rest.subarray(0, take));
      this.pendingBytes += take;
      rest = rest.subarray(take);
      if (this.pendingBytes === this.chunk_bytes) this.cutRecord();
    }
    if (this.ops.length >= RECORDS_PER_BATCH) await this.flush();
  }

  /** Writes the full records not written yet (one synced batch); a partial last record stays pending. */
  async flush(): Promise<void> {
    if (this.ops.length === 0) return;
    const ops = this.ops;
    this.ops = [];
    await this.db.batch(ops, { sync: true });
  }

  /** The ops writing what is not written yet (at least one record: an empty snapshot has one empty record). */
  finish(): { ops: LogDbOp[]; crc: number } {
    if (this.pendingBytes > 0 || this.records === 0) this.cutRecord();
    const ops = this.ops;
    this.ops = [];
    return { ops, crc: this.crc };
  }

  /** Ops deleting every record this writer wrote (or would have): an abandoned snapshot's garbage. */
  discardOps(): LogDbOp[] {
    return chunkDeletes(this.gen, this.records);
  }

  private cutRecord(): void {
    if (this.records >= MAX_SNAPSHOT_RECORDS) {
      throw new RangeError(`raft log: a snapshot of more than ${MAX_SNAPSHOT_RECORDS} records`);
    }
    const body = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.pendingBytes);
    // encodeMeta copies the body into the record: the pieces may be views of the caller's buffers.
    this.ops.push({ type: 'put', key: chunkKey(this.gen, this.records), value: encodeMeta(body) });
    this.records++;
    this.pending = [];
    this.pendingBytes = 0;
  }
}

/** The metadata record of a snapshot `w` wrote. */
export function metaRecord(meta: SnapshotMeta, w: SnapshotWriter, crc: number): SnapMetaRecord {
  return {
    index: meta.index,
    term: meta.term,
    conf: meta.conf,
    size_bytes: w.size_bytes,
    chunks: w.records,
    crc,
    gen: w.gen,
    chunk_bytes: w.chunk_bytes,
  };
}

/** The metadata record of a deferred snapshot: no records, under generation `gen` (which holds none). */
export function deferredRecord(meta: SnapshotMeta, gen: number, chunk_bytes: number): SnapMetaRecord {
  return { ...meta, size_bytes: 0, chunks: 0, crc: 0, gen, chunk_bytes, deferred: true };
}

export function storedOf(rec: SnapMetaRecord, chunk_bytes: number): StoredSnapshot {
  const meta = { index: rec.index, term: rec.term, conf: rec.conf };
  return {
    info: rec.deferred === true ? { meta, size_bytes: 0, deferred: true } : { meta, size_bytes: rec.size_bytes },
    gen: rec.gen ?? 0,
    chunks: rec.chunks,
    chunk_bytes: rec.chunk_bytes ?? chunk_bytes,
  };
}

/** Ops deleting the records of `s`. */
export function deleteOps(s: StoredSnapshot | null): LogDbOp[] {
  return s === null ? [] : chunkDeletes(s.gen, s.chunks);
}

/** Ops deleting records 0 to `records` - 1 of generation `gen`. */
function chunkDeletes(gen: number, records: number): LogDbOp[] {
  const ops: LogDbOp[] = [];
  for (let c = 0; c < records; c++) ops.push({ type: 'del', key: chunkKey(gen, c) });
  return ops;
}

/** Reads record `chunk` of `s`; null when it is gone (the snapshot was replaced meanwhile). */
export async function readRecord(db: LogDb, s: StoredSnapshot, chunk: number): Promise<Uint8Array | null> {
  const key = chunkKey(s.gen, chunk);
  const [v] = await db.getMany([key]);
  if (v === undefined) return null;
  const body = decodeMeta(v, describeKey(key));
  if (!(body instanceof Uint8Array)) throw new LogCorruptError(describeKey(key), null, 'malformed snapshot chunk');
  return body;
}

/**
 * Verifies the recorded snapshot's records (every one present, in order, sizes and the whole-data CRC; read one
 * at a time) and deletes every other generation's records (garbage of snapshots never recorded) in one synced
 * batch. Returns the recorded snapshot and the next free generation.
 */
export async function recoverSnapshots(
  db: LogDb,
  metaV: Buffer | undefined,
  chunk_bytes: number,
): Promise<{ stored: StoredSnapshot | null; nextGen: number }> {
  let stored: StoredSnapshot | null = null;
  let expectedCrc = 0;
  if (metaV !== undefined) {
    const m = decodeMeta(metaV, 'snapshot-meta') as Partial<SnapMetaRecord>;
    const ok =
      isNonNegInt(m.index) &&
      isNonNegInt(m.term) &&
      isConfState(m.conf) &&
      isNonNegInt(m.size_bytes) &&
      isNonNegInt(m.chunks) &&
      isNonNegInt(m.crc) &&
      (m.gen === undefined || (isNonNegInt(m.gen) && m.gen <= MAX_GEN)) &&
      (m.chunk_bytes === undefined || (isNonNegInt(m.chunk_bytes) && m.chunk_bytes >= 1)) &&
      (m.deferred === undefined || (m.deferred === true && m.chunks === 0 && m.size_bytes === 0));
    if (!ok) throw new LogCorruptError('snapshot-meta', null, 'malformed snapshot metadata');
    stored = storedOf(m as SnapMetaRecord, chunk_bytes);
    expectedCrc = m.crc as number;
    if (m.chunk_bytes === undefined && stored.chunks > 1) {
      // Written before generations, with the chunk size of that time: every record but the last has it.
      const first = await readRecord(db, stored, 0);
      if (first !== null && first.byteLength > 0) stored = { ...stored, chunk_bytes: first.byteLength };
    }
  }
  const keys = await db.keys(CHUNK_RANGE).all();
  const garbage: LogDbOp[] = [];
  const mine: number[] = [];
  let maxGen = stored?.gen ?? 0;
  for (const key of keys) {
    const k = decodeChunkKey(key);
    if (k === null) throw new LogCorruptError(describeKey(key), null, 'malformed snapshot chunk key');
    maxGen = Math.max(maxGen, k.gen);
    if (stored !== null && k.gen === stored.gen) mine.push(k.chunk);
    else if (k.gen === 0) throw new LogCorruptError(describeKey(key), null, 'snapshot chunk without snapshot metadata');
    else garbage.push({ type: 'del', key });
  }
  if (stored !== null) await verify(db, stored, mine, expectedCrc);
  if (garbage.length > 0) await db.batch(garbage, { sync: true });
  if (maxGen >= MAX_GEN) throw new LogCorruptError('snapshot-meta', null, 'snapshot generations exhausted');
  return { stored, nextGen: maxGen + 1 };
}

async function verify(db: LogDb, s: StoredSnapshot, present: number[], expectedCrc: number): Promise<void> {
  for (let i = 0; i < present.length; i++) {
    if (present[i] !== i) {
      throw new LogCorruptError(`snapshot-chunk/${i}`, null, `expected snapshot-chunk/${i}`);
    }
  }
  if (present.length > s.chunks) {
    throw new LogCorruptError(describeKey(chunkKey(s.gen, s.chunks)), null, `snapshot has only ${s.chunks} chunks`);
  }
  let offset = 0;
  let crc = 0;
  for (let c = 0; c < present.length; c++) {
    const body = await readRecord(db, s, c);
    const name = describeKey(chunkKey(s.gen, c));
    const last = c === s.chunks - 1;
    if (body === null || offset + body.byteLength > s.info.size_bytes || (!last && body.byteLength !== s.chunk_bytes)) {
      throw new LogCorruptError(name, null, 'malformed snapshot chunk');
    }
    crc = crc32(body, crc);
    offset += body.byteLength;
  }
  if (present.length !== s.chunks || offset !== s.info.size_bytes) {
    throw new LogCorruptError(
      `snapshot-chunk/${present.length}`,
      null,
      `snapshot truncated: ${offset} of ${s.info.size_bytes} bytes`,
    );
  }
  if (crc !== expectedCrc)
    throw new LogCorruptError('snapshot-meta', s.info.meta.index, 'snapshot data checksum mismatch');
}

/**
 * Bytes of stored snapshot `s` from `offset_bytes` on, at most `max_bytes`; null when a record is gone (`s` was
 * replaced meanwhile). Reads only the records the range covers.
 */
export async function readRange(
  db: LogDb,
  s: StoredSnapshot,
  offset_bytes: number,
  max_bytes: number,
): Promise<Uint8Array | null> {
  const end = Math.min(s.info.size_bytes, offset_bytes + max_bytes);
  if (offset_bytes > s.info.size_bytes) return null;
  if (end === offset_bytes) return new Uint8Array(0);
  const parts: Uint8Array[] = [];
  for (let c = Math.floor(offset_bytes / s.chunk_bytes); c * s.chunk_bytes < end; c++) {
    const body = await readRecord(db, s, c);
    if (body === null) return null;
    const from = Math.max(0, offset_bytes - c * s.chunk_bytes);
    const to = Math.min(body.byteLength, end - c * s.chunk_bytes);
    parts.push(body.subarray(from, to));
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}
