/**
 * Durable Raft log on LevelDB (classic-level).
 *
 * The non-compacted log lives in memory (LogCache) so the core can read it synchronously; every mutation is
 * written through to LevelDB first, as one atomic batch, fsynced (`{ sync: true }`) before the returned promise
 * resolves. The driver hands a whole Ready (many entries + hard state) to persist(): one fsync per Ready.
 * Only a change of nothing but the commit index is kept in memory until the next write (see doPersist); every
 * write that reaches LevelDB is synced: LevelDB does not order an unsynced batch before a later synced one
 * across a power loss (it switches log files without fsync), so "the next synced batch makes it durable" is
 * false.
 *
 * With a write-ahead file (LevelLogOptions.wal, wal.ts) the hot path is different: a persist of new entries and
 * hard state (no snapshot) is one O_DSYNC record in that file, not a LevelDB batch. The file has two halves; each
 * generation of records (one random salt) fills one half from its start, and the state record names the
 * generations to replay over LevelDB's entries (at most two, oldest first). A full half starts a generation in
 * the other (startGen), dropping the one that was there: the entries only its records held go into LevelDB in the
 * same synced batch that names the new generation (usually none: compaction has passed them). LevelDB's segments
 * hold the log up to ldbLast and agree with memory there; a record is only written for entries past it (older
 * records may hold entries at or below it, after a fold: replay rebuilds the same log over them). A write the file
 * cannot take (an overwrite of what LevelDB holds, a snapshot, a record larger than half the file) goes to LevelDB
 * with every entry only the records held, and names a single new generation.
 *
 * Keys: format, state (hard state + log bounds), conf (applied membership), snapshot-meta, snapshot-chunk/GEN/N
 * (level-snapshots.ts: a snapshot's bytes, written and read chunk by chunk, never held whole in memory),
 * entry/INDEX. Each value carries a CRC32; open() verifies every record and the log's continuity and throws
 * LogCorruptError naming the key on any mismatch.
 */
import { SnapshotReceipt } from '../snapshot-receipt.js';
import type { ConfState, Entry, HardState, SnapshotChunk, SnapshotInfo, SnapshotMeta } from '../types.js';
import { CachedLog } from './cached-log.js';
import {
  decodeMeta,
  decodeSegment,
  decodeSegmentKey,
  describeKey,
  ENTRY_RANGE,
  encodeMeta,
  encodeSegment,
  KEY_CONF,
  KEY_FORMAT,
  KEY_SNAP_META,
  KEY_STATE,
  SEGMENT_HEADER_BYTES,
  segmentEntry_bytes,
  segmentKey,
} from './codec.js';
import {
  type AppliedConf,
  cloneConf,
  type DurableLog,
  isConfState,
  isNonNegInt,
  type PersistBatch,
  snapshotAddresses,
  supersedes,
} from './durable-log.js';
import { LogCorruptError, LogStateError, SnapshotSupersededError } from './errors.js';
import {
  deferredRecord,
  deleteOps,
  metaRecord,
  readRange,
  readRecord,
  recoverSnapshots,
  type SnapMetaRecord,
  SnapshotWriter,
  type StoredSnapshot,
  storedOf,
} from './level-snapshots.js';
import { type LogDb, type LogDbOp, levelLogDb } from './log-db.js';
import {
  encodeWalRecord,
  MAX_VOTE_BYTES,
  newWalSalt,
  openWalFile,
  recordSize_bytes,
  scanWal,
  type WalFile,
  type WalRecord,
} from './wal.js';

export interface LevelLogOptions {
  /** Size of one stored snapshot chunk (LevelDB values stay bounded). Default 1 MiB. */
  snapshotChunk_bytes?: number;
  /** Snappy compression of LevelDB blocks. Default true. */
  compression?: boolean;
  /** Max entries recovered into memory on open; a larger log is reported rather than loaded. Default 10 million. */
  maxEntries?: number;
  /** Entries persisted together are stored in segments of at most this size (one LevelDB value). Default 1 MiB. */
  maxSegment_bytes?: number;
  /**
   * The write-ahead file (wal.ts). With it, persist() writes new entries and hard state as one O_DSYNC record in
   * that file instead of a synced LevelDB batch (see the module comment). `size_bytes`: the file's size when it is
   * created (default 64 MiB; an existing file keeps its size). `file`, tests only: a file to use instead of
   * `${path}.wal`. Without this option every write goes to LevelDB; a log that was written with a write-ahead file
   * is then folded back into LevelDB on open.
   */
  wal?: { size_bytes?: number; file?: WalFile };
  /**
   * Tests only: a database handle to use instead of opening a ClassicLevel at `path` (e.g. the power-loss
   * simulator of power-loss-testkit.ts). `compression` is then ignored. Production code never sets it.
   */
  db?: LogDb;
}

/** Index range of one stored segment. */
interface Segment {
  first: number;
  last: number;
}

type Op = LogDbOp;

/** A segment whose key is at or below the compaction marker (see recoverEntries). */
interface StaleSegment {
  key: Buffer;
  first: number;
  entries: Entry[];
}

interface StateRecord {
  term: number;
  vote: string | null;
  commit: number;
  markerIndex: number;
  markerTerm: number;
  /** The last index LevelDB's segments hold (the marker when none); the write-ahead records may hold more. */
  lastIndex: number;
  /**
   * The generations of write-ahead records to replay over it, in order (at most two): each a salt (hex) and the
   * offset of the half of the file its records fill. Null or absent: none.
   */
  wal?: Array<{ salt: string; at: number }> | null;
}

/** One generation of write-ahead records: those written under one salt, from the start of one half of the file. */
interface WalGen {
  salt: Buffer;
  start_bytes: number;
  /** Records written (or replayed) under it. */
  records: number;
  /** The log's last index once its records were written (set when the next generation starts). */
  last: number;
}

const FORMAT_NAME = 'keel-raft-log';
/**
 * Format versions read. 2: the log may hold a deferred snapshot (no bytes; SnapshotInfo.deferred). A log is
 * written as 1 and moves to 2 with its first deferred snapshot, so a release that knows only 1 refuses it instead
 * of restoring an empty state from it or streaming one to a follower.
 */
