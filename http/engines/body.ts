// Request-body accumulation under a hard byte limit, shared by both engines.
import { EMPTY_BODY } from '../request.js';

export type BodyLength =
  | { kind: 'none' } // no body framing at all (no content-length, no transfer-encoding) or length 0
  | { kind: 'fixed'; bytes: number }
  | { kind: 'chunked' }
  | { kind: 'invalid' };

const DIGITS = /^[0-9]{1,16}$/;

/** Reads the body framing from lower-cased request headers. */
export function bodyLength(headers: Record<string, string>): BodyLength {
  const te = headers['transfer-encoding'];
  if (te !== undefined) return { kind: 'chunked' };
  const cl = headers['content-length'];
  if (cl === undefined) return { kind: 'none' };
  const trimmed = cl.trim();
  if (!DIGITS.test(trimmed)) return { kind: 'invalid' };
  const bytes = Number(trimmed);
  return bytes === 0 ? { kind: 'none' } : { kind: 'fixed', bytes };
}

/**
 * `bodyLength` for the uWS engine, stricter where this uWS build frames a request otherwise than a proxy in front
 * may (request smuggling): uWS takes the first of several `content-length` lines as the length and any non-empty
 * `transfer-encoding` as chunked. `headers` holds repeated lines joined by ", " (as the engine collects them), so
 * two `content-length` lines already fail the decimal check (RFC 9112 §6.3: an invalid length is an unrecoverable
 * framing error); here a `transfer-encoding` that is anything but one `chunked` line, or one beside a
 * `content-length`, is invalid too.
 */
export function uwsBodyLength(headers: Record<string, string>): BodyLength {
  const te = headers['transfer-encoding'];
  if (te === undefined) return bodyLength(headers);
  if (te.trim().toLowerCase() !== 'chunked' || headers['content-length'] !== undefined) return { kind: 'invalid' };
  return { kind: 'chunked' };
}

/**
 * Bound on the pieces one body may arrive in (the engine's data events: chunks of a chunked body, socket reads).
 * A mebibyte sent in proper pieces takes a few hundred; one sent as a million one-byte chunks costs the parser a
 * JavaScript call per byte, seconds of the event loop for every other client. Past it the body is refused (413).
 */
export const MAX_BODY_PIECES = 16_384;

/** The first buffer of a body of unknown length (chunked): doubled as the body grows, up to the limit. */
const INITIAL_UNKNOWN_BYTES = 16 * 1024;

/**
 * Collects chunks up to `limit_bytes`, copying each into one buffer: allocated once with a known length; for a body of
 * unknown length (chunked) one that doubles as it fills, up to `limit_bytes`. Never a reference to a chunk: a chunk
 * may be a view of a larger read buffer (Node's parser hands out slices of its socket reads), so keeping chunks would
 * keep those buffers, and a body sent as a million one-byte chunks would cost a million objects and hundreds of
 * megabytes for less than a mebibyte of payload. So a body costs at most twice its limit, whatever its chunking.
 */
export class BodyCollector {
  private readonly limit_bytes: number;
  private readonly fixed: boolean;
  private buffer: Buffer | null;
  private received_bytes = 0;
  private pieces = 0;

  constructor(limit_bytes: number, expected_bytes: number | null) {
    if (expected_bytes !== null && expected_bytes > limit_bytes) {
      throw new RangeError('BodyCollector: expected length above the limit must be rejected before reading');
    }
    this.limit_bytes = limit_bytes;
    this.fixed = expected_bytes !== null;
    this.buffer = expected_bytes === null ? null : Buffer.allocUnsafe(expected_bytes);
  }

  get receivedBytes(): number {
    return this.received_bytes;
  }

  /** The body came in more than MAX_BODY_PIECES pieces (push refused it): answer at once, read no more of it. */
  get tooManyPieces(): boolean {
    return this.pieces > MAX_BODY_PIECES;
  }

  /**
   * Adds a copy of `chunk`. Returns false once the limit (or the announced length) is exceeded, or the body came in
   * too many pieces (tooManyPieces).
   */
  push(chunk: Uint8Array): boolean {
    if (++this.pieces > MAX_BODY_PIECES) return false;
    const next = this.received_bytes + chunk.byteLength;
    if (next > this.limit_bytes) return false;
    if (chunk.byteLength === 0) return true;
    let buffer = this.buffer;
    if (buffer === null || next > buffer.length) {
      if (this.fixed) return false; // more than announced: treat like an oversize body
      const size = Math.min(this.limit_bytes, Math.max(next, 2 * (buffer?.length ?? 0), INITIAL_UNKNOWN_BYTES));
      const grown = Buffer.allocUnsafe(size);
      if (buffer !== null) buffer.copy(grown, 0, 0, this.received_bytes);
      this.buffer = buffer = grown;
    }
    buffer.set(chunk, this.received_bytes);
    this.received_bytes = next;
    return true;
  }

  finish(): Buffer {
    if (this.received_bytes === 0 || this.buffer === null) return EMPTY_BODY;
    return this.buffer.subarray(0, this.received_bytes);
  }
}
