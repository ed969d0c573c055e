// Limits of the HTTP edge that OpenZiti's error table has no code for (Go's net/http answers these itself,
// with plain text): Keel answers them with its usual error envelope where the engine lets it, and states each
// bound in docs/http.md.

import { statusLine } from './engines/common.js';
import { ApiError, Errors, errorEnvelope } from './errors.js';
import { newRequestId } from './request-id.js';

/**
 * Longest request target (path and query, as sent: percent-encoded) Keel serves; longer → 414. Both engines'
 * parsers accept more than this (node: `maxHeaderBytes`, uWS: about 124 KiB of request line and headers), so
 * the 414 and its envelope are Keel's own on both engines.
 */
export const DEFAULT_MAX_URL_BYTES = 64 * 1024;
/** node: bound on the request line plus headers (`maxHeaderSize`); beyond → 431 written by the engine. */
export const DEFAULT_MAX_HEADER_BYTES = DEFAULT_MAX_URL_BYTES + 16 * 1024;
/** node: the request line and headers must arrive within this time (`headersTimeout`); else 408 and close. */
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
/**
 * The whole request, body included, must arrive within this time (node `requestTimeout`; uWS: Keel's body
 * timer); else 408 and close. 1 MiB in 30 s is about 35 KB/s.
 */
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;
/**
 * uWS: a body must be complete within this time of its request's headers; else 408 and close. This uWS build's own
 * idle timer (about 10 s, not configurable) is not reset while a body arrives: it closed connections still sending
 * one after 9.3–11.8 s, without an answer. Keel's body timer answers before it, with the envelope. 1 MiB in 8 s is
 * about 130 KB/s: slower clients want the node engine (DEFAULT_BODY_TIMEOUT_MS).
 */
export const UWS_BODY_TIMEOUT_MS = 8_000;
/** node: an idle keep-alive connection is closed after this time (`keepAliveTimeout`; uWS: 10 s, fixed). */
export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 5_000;
/**
 * A body over the limit is read and thrown away up to this many bytes, so that the client, still sending,
 * reads the 413 instead of a connection reset; past it the 413 goes out at once and the connection closes.
 */
export const MAX_DISCARD_BYTES = 16 * 1024 * 1024;

export function uriTooLong(maxUrlBytes: number): ApiError {
  return new ApiError('URI_TOO_LONG', 414, 'The request URI exceeds the maximum accepted length', {
    cause: { code: 'UNHANDLED', message: `request target longer than ${maxUrlBytes} bytes` },
  });
}

export function headersTooLarge(maxHeaderBytes: number): ApiError {
  return new ApiError('REQUEST_HEADER_FIELDS_TOO_LARGE', 431, 'The request line and headers are too large', {
    cause: { code: 'UNHANDLED', message: `request line and headers longer than ${maxHeaderBytes} bytes` },
  });
}

export function requestTimeout(timeout_ms: number): ApiError {
  return new ApiError('REQUEST_TIMEOUT', 408, 'The request was not received in time', {
    cause: { code: 'UNHANDLED', message: `request not complete within ${timeout_ms} ms` },
  });
}

/**
 * A method the engine's parser cannot route: a token node's parser does not know (`FOO`, lower-case `get`) or
 * `CONNECT`. OpenZiti's router knows no such method either and answers 405 METHOD_NOT_ALLOWED.
 */
export function methodNotServed(): ApiError {
  return Errors.METHOD_NOT_ALLOWED({ code: 'UNHANDLED', message: 'the request method is not served' });
}

/** A complete HTTP/1.1 response with an error envelope, for an engine writing on a raw socket. */
export function rawErrorResponse(err: ApiError): string {
  const body = errorEnvelope(err, newRequestId());
  return (
    `HTTP/1.1 ${statusLine(err.status)}\r\ncontent-type: application/json\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
  );
}
