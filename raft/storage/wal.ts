/**
 * The Raft log's write-ahead file: a pre-allocated file of fixed size into which LevelLog writes the hot path of
 * persist() (new entries and hard state) as records, each one write with O_DSYNC, instead of a synced LevelDB
 * batch. LevelDB keeps everything else; at a checkpoint LevelLog folds what the records hold into LevelDB and starts
 * the file over under a new salt.
 *
 *   record: magic u32 | body length u32 | crc32 u32 (over salt and body) | salt 8 bytes | body
 *   body:   version u8 | term u64 | commit u64 | vote length u16 (0xffff: no vote) | vote utf-8 | segment?
 *
 * The segment, when present, is codec.ts's encoding of the entries (each with its own CRC). Records of one salt
 * are written back to back from offset 0; the file past the last one holds zeros or records of older salts. The
 * salt is random and recorded in LevelDB's state record before the first record under it is written, so a reader
 * never replays a record of an older generation, nor one forged inside an entry's data (an attacker cannot know
 * the salt). A record cut short by a crash fails its CRC and ends the scan: it was never acknowledged.
 */
import { randomBytes } from 'node:crypto';
import { writevSync } from 'node:fs';
import { constants, type FileHandle, open, rename, stat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { crc32 } from 'node:zlib';
import type { Entry, HardState } from '../types.js';
import { decodeSegment, encodeSegment, readU64, SEGMENT_HEADER_BYTES, writeU64 } from './codec.js';
import { LogCorruptError } from './errors.js';

/** The part of a file LevelLog's write-ahead records use (production: openWalFile; tests: power-loss-testkit.ts). */
export interface WalFile {
  /** Size of the file, fixed for its life. */
  readonly size_bytes: number;
  /** Up to `length` bytes from `position` (fewer only at the end of the file). */
  read(position: number, length: number): Promise<Buffer>;
  /**
   * Writes `parts` back to back from `position`; resolves once they are on stable storage. `inline`: written on
   * the calling thread (the event loop waits for the disk), not by a worker thread (PersistBatch.inline).
   */
  write(parts: readonly Buffer[], position: number, inline?: boolean): Promise<void>;
  close(): Promise<void>;
}

export const WAL_MAGIC = 0x4b57414c; // "KWAL"
export const WAL_SALT_BYTES = 8;
/** Header layout: magic, body length, CRC (of salt and body), salt. */
const LENGTH_AT = 4;
const CRC_AT = 8;
const SALT_AT = 12;
export const WAL_HEADER_BYTES = SALT_AT + WAL_SALT_BYTES;
const BODY_VERSION = 1;
/** version, term, commit, vote length. */
const BODY_FIXED_BYTES = 1 + 8 + 8 + 2;
const NO_VOTE = 0xffff;
/** The longest vote (member id) a record holds, in UTF-8 bytes. */
export const MAX_VOTE_BYTES = NO_VOTE - 1;
/** The smallest write-ahead file accepted. */
export const MIN_WAL_BYTES = 64 * 1024;
/** The largest: a record's body length is a u32, and a record fits in half the file. */
export const MAX_WAL_BYTES = 2 ** 32;
/** Bytes read from the file at a time while scanning. */
const SCAN_READ_BYTES = 1 << 20;
const ZERO_CHUNK_BYTES = 1 << 20;

/** One replayed record: the hard state as of its write, and the entries it appended (overwriting from the first). */
export interface WalRecord {
  hs: HardState;
  entries: Entry[];
}

export function newWalSalt(): Buffer {
  return randomBytes(WAL_SALT_BYTES);
}

/** Encodes a record: its parts, to be written back to back (the header and fixed body, then the segment). */
export function encodeWalRecord(salt: Buffer, hs: HardState, entries: readonly Entry[]): Buffer[] {
  const vote = hs.vote === null ? null : Buffer.from(hs.vote, 'utf8');
  if (vote !== null && vote.length > MAX_VOTE_BYTES) throw new RangeError('raft log: vote id too long');
  const head = Buffer.allocUnsafe(WAL_HEADER_BYTES + BODY_FIXED_BYTES + (vote?.length ?? 0));
  let at = WAL_HEADER_BYTES;
  head[at] = BODY_VERSION;
  writeU64(head, at + 1, hs.term);
  writeU64(head, at + 9, hs.commit);
  head.writeUInt16BE(vote === null ? NO_VOTE : vote.length, at + 17);
  if (vote !== null) vote.copy(head, at + BODY_FIXED_BYTES);
  at = head.length;
  const segment = entries.length > 0 ? encodeSegment(entries) : null;
  const body_bytes = head.length - WAL_HEADER_BYTES + (segment?.length ?? 0);
  head.writeUInt32BE(WAL_MAGIC, 0);
  head.writeUInt32BE(body_bytes, LENGTH_AT);
  salt.copy(head, SALT_AT);
  let crc = crc32(head.subarray(SALT_AT));
  if (segment !== null) crc = crc32(segment, crc);
  head.writeUInt32BE(crc, CRC_AT);
  return segment === null ? [head] : [head, segment];
}

export function recordSize_bytes(parts: readonly Buffer[]): number {
  let n = 0;
  for (const p of parts) n += p.length;
  return n;
}

/**
 * The records of `salt` in the file's bytes [start_bytes, end_bytes) from its start, in order, and the offset after
 * the last. Stops at the first position that does not hold a whole record of that salt with a good CRC (zeros, an
 * older generation, a record cut short). Then searches the rest of the range for a good record of the salt (its
 * bytes found by the salt, which is random, then checked like any record): there is none after a write cut short,
 * which can only be the last, so one found means damage in the middle (to a header or a body), and the scan throws
 * LogCorruptError rather than drop acknowledged records. Bounded by the range: at most its size ÷ header records,
 * and one pass over the rest.
 */
export async function scanWal(
  file: WalFile,
  salt: Buffer,
  start_bytes = 0,
  end_bytes = file.size_bytes,
): Promise<{ records: WalRecord[]; end_bytes: number }> {
  if (!(start_bytes >= 0 && start_bytes <= end_bytes && end_bytes <= file.size_bytes)) {
    throw new RangeError(`raft log: no range [${start_bytes}, ${end_bytes}) in a file of ${file.size_bytes} bytes`);
  }
  const reader = new Reader(file, end_bytes);
  const records: WalRecord[] = [];
  let pos = start_bytes;
  for (;;) {
    const found = await readRecordAt(reader, pos, salt);
    if (found.kind !== 'record') break;
    records.push(found.record);
    pos = found.next_bytes;
  }
  const later = await goodRecordAfter(reader, pos, salt);
  if (later !== null) {
    throw new LogCorruptError('wal', null, `damaged record at offset ${pos}: a good one follows at ${later}`);
  }
  return { records, end_bytes: pos };
}

/** The offset of a whole record of `salt` with a good CRC starting after `pos` in the reader's range, or null. */
async function goodRecordAfter(reader: Reader, pos: number, salt: Buffer): Promise<number | null> {
  // Windows overlap by a header so a salt across their boundary is seen; each candidate is checked in full.
  for (let at = pos + 1; at + WAL_HEADER_BYTES <= reader.end_bytes; at += SCAN_READ_BYTES - WAL_HEADER_BYTES) {
    const window = await reader.file.read(at, Math.min(SCAN_READ_BYTES, reader.end_bytes - at));
    let i = window.indexOf(salt, SALT_AT);
    while (i >= 0) {
      const start = at + i - SALT_AT;
      if (start > pos && window.readUInt32BE(i - SALT_AT) === WAL_MAGIC) {
        const found = await readRecordAt(reader, start, salt);
        if (found.kind === 'record') return start;
      }
      i = window.indexOf(salt, i + 1);
    }
  }
  return null;
}

type Found = { kind: 'record'; record: WalRecord; next_bytes: number } | { kind: 'end' };

async function readRecordAt(reader: Reader, pos: number, salt: Buffer): Promise<Found> {
  const size = reader.end_bytes;
  if (pos + WAL_HEADER_BYTES + BODY_FIXED_BYTES > size) return { kind: 'end' };
  const head = await reader.bytes(pos, WAL_HEADER_BYTES);
  if (head.readUInt32BE(0) !== WAL_MAGIC) return { kind: 'end' };
  const body_bytes = head.readUInt32BE(LENGTH_AT);
  const next_bytes = pos + WAL_HEADER_BYTES + body_bytes;
  if (body_bytes < BODY_FIXED_BYTES || next_bytes > size) return { kind: 'end' };
  if (!head.subarray(SALT_AT, WAL_HEADER_BYTES).equals(salt)) return { kind: 'end' };
  const body = await reader.bytes(pos + WAL_HEADER_BYTES, body_bytes);
  const crc = crc32(body, crc32(salt));
  if (crc !== head.readUInt32BE(CRC_AT)) return { kind: 'end' };
  return { kind: 'record', record: decodeBody(body, pos), next_bytes };
}

function decodeBody(body: Buffer, pos: number): WalRecord {
  const fail = (reason: string): never => {
    throw new LogCorruptError('wal', null, `record at offset ${pos}: ${reason}`);
  };
  if (body[0] !== BODY_VERSION) fail(`unknown record version ${body[0]}`);
  const term = readU64(body, 1);
  const commit = readU64(body, 9);
  const voteLen = body.readUInt16BE(17);
  let at = BODY_FIXED_BYTES;
  let vote: string | null = null;
  if (voteLen !== NO_VOTE) {
    if (at + voteLen > body.length) fail('vote runs past the record');
    vote = body.toString('utf8', at, at + voteLen);
    at += voteLen;
  }
  let entries: Entry[] = [];
  if (at < body.length) {
    const segment = body.subarray(at);
    if (segment.length < SEGMENT_HEADER_BYTES) fail('segment too short');
    entries = decodeSegment(segment, readU64(segment, 9));
  }
  return { hs: { term, vote, commit }, entries };
}

/** Sequential reads through a window of the file (a scan makes a few large reads, not two per record). */
class Reader {
  private window: Buffer = Buffer.alloc(0);
  private window_at = 0;

  constructor(
    readonly file: WalFile,
    /** Reads stop here. */
    readonly end_bytes: number,
  ) {}

  async bytes(pos: number, length: number): Promise<Buffer> {
    if (pos < this.window_at || pos + length > this.window_at + this.window.length) {
      this.window = await this.file.read(pos, Math.min(Math.max(length, SCAN_READ_BYTES), this.end_bytes - pos));
      this.window_at = pos;
      if (this.window.length < length) throw new LogCorruptError('wal', null, `short read at offset ${pos}`);
    }
    return this.window.subarray(pos - this.window_at, pos - this.window_at + length);
  }
}

/**
 * Opens the write-ahead file at `path`, creating it pre-allocated to `size_bytes` of zeros if it does not exist
 * (written to a temporary name, synced, renamed, the directory synced). Writes use O_DSYNC: each returns once its
 * bytes are durable, and since the file's blocks are allocated up front, no metadata has to be written with them.
 * An existing file keeps its size. With `create` false a missing file is a LogCorruptError: the log names records
 * in it, and a new empty file would lose them silently.
 */
export async function openWalFile(path: string, size_bytes: number, create: boolean): Promise<WalFile> {
  if (!(Number.isSafeInteger(size_bytes) && size_bytes >= MIN_WAL_BYTES && size_bytes <= MAX_WAL_BYTES)) {
    throw new RangeError(`raft log: the write-ahead file must be ${MIN_WAL_BYTES} to ${MAX_WAL_BYTES} bytes`);
  }
  const exists = await stat(path).then(
    () => true,
    (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return false;
      throw err;
    },
  );
  if (!exists) {
    if (!create) throw new LogCorruptError('wal', null, `the log names write-ahead records but ${path} is missing`);
    await createZeroed(path, size_bytes);
  }
  const fh = await open(path, constants.O_RDWR | constants.O_DSYNC);
  try {
    const { size } = await fh.stat();
    if (size < MIN_WAL_BYTES || size > MAX_WAL_BYTES)
      throw new LogCorruptError('wal', null, `file holds ${size} bytes`);
    return fileWal(fh, size);
  } catch (err) {
    await fh.close();
    throw err;
  }
}

async function createZeroed(path: string, size_bytes: number): Promise<void> {
  const tmp = `${path}.tmp`;
  const fh = await open(tmp, 'w');
  try {
    try {
      const zeros = Buffer.alloc(Math.min(ZERO_CHUNK_BYTES, size_bytes));
      for (let at = 0; at < size_bytes; at += zeros.length) {
        await fh.write(zeros, 0, Math.min(zeros.length, size_bytes - at), at);
      }
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  const dir = await open(dirname(path), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

function fileWal(fh: FileHandle, size_bytes: number): WalFile {
  return {
    size_bytes,
    async read(position, length) {
      const buf = Buffer.allocUnsafe(Math.max(0, Math.min(length, size_bytes - position)));
      let got = 0;
      while (got < buf.length) {
        const { bytesRead } = await fh.read(buf, got, buf.length - got, position + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return buf.subarray(0, got);
    },
    async write(parts, position, inline) {
      const total = recordSize_bytes(parts);
      if (position + total > size_bytes) throw new RangeError('raft log: write past the end of the write-ahead file');
      const bytesWritten =
        inline === true
          ? writevSync(fh.fd, parts as Buffer[], position)
          : (await fh.writev(parts as Buffer[], position)).bytesWritten;
      if (bytesWritten !== total) throw new Error(`raft log: short write (${bytesWritten} of ${total} bytes)`);
    },
    close: () => fh.close(),
  };
}
