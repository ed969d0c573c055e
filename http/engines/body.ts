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
 * Collects chunks up to `limit_bytes`. With a known length the buffer is allocated once;
 * otherwise chunks are copied and concatenated at the end.
 */
export class BodyCollector {
  private readonly limit_bytes: number;
  private fixed: Buffer | null;
  private readonly chunks: Buffer[] = [];
  private received_bytes = 0;

  constructor(limit_bytes: number, expected_bytes: number | null) {
    if (expected_bytes !== null && expected_bytes > limit_bytes) {
      throw new RangeError('BodyCollector: expected length above the limit must be rejected before reading');
    }
    this.limit_bytes = limit_bytes;
    this.fixed = expected_bytes === null ? null : Buffer.allocUnsafe(expected_bytes);
  }

  get receivedBytes(): number {
    return this.received_bytes;
  }

  /**
   * Adds `chunk`; it is copied unless `owned` says the caller hands it over for good.
   * Returns false once the limit (or the announced length) is exceeded.
   */
  push(chunk: Uint8Array, owned = false): boolean {
    const next = this.received_bytes + chunk.byteLength;
    if (next > this.limit_bytes) return false;
    if (this.fixed !== null) {
      if (next > this.fixed.length) return false; // more than announced: treat like an oversize body
      this.fixed.set(chunk, this.received_bytes);
    } else if (chunk.byteLength > 0) {
      this.chunks.push(owned && Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk)); // Buffer.from(view) copies
    }
    this.received_bytes = next;
    return true;
  }

  finish(): Buffer {
    if (this.received_bytes === 0) return EMPTY_BODY;
    if (this.fixed !== null) return this.fixed.subarray(0, this.received_bytes);
    return this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.received_bytes);
  }
}