const FORMAT_VERSIONS: readonly number[] = [1, 2, 3];
const FORMAT_VERSION_DEFERRED = 2;
/** Counts of what a log's write-ahead file did since the log was opened (LevelLog.walStats). */
export interface WalStats {
  /** Generations started because the current half was full (startGen). */
  switches: number;
  /** Times entries were folded into LevelDB when a generation's half was taken back (startGen). */
  folds: number;
  /** Writes too large for half the file, which went to LevelDB. */
  full: number;
  /** Records written on the calling thread (PersistBatch.inline). */
  inline: number;
}

/** 3: the state record may name write-ahead records (wal.ts) holding entries LevelDB lacks. */
const FORMAT_VERSION_WAL = 3;
const DEFAULT_WAL_BYTES = 64 * 1024 * 1024;
const ITERATOR_BATCH = 1024;
const DEFAULT_CHUNK_BYTES = 1 << 20;
const DEFAULT_MAX_ENTRIES = 10_000_000;
const DEFAULT_MAX_SEGMENT_BYTES = 1 << 20;

function isAddressMap(v: unknown): v is Record<string, string> {
  return (
    typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === 'string')
  );
}

export class LevelLog extends CachedLog implements DurableLog {
  /** Where the recorded snapshot's bytes are. */
  private stored: StoredSnapshot | null = null;
  /** A snapshot being received from the leader (receiveSnapshot), recorded by persist({ snapshot }). */
  private readonly incoming = new SnapshotReceipt<SnapshotWriter>((reason) => new LogStateError(reason));
  /** The next snapshot generation to write. */
  private nextGen = 1;
  /** The format version recorded (FORMAT_VERSIONS). */
  private formatVersion = 1;
  /** Stored segments in index order; together they hold exactly the cached entries. */
  private segs: Segment[] = [];
  /** Serializes mutations: each runs after the previous one's batch is durable. */
  private tail: Promise<void> = Promise.resolve();
  private failure: Error | null = null;
  /** The in-memory hard state has a newer commit index than the stored state record. */
  private stateDirty = false;
  private closed = false;
  /** The last index LevelDB's segments hold (the marker when none). marker ≤ ldbLast ≤ the cache's last index. */
  private ldbLast = 0;
  /** The write-ahead file, when the log uses one. */
  private walFile: WalFile | null = null;
  /** The generations the state record names, oldest first; the last one takes the records (see startGen). */
  private walGens: WalGen[] = [];
  /** Where the next record goes. */
  private wal_bytes = 0;
  /** What the write-ahead file did since this log was opened (walStats). */
  private readonly walCounts: WalStats = { switches: 0, folds: 0, full: 0, inline: 0 };

  private constructor(
    private readonly db: LogDb,
    readonly path: string,
    private readonly chunk_bytes: number,
    private readonly maxSegment_bytes: number,
  ) {
    super();
  }

  /** Opens (creating if needed) and verifies the log at `path`. Throws LogCorruptError on any inconsistency. */
  static async open(path: string, opts: LevelLogOptions = {}): Promise<LevelLog> {
    const chunk_bytes = opts.snapshotChunk_bytes ?? DEFAULT_CHUNK_BYTES;
    if (!(chunk_bytes >= 1024)) throw new RangeError('raft log: snapshotChunk_bytes must be ≥ 1024');
    const db: LogDb = opts.db ?? levelLogDb(path, { compression: opts.compression ?? true });
    await db.open();
    const maxSegment_bytes = opts.maxSegment_bytes ?? DEFAULT_MAX_SEGMENT_BYTES;
    if (!(maxSegment_bytes >= 64)) throw new RangeError('raft log: maxSegment_bytes must be ≥ 64');
    const log = new LevelLog(db, path, chunk_bytes, maxSegment_bytes);
    try {
      await log.recover(opts.maxEntries ?? DEFAULT_MAX_ENTRIES, opts.wal);
    } catch (err) {
      await log.walFile?.close().catch(() => undefined);
      await db.close();
      if ((err as { code?: string }).code === 'LEVEL_CORRUPTION') {
        throw new LogCorruptError('leveldb', null, (err as Error).message);
      }
      throw err;
    }
    return log;
  }

  // ---- recovery -------------------------------------------------------------------------------------------

  private async recover(maxEntries: number, walOpts: LevelLogOptions['wal']): Promise<void> {
    await this.recoverLevel(maxEntries, walOpts);
    if (walOpts === undefined) {
      if (this.walFile === null) return;
      // Opened without the option, a log that names records: they go into LevelDB, the log names none, and the
      // file is left alone (it may be deleted).
      await this.foldAll();
      await this.walFile.close();
      this.walFile = null;
      return;
    }
    // Every open starts a new generation in the half the last one did not write: no record goes after the tail of
    // one a crash cut short, and that tail (of an older salt) is never read as current again.
    this.walFile ??= walOpts.file ?? (await this.openWal(walOpts, true));
    await this.startGen();
  }

