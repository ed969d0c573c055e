// Small pieces both engines share: status lines, headers an engine owns, address text, limits.
import { STATUS_CODES } from 'node:http';
import type { HttpHeaders, HttpResponse } from '../types.js';

/** Default bound on concurrent connections (node) / in-flight requests (uWS). */
export const DEFAULT_MAX_CONNECTIONS = 4096;

/** Response headers the engine computes itself; a handler's values for them are dropped. */
const ENGINE_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection', 'date', 'keep-alive']);

export function isEngineHeader(lowerName: string): boolean {
  return ENGINE_HEADERS.has(lowerName);
}

const NO_PAIRS: readonly string[] = Object.freeze([]);
const pairCache = new WeakMap<HttpHeaders, readonly string[]>();

function toPairs(headers: HttpHeaders): string[] {
  const out: string[] = [];
  for (const name in headers) {
    if (isEngineHeader(name)) continue;
    const value = headers[name]!;
    if (Array.isArray(value)) for (const v of value) out.push(name, String(v));
    else out.push(name, String(value));
  }
  return out;
}

/**
 * `[name, value, name, value, ...]` to write, engine-owned headers removed. Computed once per
 * frozen header object (the app shares those between responses).
 */
export function headerPairs(headers: HttpHeaders | undefined): readonly string[] {
  if (headers === undefined) return NO_PAIRS;
  if (!Object.isFrozen(headers)) return toPairs(headers);
  let pairs = pairCache.get(headers);
  if (pairs === undefined) {
    pairs = Object.freeze(toPairs(headers));
    pairCache.set(headers, pairs);
  }
  return pairs;
}

const STATUS_LINES: string[] = [];
for (let code = 100; code <= 599; code++) STATUS_LINES[code] = `${code} ${STATUS_CODES[code] ?? 'Unknown'}`;

/** `'200 OK'` for 200; precomputed for 100..599. */
export function statusLine(status: number): string {
  const line = STATUS_LINES[status];
  if (line === undefined) throw new RangeError(`invalid HTTP status ${status}`);
  return line;
}

export function bodyBytes(body: HttpResponse['body']): number {
  if (body === undefined) return 0;
  return typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
}

export function validateMaxConnections(value: number | undefined): number {
  const max = value ?? DEFAULT_MAX_CONNECTIONS;
  if (!Number.isSafeInteger(max) || max < 1) throw new RangeError('maxConnections must be a positive integer');
  return max;
}

/** Text form of a 4- or 16-byte address; IPv4-mapped IPv6 becomes dotted IPv4, IPv6 is compressed. */
export function formatAddress(bytes: Uint8Array): string {
  if (bytes.length === 4) return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
  if (bytes.length !== 16) return '';
  let mapped = bytes[10] === 0xff && bytes[11] === 0xff;
  for (let i = 0; i < 10 && mapped; i++) if (bytes[i] !== 0) mapped = false;
  if (mapped) return `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i]! << 8) | bytes[i + 1]!);
  // longest run (>= 2) of zero groups is written as '::'
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart === -1) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

/** Node reports IPv4 clients of a dual-stack socket as '::ffff:a.b.c.d'. */
export function normalizeAddress(address: string | undefined): string {
  if (address === undefined) return '';
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}
