import { packr } from '../../storage/codec.js';
import type { Command } from '../../storage/types.js';

/**
 * A replicated log entry's payload: the command and the request id of the proposal that carries it. The request
 * id lets the node that received the HTTP request (leader or follower) find the result `applyCommand` recorded
 * for it when the entry is applied there; it is unique per process start (`node:boot:seq`).
 */
export interface LoggedCommand {
  rid: string;
  cmd: Command;
}

export function encodeLogged(entry: LoggedCommand): Uint8Array {
  return packr.pack([entry.rid, entry.cmd]);
}

/** msgpack's header of a two-element array (fixarray). */
const PAIR = Buffer.from([0x92]);

/**
 * `encodeLogged` for a command already encoded (`encodeCommand`'s bytes): the same bytes, without packing the
 * command a second time.
 */
export function encodeLoggedBytes(rid: string, cmd: Uint8Array): Uint8Array {
  const ridBytes = Buffer.byteLength(rid);
  if (ridBytes > MAX_FIXSTR_BYTES) return Buffer.concat([PAIR, packr.pack(rid), cmd]);
  // the usual request id (`node:boot:seq`) is a msgpack fixstr: written here into one buffer, no packing, no concat
  const out = Buffer.allocUnsafe(2 + ridBytes + cmd.byteLength);
  out[0] = PAIR[0]!;
  out[1] = FIXSTR | ridBytes;
  out.write(rid, 2, 'utf8');
  out.set(cmd, 2 + ridBytes);
  return out;
}

/** msgpack's fixstr: a string of at most 31 bytes, its length in the header byte's low bits. */
const FIXSTR = 0xa0;
const MAX_FIXSTR_BYTES = 31;

/**
 * Decodes a normal entry; null when the bytes are not a logged command (never produced by Keel itself). Through a
 * view of its own over the entry's bytes: msgpackr keeps a DataView on the buffer it decodes (a `dataView` property,
 * 120 B of heap with the property array it takes), and the entry's own buffer stays in the Raft log's memory until
 * the log is compacted (up to a snapshot interval of entries, on every member); the view goes with the decode.
 */
export function decodeLogged(data: Uint8Array): LoggedCommand | null {
  let v: unknown;
  try {
    v = packr.unpack(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  } catch {
    return null;
  }
  if (!Array.isArray(v) || v.length !== 2 || typeof v[0] !== 'string') return null;
  const cmd = v[1] as Command | null;
  if (cmd === null || typeof cmd !== 'object' || typeof (cmd as { op?: unknown }).op !== 'string') return null;
  return { rid: v[0], cmd };
}