  private async recoverLevel(maxEntries: number, walOpts: LevelLogOptions['wal']): Promise<void> {
    const [formatV, stateV, confV, snapV] = await this.db.getMany([KEY_FORMAT, KEY_STATE, KEY_CONF, KEY_SNAP_META]);
    if (formatV === undefined) {
      const any = await this.db.keys({ limit: 1 }).all();
      if (any.length > 0)
        throw new LogCorruptError(describeKey(any[0]!), null, 'format record missing from a non-empty log');
      await this.db.batch(
        [
          { type: 'put', key: KEY_FORMAT, value: encodeMeta({ name: FORMAT_NAME, version: this.formatVersion }) },
          { type: 'put', key: KEY_STATE, value: this.stateValue(this.hs, 0, 0, 0, null) },
          { type: 'put', key: KEY_CONF, value: encodeMeta(this.conf) },
        ],
        { sync: true },
      );
      return;
    }
    const format = decodeMeta(formatV, 'format') as { name?: unknown; version?: unknown };
    if (
      format.name !== FORMAT_NAME ||
      typeof format.version !== 'number' ||
      !FORMAT_VERSIONS.includes(format.version)
    ) {
      throw new LogCorruptError('format', null, `unsupported format ${String(format.name)} v${String(format.version)}`);
    }
    this.formatVersion = format.version;
    if (stateV === undefined) throw new LogCorruptError('state', null, 'state record missing');
    if (confV === undefined) throw new LogCorruptError('conf', null, 'conf record missing');
    const state = this.parseState(decodeMeta(stateV, 'state'));
    const conf = decodeMeta(confV, 'conf') as Partial<AppliedConf>;
    if (!isNonNegInt(conf.index) || !isConfState(conf.conf) || !isAddressMap(conf.addresses)) {
      throw new LogCorruptError('conf', null, 'malformed conf record');
    }

    const snaps = await recoverSnapshots(this.db, snapV, this.chunk_bytes);
    this.stored = snaps.stored;
    this.snap = snaps.stored?.info ?? null;
    this.nextGen = snaps.nextGen;

    let ents = await this.recoverEntries(state, maxEntries);
    const ldbLast = state.markerIndex + ents.length;
    let hs: HardState = { term: state.term, vote: state.vote, commit: state.commit };
    let lastIndex = state.lastIndex;
    if (state.wal !== null && state.wal !== undefined && state.wal.length > 0) {
      // The log was written with a write-ahead file: the records of its generations come after LevelDB's entries.
      const file = walOpts?.file ?? (await this.openWal(walOpts, false));
      this.walFile = file;
      const half = halfOf(file);
      const replay = new WalReplay(state.markerIndex, ents, hs, maxEntries);
      for (const g of state.wal) {
        if (g.at !== 0 && g.at !== half)
          throw new LogCorruptError('wal', null, `no half of the file starts at ${g.at}`);
        const salt = Buffer.from(g.salt, 'hex');
        const { records } = await scanWal(file, salt, g.at, g.at + half);
        for (const r of records) replay.apply(r);
        this.walGens.push({ salt, start_bytes: g.at, records: records.length, last: replay.lastIndex() });
      }
      ({ ents, hs } = replay.finish(state.markerTerm));
      lastIndex = state.markerIndex + ents.length;
    }
    const snapIndex = this.snap?.meta.index ?? 0;
    if (state.markerIndex > snapIndex) {
      throw new LogCorruptError('state', null, `log compacted to ${state.markerIndex} beyond snapshot ${snapIndex}`);
    }
    if (this.snap !== null && this.snap.meta.index <= lastIndex && this.snap.meta.index >= state.markerIndex) {
      const t =
        this.snap.meta.index === state.markerIndex
          ? state.markerTerm
          : ents[this.snap.meta.index - state.markerIndex - 1]!.term;
      if (t !== this.snap.meta.term) {
        throw new LogCorruptError(
          'snapshot-meta',
          this.snap.meta.index,
          `snapshot term ${this.snap.meta.term} != log term ${t}`,
        );
      }
    }
    if (hs.commit > lastIndex) {
      throw new LogCorruptError('state', null, `commit ${hs.commit} beyond last index ${lastIndex}`);
    }
    const lastTerm = ents.length > 0 ? ents[ents.length - 1]!.term : state.markerTerm;
    if (lastTerm > hs.term)
      throw new LogCorruptError('state', null, `last entry term ${lastTerm} above current term ${hs.term}`);

    this.cache.reset(state.markerIndex, state.markerTerm, ents);
    this.hs = hs;
    this.ldbLast = ldbLast;
    this.conf = { index: conf.index, conf: conf.conf, addresses: conf.addresses as Record<string, string> };
    this.fresh = lastIndex === 0 && hs.term === 0 && this.snap === null && conf.conf.voters.length === 0;
  }

  private openWal(walOpts: LevelLogOptions['wal'], create: boolean): Promise<WalFile> {
    return openWalFile(`${this.path}.wal`, walOpts?.size_bytes ?? DEFAULT_WAL_BYTES, create);
  }

  private parseState(v: unknown): StateRecord {
    const s = v as Partial<StateRecord>;
    const ok =
      isNonNegInt(s.term) &&
      (s.vote === null || typeof s.vote === 'string') &&
      isNonNegInt(s.commit) &&
      isNonNegInt(s.markerIndex) &&
      isNonNegInt(s.markerTerm) &&
      isNonNegInt(s.lastIndex) &&
      s.lastIndex >= s.markerIndex &&
      (s.wal === undefined ||
        s.wal === null ||
        (Array.isArray(s.wal) &&
          s.wal.length <= 2 &&
          s.wal.every(
            (g: unknown) =>
              typeof g === 'object' &&
              g !== null &&
              typeof (g as { salt?: unknown }).salt === 'string' &&
              /^[0-9a-f]{16}$/.test((g as { salt: string }).salt) &&
              isNonNegInt((g as { at?: unknown }).at),
          )));
    if (!ok) throw new LogCorruptError('state', null, 'malformed state record');
    return s as StateRecord;
  }

