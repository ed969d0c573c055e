/**
 * Binary records of the LevelDB log. Every value starts with a CRC32 of the rest of the value, so a flipped
 * byte anywhere in a record is detected on open.
 *
 * Entries are stored in segments: one LevelDB value holds a contiguous run of entries (typically those of one
 * persisted Ready), keyed by the index of its first entry (big-endian, so segments sort by index). One put per
 * Ready instead of one per entry costs LevelDB several times less CPU. Each entry inside keeps its own CRC so
 * a damaged segment names the damaged entry.
 *
 *   segment value: crc32 u32 | version u8 | count u32 | first index u64 | entry…
 *   entry:         crc32 u32 | type u8 | term u64 | length u32 | data…   (crc over type…data, and the index)
 *   other values:  crc32 u32 | version u8 | msgpack body…
 */
import { crc32 } from 'node:zlib';
import { Packr } from 'msgpackr';
import type { Entry, EntryType } from '../types.js';
import { LogCorruptError } from './errors.js';

export const RECORD_VERSION = 1;
/** Bytes of a segment's own header (an empty segment's size). */
export const SEGMENT_HEADER_BYTES = 17;
const ENTRY_HEADER_BYTES = 17;
const META_HEADER_BYTES = 5;
const TWO_32 = 2 ** 32;

export const KEY_FORMAT = Buffer.from([0x00]);
export const KEY_STATE = Buffer.from([0x01]);
export const KEY_CONF = Buffer.from([0x02]);
export const KEY_SNAP_META = Buffer.from([0x03]);
export const PREFIX_SNAP_CHUNK = 0x04;
export const PREFIX_ENTRY = 0x10;
export const ENTRY_RANGE = { gte: Buffer.from([PREFIX_ENTRY]), lt: Buffer.from([PREFIX_ENTRY + 1]) };
export const CHUNK_RANGE = { gte: Buffer.from([PREFIX_SNAP_CHUNK]), lt: Buffer.from([PREFIX_SNAP_CHUNK + 1]) };

const packr = new Packr({ useRecords: false, moreTypes: false });

const TYPE_CODES: Record<EntryType, number> = { normal: 0, conf: 1, noop: 2 };
const CODE_TYPES: EntryType[] = ['normal', 'conf', 'noop'];

export function writeU64(buf: Buffer, offset: number, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`raft log: not a u64-safe integer: ${value}`);
  buf.writeUInt32BE(Math.floor(value / TWO_32), offset);
  buf.writeUInt32BE(value % TWO_32, offset + 4);
}

export function readU64(buf: Buffer, offset: number): number {
  return buf.readUInt32BE(offset) * TWO_32 + buf.readUInt32BE(offset + 4);
}

export function segmentKey(firstIndex: number): Buffer {
  const key = Buffer.allocUnsafe(9);
  key[0] = PREFIX_ENTRY;
  writeU64(key, 1, firstIndex);
  return key;
}

/**
 * Key of record `chunk` of snapshot generation `gen`. Each snapshot written (created or received) gets a new
 * generation, so a half-written one never overwrites the recorded one. Generation 0 is the layout of format
 * version 1 logs written before generations (5-byte keys), still read.
 */
export function chunkKey(gen: number, chunk: number): Buffer {
  if (gen === 0) {
    const key = Buffer.allocUnsafe(5);
    key[0] = PREFIX_SNAP_CHUNK;
    key.writeUInt32BE(chunk, 1);
    return key;
  }
  const key = Buffer.allocUnsafe(9);
  key[0] = PREFIX_SNAP_CHUNK;
  key.writeUInt32BE(gen, 1);
  key.writeUInt32BE(chunk, 5);
  return key;
}

/** The (generation, chunk) of a snapshot chunk key; null for a key of another shape. */
export function decodeChunkKey(key: Buffer): { gen: number; chunk: number } | null {
  if (key[0] !== PREFIX_SNAP_CHUNK) return null;
  if (key.length === 5) return { gen: 0, chunk: key.readUInt32BE(1) };
  if (key.length === 9) return { gen: key.readUInt32BE(1), chunk: key.readUInt32BE(5) };
  return null;
}

/** Printable form of a key for error messages. */
export function describeKey(key: Buffer): string {
  if (key.length === 9 && key[0] === PREFIX_ENTRY) return `segment/${readU64(key, 1)}`;
  const chunk = decodeChunkKey(key);
  if (chunk !== null)
    return chunk.gen === 0 ? `snapshot-chunk/${chunk.chunk}` : `snapshot-chunk/${chunk.gen}/${chunk.chunk}`;
  if (key.equals(KEY_FORMAT)) return 'format';
  if (key.equals(KEY_STATE)) return 'state';
  if (key.equals(KEY_CONF)) return 'conf';
  if (key.equals(KEY_SNAP_META)) return 'snapshot-meta';
  return `0x${key.toString('hex')}`;
}

export function decodeSegmentKey(key: Buffer): number {
  if (key.length !== 9 || key[0] !== PREFIX_ENTRY) {
    throw new LogCorruptError(describeKey(key), null, 'malformed segment key');
  }
  return readU64(key, 1);
}

/** Bytes a segment holding `entries[start..end)` takes. */
function segmentSize_bytes(entries: readonly Entry[], start = 0, end = entries.length): number {
  let n = SEGMENT_HEADER_BYTES;
  for (let i = start; i < end; i++) n += segmentEntry_bytes(entries[i]!);
  return n;
}