  /**
   * Reads the segments back. A segment keyed at or below the compaction marker should not exist: compaction
   * deletes (or rewrites, for the one straddling the compaction point) every such segment in the same synced
   * batch that moves the marker. Logs written by earlier versions, whose compaction batch was not synced, can
   * hold some after a power loss (the compaction lost, a later synced batch with the new marker kept). They are
   * garbage except for entries above the marker not held by any later segment: those are taken from them (for
   * overlapping ones the segment with the higher key is the newer write) and rewritten, and the stale segments
   * deleted, in one synced batch before open() returns. Everything else is checked strictly.
   */
  private async recoverEntries(state: StateRecord, maxEntries: number): Promise<Entry[]> {
    const expectedCount = state.lastIndex - state.markerIndex;
    if (expectedCount > maxEntries) {
      throw new LogStateError(`log holds ${expectedCount} entries, more than maxEntries ${maxEntries}`);
    }
    const marker = state.markerIndex;
    const stale: StaleSegment[] = [];
    let staleCount = 0;
    const ents: Entry[] = [];
    const segs: Segment[] = [];
    let expected = -1; // next index a live segment must start at; set when the first live one is met
    let prevTerm = state.markerTerm;
    /** Entries (marker, end) taken from stale segments, once, before the first live segment. */
    const takeStale = (end: number): void => {
      const filled = this.fillFromStale(stale, marker, Math.min(end, state.lastIndex + 1));
      for (const { entry: e, key } of filled) {
        if (e.term < prevTerm)
          throw new LogCorruptError(describeKey(key), e.index, `term ${e.term} below previous term ${prevTerm}`);
        prevTerm = e.term;
        ents.push(e);
      }
      expected = marker + 1 + filled.length;
    };
    const it = this.db.iterator(ENTRY_RANGE);
    try {
      for (;;) {
        const batch = await it.nextv(ITERATOR_BATCH);
        if (batch.length === 0) break;
        for (const [key, value] of batch) {
          const first = decodeSegmentKey(key);
          const name = describeKey(key);
          if (first <= marker) {
            const seg = decodeSegment(value, first);
            staleCount += seg.length;
            if (staleCount > maxEntries) throw new LogStateError(`more than ${maxEntries} entries below the marker`);
            stale.push({ key, first, entries: seg });
            continue;
          }
          if (expected < 0) takeStale(first);
          if (first < expected) {
            throw new LogCorruptError(name, first, `entry below first index ${expected} (overlapping)`);
          }
          if (first > expected) {
            throw new LogCorruptError(`segment/${expected}`, expected, `entry missing (next stored entry is ${first})`);
          }
          if (first > state.lastIndex) {
            throw new LogCorruptError(name, first, `entry beyond recorded last index ${state.lastIndex}`);
          }
          const seg = decodeSegment(value, first);
          if (first + seg.length - 1 > state.lastIndex) {
            throw new LogCorruptError(name, state.lastIndex + 1, `entry beyond recorded last index ${state.lastIndex}`);
          }
          if (ents.length + seg.length > maxEntries)
            throw new LogStateError(`log holds more than maxEntries ${maxEntries}`);
          for (const e of seg) {
            if (e.term < prevTerm)
              throw new LogCorruptError(name, e.index, `term ${e.term} below previous term ${prevTerm}`);
            prevTerm = e.term;
            ents.push(e);
          }
          segs.push({ first, last: first + seg.length - 1 });
          expected = first + seg.length;
        }
      }
    } finally {
      await it.close();
    }
    if (expected < 0) takeStale(state.lastIndex + 1);
    if (expected !== state.lastIndex + 1) {
      throw new LogCorruptError(
        `segment/${expected}`,
        expected,
        `log truncated: recorded last index is ${state.lastIndex}`,
      );
    }
    if (stale.length > 0) {
      // Rewrite what was taken from stale segments under live keys, delete the stale ones: synced, so the next
      // open finds a log that satisfies the strict rules.
      const ops: Op[] = stale.map((st) => ({ type: 'del' as const, key: st.key }));
      const live = segs.length > 0 ? segs[0]!.first : state.lastIndex + 1;
      const taken = ents.slice(0, live - marker - 1);
      if (taken.length > 0) {
        const rewritten: Segment[] = [];
        this.segmentOps(taken, ops, rewritten);
        segs.unshift(...rewritten);
      }
      await this.db.batch(ops, { sync: true });
    }
    this.segs = segs;
    return ents;
  }

  /**
   * Entries marker+1, marker+2, … (below `end`) from stale segments, stopping at the first index none holds.
   * For an index held by several, the one with the highest key is the newest write.
   */
  private fillFromStale(stale: StaleSegment[], marker: number, end: number): Array<{ entry: Entry; key: Buffer }> {
    const out: Array<{ entry: Entry; key: Buffer }> = [];
    for (let i = marker + 1; i < end; i++) {
      let found: { entry: Entry; key: Buffer } | null = null;
      for (let s = stale.length - 1; s >= 0 && found === null; s--) {
        const st = stale[s]!; // in key order: the last holding i is the newest
        const e = st.entries[i - st.first];
        if (e !== undefined) found = { entry: e, key: st.key };
      }
      if (found === null) break;
      out.push(found);
    }
    return out;
  }

  // ---- LogView --------------------------------------------------------------------------------------------

  // ---- DurableLog -----------------------------------------------------------------------------------------

  /** Number of stored segments (for tests and metrics). */
  /** What the write-ahead file did since this log was opened (a copy). */
  walStats(): WalStats {
    return { ...this.walCounts };
  }

  segmentCount(): number {
    return this.segs.length;
  }

  persist(batch: PersistBatch): Promise<void> {
    return this.serialize(() => this.doPersist(batch));
  }

  compact(index: number): Promise<void> {
    return this.serialize(async () => {
      if (index <= this.cache.markerIndex()) return;
      const snapIndex = this.snap?.meta.index ?? 0;
      if (index > snapIndex) throw new LogStateError(`cannot compact to ${index}: snapshot covers only ${snapIndex}`);
      const term = this.cache.term(index);
      const ops: Op[] = [];
      const segs = [...this.segs];
      let drop = 0;
      while (drop < segs.length && segs[drop]!.last <= index)
        ops.push({ type: 'del', key: segmentKey(segs[drop++]!.first) });
      segs.splice(0, drop);
      const straddling = segs[0];
      if (straddling !== undefined && straddling.first <= index) {
        // Rewrite the segment that straddles the compaction point so no entry below the first index remains.
        ops.push({ type: 'del', key: segmentKey(straddling.first) });
        const rewritten: Segment[] = [];
        this.segmentOps(this.cache.entries(index + 1, straddling.last + 1, Infinity), ops, rewritten);
        segs.splice(0, 1, ...rewritten);
      }
      // LevelDB's own last index: the write-ahead records (left as they are) may hold entries past it, or past the
      // new marker when LevelDB held none beyond it; replay skips what they hold at or below the marker.
      const ldbLast = Math.max(this.ldbLast, index);
      ops.push({ type: 'put', key: KEY_STATE, value: this.stateValue(this.hs, index, term, ldbLast, this.walGens) });
      // Synced like every other write: LevelDB may lose an unsynced batch while keeping a later synced one, which
      // would leave segments below a newer marker (recoverEntries copes with logs written that way by earlier
      // versions, but a durable compaction is the contract).
      await this.db.batch(ops, { sync: true });
      this.stateDirty = false;
      this.cache.compact(index);
      this.segs = segs;
      this.ldbLast = ldbLast;
    });
  }

  /**
   * Records the state machine's snapshot at `index`, written chunk record by chunk record as `data` yields it
   * (synced batches of a few records, under a new generation), then recorded as the log's snapshot by one synced
   * batch that also deletes the previous one's records. A crash before that batch leaves the previous snapshot.
   * The records are written outside the queue of mutations: other writes (the driver's Readies) go on meanwhile,
   * touching no key of the new generation; only the first checks and the last batch are queued. Does not compact.
   */
  async createSnapshot(
    index: number,
    conf: ConfState,
    data: Uint8Array | AsyncIterable<Uint8Array> | null,
  ): Promise<SnapshotInfo> {
    const { meta, writer } = await this.serialize(async () => {
      this.checkNewSnapshot(index, data !== null);
      if (index > this.cache.lastIndex())
        throw new LogStateError(`snapshot at ${index} beyond last index ${this.cache.lastIndex()}`);
      // The term is taken now: compaction may drop the entry while the records are written.
      const meta: SnapshotMeta = { index, term: this.cache.term(index), conf: cloneConf(conf) };
      return { meta, writer: new SnapshotWriter(this.db, this.allocGen(), this.chunk_bytes) };
    });
    if (data !== null) {
      try {
        if (data instanceof Uint8Array) await writer.write(data);
        else for await (const part of data) await writer.write(part);
      } catch (err) {
        // The records written so far are garbage of a generation never recorded (open() deletes them too).
        await this.db.batch(writer.discardOps(), { sync: true }).catch(() => undefined);
        if ((err as { code?: string }).code?.startsWith('LEVEL_')) throw err;
        // The state machine's stream failed: the log itself is intact.
        throw new LogStateError(`snapshot stream at ${index} failed: ${(err as Error).message}`);
      }
    }
    return this.serialize(async () => {
      try {
        // A newer snapshot may have been received meanwhile.
        this.checkNewSnapshot(index, data !== null);
      } catch (err) {
        await this.db.batch(writer.discardOps(), { sync: true });
        throw err;
      }
      let ops: LogDbOp[] = [];
      let record: SnapMetaRecord;
      if (data === null) {
        record = deferredRecord(meta, writer.gen, this.chunk_bytes);
        if (this.formatVersion < FORMAT_VERSION_DEFERRED) {
          ops.push({
            type: 'put',
            key: KEY_FORMAT,
            value: encodeMeta({ name: FORMAT_NAME, version: FORMAT_VERSION_DEFERRED }),
          });
        }
      } else {
        const finished = writer.finish();
        ops = finished.ops;
        record = metaRecord(meta, writer, finished.crc);
      }
      ops.push(...deleteOps(this.stored));
      ops.push({ type: 'put', key: KEY_SNAP_META, value: encodeMeta(record) });
      await this.db.batch(ops, { sync: true });
      if (data === null) this.formatVersion = Math.max(this.formatVersion, FORMAT_VERSION_DEFERRED);
      this.stored = storedOf(record, this.chunk_bytes);
      this.snap = this.stored.info;
      return this.snap;
    });
  }

  private checkNewSnapshot(index: number, withData: boolean): void {
    if (!supersedes(index, withData, this.snap)) throw new SnapshotSupersededError(index, this.snap?.meta.index ?? 0);
  }

  /**
   * Stores chunks of a snapshot being received (Ready.snapshotChunks), in order, synced (whole records; the
   * bytes of a last partial record wait in memory for the rest): a chunk at offset 0
   * starts a new snapshot (a partial one's records are deleted). It becomes the log's snapshot with
   * persist({ snapshot }); a crash before leaves only garbage records, deleted on the next open.
   */
  receiveSnapshot(chunks: readonly SnapshotChunk[]): Promise<void> {
    if (chunks.length === 0) return Promise.resolve();
    return this.serialize(async () => {
      for (const c of chunks) {
        const { sink, abandoned } = this.incoming.accept(
          c,
          () => new SnapshotWriter(this.db, this.allocGen(), this.chunk_bytes),
        );
        const garbage = abandoned?.discardOps() ?? [];
        if (garbage.length > 0) await this.db.batch(garbage, { sync: true });
        await sink.write(c.data);
      }
      // Durable before the core's acknowledgements of these chunks leave (they are sent after this write).
      await this.incoming.sink?.flush();
    });
  }

  /**
   * Bytes of the snapshot `meta` names from `offset_bytes` on, at most `max_bytes`, read from its records; null
   * when that is not the log's snapshot (any more).
   */
  async readSnapshot(meta: SnapshotMeta, offset_bytes: number, max_bytes: number): Promise<Uint8Array | null> {
    const s = this.stored;
    if (s === null || s.info.meta.index !== meta.index || s.info.meta.term !== meta.term) return null;
    if (this.closed || s.info.deferred === true) return null;
    return readRange(this.db, s, offset_bytes, max_bytes);
  }

  /** The log's snapshot, one stored record at a time; throws if it is replaced while being read. */
  async *snapshotChunks(): AsyncGenerator<Uint8Array> {
    const s = this.stored;
    if (s === null) throw new LogStateError('the log holds no snapshot');
    if (s.info.deferred === true) throw new LogStateError(`snapshot ${s.info.meta.index} is deferred: it has no bytes`);
    for (let c = 0; c < s.chunks; c++) {
      const body = await readRecord(this.db, s, c);
      if (body === null) throw new LogStateError(`snapshot ${s.info.meta.index} was replaced while being read`);
      yield body;
    }
  }