/** Bytes one entry adds to a segment (its header and data; durable-log.ts's entrySize_bytes is the core's measure). */
export function segmentEntry_bytes(e: Entry): number {
  return ENTRY_HEADER_BYTES + e.data.byteLength;
}

/** The index's bytes for entryCrc: one buffer, reused (entryCrc runs synchronously, once per entry). */
const CRC_INDEX = Buffer.alloc(8);

function entryCrc(buf: Buffer, start: number, end: number, index: number): number {
  writeU64(CRC_INDEX, 0, index);
  return crc32(buf.subarray(start, end), crc32(CRC_INDEX));
}

/**
 * Encodes the contiguous run of entries `entries[start..end)` (entries[i].index === entries[start].index + i -
 * start), the whole array by default.
 */
export function encodeSegment(entries: readonly Entry[], start = 0, end = entries.length): Buffer {
  if (end <= start) throw new RangeError('raft log: empty segment');
  if (start < 0 || end > entries.length)
    throw new RangeError(`raft log: segment [${start}, ${end}) of ${entries.length} entries`);
  const first = entries[start]!.index;
  const buf = Buffer.allocUnsafe(segmentSize_bytes(entries, start, end));
  buf[4] = RECORD_VERSION;
  buf.writeUInt32BE(end - start, 5);
  writeU64(buf, 9, first);
  let at = SEGMENT_HEADER_BYTES;
  for (let i = start; i < end; i++) {
    const e = entries[i]!;
    if (e.index !== first + i - start) throw new RangeError(`raft log: non-contiguous segment at ${e.index}`);
    const entryAt = at;
    buf[at + 4] = TYPE_CODES[e.type];
    writeU64(buf, at + 5, e.term);
    buf.writeUInt32BE(e.data.byteLength, at + 13);
    buf.set(e.data, at + ENTRY_HEADER_BYTES);
    at += segmentEntry_bytes(e);
    buf.writeUInt32BE(entryCrc(buf, entryAt + 4, at, e.index), entryAt);
  }
  buf.writeUInt32BE(crc32(buf.subarray(4)), 0);
  return buf;
}

/**
 * Decodes and verifies the segment stored under segment/`keyIndex`. On damage, names the first entry whose own
 * checksum fails (or the segment when its structure is unreadable).
 */
export function decodeSegment(value: Buffer, keyIndex: number): Entry[] {
  const key = `segment/${keyIndex}`;
  if (value.length < SEGMENT_HEADER_BYTES)
    throw new LogCorruptError(key, keyIndex, `record too short (${value.length} bytes)`);
  const segmentOk = value.readUInt32BE(0) === crc32(value.subarray(4));
  if (value[4] !== RECORD_VERSION) throw new LogCorruptError(key, keyIndex, `unknown record version ${value[4]}`);
  const count = value.readUInt32BE(5);
  const first = readU64(value, 9);
  if (first !== keyIndex) {
    throw new LogCorruptError(key, keyIndex, segmentOk ? `record holds index ${first}` : 'checksum mismatch');
  }
  const out: Entry[] = [];
  let at = SEGMENT_HEADER_BYTES;
  for (let i = 0; i < count; i++) {
    const index = first + i;
    if (at + ENTRY_HEADER_BYTES > value.length) {
      throw new LogCorruptError(key, index, segmentOk ? 'segment truncated' : 'checksum mismatch');
    }
    const len = value.readUInt32BE(at + 13);
    const end = at + ENTRY_HEADER_BYTES + len;
    if (end > value.length || value.readUInt32BE(at) !== entryCrc(value, at + 4, Math.min(end, value.length), index)) {
      throw new LogCorruptError(key, index, 'checksum mismatch');
    }
    const type = CODE_TYPES[value[at + 4]!];
    if (type === undefined) throw new LogCorruptError(key, index, `unknown entry type ${value[at + 4]}`);
    // Copy the payload out so the entry does not pin LevelDB's read buffer.
    out.push({
      index,
      term: readU64(value, at + 5),
      type,
      data: new Uint8Array(value.subarray(at + ENTRY_HEADER_BYTES, end)),
    });
    at = end;
  }
  if (at !== value.length) throw new LogCorruptError(key, first + count, 'trailing bytes after the last entry');
  if (!segmentOk) throw new LogCorruptError(key, keyIndex, 'checksum mismatch');
  return out;
}

export function encodeMeta(body: unknown): Buffer {
  const packed = packr.pack(body);
  const buf = Buffer.allocUnsafe(META_HEADER_BYTES + packed.length);
  buf[4] = RECORD_VERSION;
  packed.copy(buf, META_HEADER_BYTES);
  buf.writeUInt32BE(crc32(buf.subarray(4)), 0);
  return buf;
}

export function decodeMeta(value: Buffer, key: string): unknown {
  if (value.length < META_HEADER_BYTES)
    throw new LogCorruptError(key, null, `record too short (${value.length} bytes)`);
  if (value.readUInt32BE(0) !== crc32(value.subarray(4))) throw new LogCorruptError(key, null, 'checksum mismatch');
  if (value[4] !== RECORD_VERSION) throw new LogCorruptError(key, null, `unknown record version ${value[4]}`);
  try {
    return packr.unpack(value.subarray(META_HEADER_BYTES));
  } catch (err) {
    throw new LogCorruptError(key, null, `undecodable body: ${(err as Error).message}`);
  }
}

export function checksum(data: Uint8Array): number {
  return crc32(data);
}