  private allocGen(): number {
    if (this.nextGen >= 0xffff_ffff) throw new LogStateError('snapshot generations exhausted');
    return this.nextGen++;
  }

  setConf(applied: AppliedConf): Promise<void> {
    return this.serialize(async () => {
      if (applied.index < this.conf.index) {
        throw new LogStateError(`conf at ${applied.index} is older than recorded conf at ${this.conf.index}`);
      }
      const next = { index: applied.index, conf: cloneConf(applied.conf), addresses: { ...applied.addresses } };
      await this.db.put(KEY_CONF, encodeMeta(next), { sync: true });
      this.conf = next;
      this.fresh = false;
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.tail.catch(() => undefined);
    if (this.stateDirty && this.failure === null) {
      const m = this.cache;
      const value = this.stateValue(this.hs, m.markerIndex(), m.markerTerm(), this.ldbLast, this.walGens);
      await this.db.put(KEY_STATE, value, { sync: true });
    }
    try {
      await this.walFile?.close();
    } finally {
      await this.db.close();
    }
  }

  // ---- internals ------------------------------------------------------------------------------------------

  private serialize<T>(fn: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new LogStateError('log is closed'));
    const run = async (): Promise<T> => {
      if (this.failure !== null) throw new LogStateError(`an earlier write failed: ${this.failure.message}`);
      try {
        return await fn();
      } catch (err) {
        // A failed write may leave memory and disk out of step only if the error is from LevelDB; a rejected
        // argument (LogStateError) changes nothing.
        if (!(err instanceof LogStateError)) this.failure = err as Error;
        throw err;
      }
    };
    const result = this.tail.then(run);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  private stateValue(
    hs: HardState,
    markerIndex: number,
    markerTerm: number,
    lastIndex: number,
    gens: readonly WalGen[] | null,
  ): Buffer {
    const rec: StateRecord = { term: hs.term, vote: hs.vote, commit: hs.commit, markerIndex, markerTerm, lastIndex };
    if (gens !== null && gens.length > 0)
      rec.wal = gens.map((g) => ({ salt: g.salt.toString('hex'), at: g.start_bytes }));
    return encodeMeta(rec);
  }

  /** Folds everything the write-ahead records hold into LevelDB and names no generation (see fold). */
  private foldAll(): Promise<void> {
    return this.fold(this.cache.lastIndex(), [], []);
  }

  /**
   * Starts a generation of records in the half of the file the current one does not use, named in one synced
   * batch before any record is written under it. The generation that used that half before is dropped: the
   * entries only its records held (up to its last index, past LevelDB's) go into LevelDB in the same batch. With the
   * file at least twice the log between two compactions, those were compacted away already and the batch is the
   * state record alone. Also moves the format to the version that knows write-ahead records.
   */
  private async startGen(): Promise<void> {
    const current = this.walGens[this.walGens.length - 1];
    const dropped = this.walGens.length === 2 ? this.walGens[0]! : undefined;
    const gen: WalGen = {
      salt: newWalSalt(),
      start_bytes: current === undefined || current.start_bytes !== 0 ? 0 : halfOf(this.walFile!),
      records: 0,
      last: 0,
    };
    const gens = current === undefined ? [gen] : [{ ...current, last: this.cache.lastIndex() }, gen];
    const upgrade = this.formatVersion < FORMAT_VERSION_WAL;
    const format: Op[] = upgrade
      ? [{ type: 'put', key: KEY_FORMAT, value: encodeMeta({ name: FORMAT_NAME, version: FORMAT_VERSION_WAL }) }]
      : [];
    const before = this.ldbLast;
    await this.fold(dropped === undefined ? before : Math.min(dropped.last, this.cache.lastIndex()), gens, format);
    if (upgrade) this.formatVersion = FORMAT_VERSION_WAL;
    if (this.ldbLast > before) this.walCounts.folds++;
    this.wal_bytes = gen.start_bytes;
  }

  /**
   * One synced batch: `first` ops, the cache's entries (ldbLast, to] as segments (LevelDB's segments agree with the
   * cache up to ldbLast, so nothing below is rewritten), and the state record naming `to` (at least ldbLast) as
   * LevelDB's last index and `gens` as the generations to replay.
   */
  private async fold(to: number, gens: WalGen[], first: Op[]): Promise<void> {
    const ops = first;
    const added: Segment[] = [];
    const last = Math.max(to, this.ldbLast);
    if (last > this.ldbLast) this.segmentOps(this.cache.entries(this.ldbLast + 1, last + 1, Infinity), ops, added);
    const m = this.cache;
    ops.push({
      type: 'put',
      key: KEY_STATE,
      value: this.stateValue(this.hs, m.markerIndex(), m.markerTerm(), last, gens),
    });
    await this.db.batch(ops, { sync: true });
    for (const seg of added) this.segs.push(seg);
    this.ldbLast = last;
    this.walGens = gens;
    this.stateDirty = false;
  }

  private async doPersist(batch: PersistBatch): Promise<void> {
    const ops: Op[] = [];
    const { snapshot } = batch;
    let markerIndex = this.cache.markerIndex();
    let markerTerm = this.cache.markerTerm();
    let lastIndex = this.cache.lastIndex();
    let stored = this.stored;
    let conf = this.conf;
    let segs = this.segs;
    if (snapshot !== null) {
      const snapIndex = this.snap?.meta.index ?? 0;
      if (snapshot.meta.index <= snapIndex) {
        throw new LogStateError(`snapshot at ${snapshot.meta.index} is not newer than ${snapIndex}`);
      }
      for (const seg of segs) ops.push({ type: 'del', key: segmentKey(seg.first) });
      segs = [];
      stored = this.adoptOps(snapshot, ops);
      markerIndex = snapshot.meta.index;
      markerTerm = snapshot.meta.term;
      lastIndex = markerIndex;
      if (snapshot.meta.index >= this.conf.index) {
        const addresses = snapshotAddresses(snapshot.meta, this.conf.addresses);
        conf = { index: snapshot.meta.index, conf: cloneConf(snapshot.meta.conf), addresses };
        ops.push({ type: 'put', key: KEY_CONF, value: encodeMeta(conf) });
      }
    }
    let fresh = batch.entries;
    let skip = 0;
    while (skip < fresh.length && fresh[skip]!.index <= markerIndex) skip++;
    if (skip > 0) fresh = fresh.slice(skip);
    if (fresh.length > 0) {
      const first = fresh[0]!.index;
      if (first > lastIndex + 1) throw new LogStateError(`gap: appending ${first} after last index ${lastIndex}`);
      // Entries up to the snapshot were applied, so committed: Raft never rewrites them. A write that would is
      // refused here, before it reaches the disk, instead of leaving a log whose next open finds it corrupt.
      if (snapshot === null && this.snap !== null && first <= this.snap.meta.index) {
        throw new LogStateError(
          `appending at ${first} would rewrite entries covered by snapshot ${this.snap.meta.index}`,
        );
      }
      const prevTerm = first - 1 === markerIndex ? markerTerm : this.cache.term(first - 1);
      let term = prevTerm;
      for (let i = 0; i < fresh.length; i++) {
        const e = fresh[i]!;
        if (e.index !== first + i) throw new LogStateError(`non-contiguous append at ${e.index}`);
        if (e.term < term) throw new LogStateError(`entry ${e.index} term ${e.term} below previous term ${term}`);
        term = e.term;
      }
      lastIndex = first + fresh.length - 1;
    }
    const hs = batch.hardState ?? this.hs;
    if (hs.term < this.hs.term) throw new LogStateError(`hard state term ${hs.term} below ${this.hs.term}`);
    if (hs.commit > lastIndex) throw new LogStateError(`hard state commit ${hs.commit} beyond last index ${lastIndex}`);
    if (hs.vote !== this.hs.vote && hs.vote !== null && Buffer.byteLength(hs.vote) > MAX_VOTE_BYTES) {
      throw new LogStateError(`vote id longer than ${MAX_VOTE_BYTES} bytes`);
    }

    // Like etcd's mustSync: a change of nothing but the commit index need not be durable (commit is
    // recoverable; the driver raises it to the application's applied index on restart). It is not even
    // written on its own: every later batch rewrites the state record with the current commit index.
    const sync = snapshot !== null || fresh.length > 0 || hs.term !== this.hs.term || hs.vote !== this.hs.vote;
    if (!sync) {
      this.hs = { ...hs };
      this.stateDirty = true;
      return;
    }
    if (snapshot === null && (await this.appendRecord(fresh, hs, batch.inline === true))) return;

    // To LevelDB, in one synced batch. Entries only the write-ahead records hold go with it (unless this batch
    // overwrites them or a snapshot drops them), and a new generation replaces the ones named: none of their
    // records is replayed again.
    let gens = this.walGens;
    if (gens.some((g) => g.records > 0)) {
      const current = gens[gens.length - 1]!;
      gens = [
        { salt: newWalSalt(), start_bytes: current.start_bytes === 0 ? halfOf(this.walFile!) : 0, records: 0, last: 0 },
      ];
      const until =
        fresh.length > 0 ? Math.min(fresh[0]!.index, this.cache.lastIndex() + 1) : this.cache.lastIndex() + 1;
      if (snapshot === null && until > this.ldbLast + 1) {
        fresh = [...this.cache.entries(this.ldbLast + 1, until, Infinity), ...fresh];
      }
    }
    /** With fresh entries: how many of `segs` stay, and the segments written after them. */
    let kept = -1;
    const added: Segment[] = [];
    if (fresh.length > 0) {
      const first = fresh[0]!.index;
      // Drop (or cut) the stored segments from `first` on: the new entries overwrite a conflicting tail. The list
      // changes only once the batch is durable (kept = the segments that stay, then `added`): no copy of it here.
      kept = segs.length;
      while (kept > 0 && segs[kept - 1]!.last >= first) {
        const seg = segs[--kept]!;
        ops.push({ type: 'del', key: segmentKey(seg.first) });
        if (seg.first < first) {
          // the part below `first` stays: rewritten as segments of its own (ending at first - 1, so the last cut)
          this.segmentOps(this.cache.entries(seg.first, first, Infinity), ops, added);
          break;
        }
      }
      this.segmentOps(fresh, ops, added);
    }
    ops.push({ type: 'put', key: KEY_STATE, value: this.stateValue(hs, markerIndex, markerTerm, lastIndex, gens) });
    await this.db.batch(ops, { sync: true });
    this.stateDirty = false;

    if (snapshot !== null) {
      this.cache.restart(snapshot.meta.index, snapshot.meta.term);
      this.stored = stored;
      this.snap = stored?.info ?? null;
      this.incoming.clear();
      this.conf = conf;
    }
    if (fresh.length > 0) {
      this.cache.append(fresh);
      segs.length = kept;
      for (const seg of added) segs.push(seg);
    }
    this.segs = segs;
    this.ldbLast = lastIndex;
    if (gens !== this.walGens) {
      this.walGens = gens;
      this.wal_bytes = gens[0]!.start_bytes;
    }
    this.hs = { ...hs };
    this.fresh = false;
  }

  /**
   * The hot path: `entries` (none at or below LevelDB's last index) and `hs` as one record in the write-ahead
   * file, durable when it resolves; a full half first starts a new generation in the other (startGen). False,
   * having written nothing, when the log has no such file, the entries overwrite entries LevelDB holds, or the
   * record is larger than half the file: the caller then writes to LevelDB. `inline`: the record is written on
   * this thread (PersistBatch.inline).
   */
  private async appendRecord(entries: Entry[], hs: HardState, inline: boolean): Promise<boolean> {
    const file = this.walFile;
    if (file === null || this.walGens.length === 0) return false;
    if (entries.length > 0 && entries[0]!.index <= this.ldbLast) return false;
    const half = halfOf(file);
    let gen = this.walGens[this.walGens.length - 1]!;
    let parts = encodeWalRecord(gen.salt, hs, entries);
    const size_bytes = recordSize_bytes(parts);
    if (size_bytes > half) {
      this.walCounts.full++;
      return false;
    }
    if (this.wal_bytes + size_bytes > gen.start_bytes + half) {
      await this.startGen();
      this.walCounts.switches++;
      // The generation dropped may have taken LevelDB's last index past where these entries start (a new leader
      // overwriting entries of that generation): then they go to LevelDB.
      if (entries.length > 0 && entries[0]!.index <= this.ldbLast) return false;
      gen = this.walGens[this.walGens.length - 1]!;
      parts = encodeWalRecord(gen.salt, hs, entries);
    }
    await file.write(parts, this.wal_bytes, inline);
    if (inline) this.walCounts.inline++;
    this.wal_bytes += size_bytes;
    gen.records++;
    if (entries.length > 0) this.cache.append(entries);
    this.hs = { ...hs };
    this.stateDirty = false;
    this.fresh = false;
    return true;
  }

  /**
   * The ops recording the received snapshot `snap` as the log's (its last records, its metadata, the deletion of
   * the previous one's records): every byte of it must have come through receiveSnapshot.
   */
  private adoptOps(snap: SnapshotInfo, ops: Op[]): StoredSnapshot {
    const writer = this.incoming.received(snap);
    const { ops: last, crc } = writer.finish();
    const record = metaRecord(snap.meta, writer, crc);
    ops.push(...last, ...deleteOps(this.stored), { type: 'put', key: KEY_SNAP_META, value: encodeMeta(record) });
    return storedOf(record, this.chunk_bytes);
  }

  /**
   * Adds put ops storing `entries` as segments of at most maxSegment_bytes, and appends the segments to `added`.
   * Each segment is encoded from its range of `entries` (no copy of the range, no list of segments of its own).
   */
  private segmentOps(entries: readonly Entry[], ops: Op[], added: Segment[]): void {
    let start = 0;
    while (start < entries.length) {
      let end = start + 1;
      let size = SEGMENT_HEADER_BYTES + segmentEntry_bytes(entries[start]!);
      while (end < entries.length) {
        const next = size + segmentEntry_bytes(entries[end]!);
        if (next > this.maxSegment_bytes) break;
        size = next;
        end++;
      }
      const first = entries[start]!.index;
      // A put replaces any stale delete of the same key earlier in the batch (LevelDB applies ops in order).
      ops.push({ type: 'put', key: segmentKey(first), value: encodeSegment(entries, start, end) });
      added.push({ first, last: entries[end - 1]!.index });
      start = end;
    }
  }
}

/** Half of a write-ahead file: the records of one generation fill one half from its start. */
function halfOf(file: WalFile): number {
  return Math.floor(file.size_bytes / 2);
}

/**
 * LevelDB's entries (marker, …] and hard state with the write-ahead records replayed over them in order: each
 * record's entries overwrite the log from their first index, and so cut what followed (those at or below the
 * marker are dropped, as a compaction recorded after the record did; the cut still applies, even when all of them
 * are), and its hard state replaces the one before unless that is newer (the commit index never goes back). A record may start past the end for a while: the base it was written over (entries a
 * later generation's fold took from a newer record) is rebuilt by later records cutting below it; finish() checks
 * that no entry is missing in the end, and the terms.
 */
class WalReplay {
  private recordTerm = 0;
  /** A record started past the end (a hole was made): finish() hands out a packed copy. */
  private holey = false;

  constructor(
    private readonly marker: number,
    private readonly ents: Array<Entry | undefined>,
    private hs: HardState,
    private readonly maxEntries: number,
  ) {}

  lastIndex(): number {
    return this.marker + this.ents.length;
  }

  apply(r: WalRecord): void {
    if (r.hs.term < this.recordTerm) {
      throw new LogCorruptError('wal', null, `record term ${r.hs.term} below the previous record's ${this.recordTerm}`);
    }
    this.recordTerm = r.hs.term;
    // The state record may be newer than a record (a compaction rewrites it with the hard state of its time): a
    // record's term and vote count only when they are not older. Within a term the vote never changes once cast.
    const hs = this.hs;
    if (r.hs.term > hs.term) this.hs = { term: r.hs.term, vote: r.hs.vote, commit: hs.commit };
    else if (r.hs.term === hs.term && hs.vote === null) this.hs = { ...hs, vote: r.hs.vote };
    this.hs.commit = Math.max(this.hs.commit, r.hs.commit);
    if (r.entries.length === 0) return;
    let k = 0;
    while (k < r.entries.length && r.entries[k]!.index <= this.marker) k++;
    if (k === r.entries.length) {
      // Every entry at or below the marker, yet the record still cut the log there: after it the log ended at or
      // below the marker (later records, or LevelDB's compaction, say what follows).
      this.ents.length = 0;
      return;
    }
    const at = r.entries[k]!.index - this.marker - 1;
    if (at + r.entries.length - k > this.maxEntries) {
      throw new LogStateError(`log holds more than maxEntries ${this.maxEntries}`);
    }
    if (at > this.ents.length) this.holey = true;
    this.ents.length = at; // may leave holes (see the class comment)
    for (; k < r.entries.length; k++) this.ents.push(r.entries[k]!);
  }

  finish(markerTerm: number): { ents: Entry[]; hs: HardState } {
    let prevTerm = markerTerm;
    for (let i = 0; i < this.ents.length; i++) {
      const e = this.ents[i];
      const index = this.marker + 1 + i;
      if (e === undefined) throw new LogCorruptError('wal', index, 'entry missing');
      if (e.term < prevTerm) throw new LogCorruptError('wal', index, `term ${e.term} below previous term ${prevTerm}`);
      prevTerm = e.term;
    }
    // The cache keeps the array: a packed one, never one V8 stores with holes (or as a dictionary)
    return { ents: this.holey ? Array.from(this.ents as Entry[]) : (this.ents as Entry[]), hs: this.hs };
  }
}
