// The concrete HttpRequest the engines build: the query, the JSON body and the request id are
// computed on first use, so a request that never needs them never pays for them.
import { parseJsonBody } from './json-body.js';
import { newRequestId } from './request-id.js';
import type { HttpRequest } from './types.js';

export const EMPTY_BODY: Buffer = Buffer.alloc(0);
const NO_PARAMS: Record<string, string> = Object.freeze(Object.create(null)) as Record<string, string>;
const UNPARSED = Symbol('unparsed');

export interface RequestInit {
  method: string;
  /** Request target as received: path plus optional `?query`. Ignored when `rawPath` is given. */
  url?: string;
  rawPath?: string;
  rawQuery?: string;
  /** Lower-cased names (use `headersFrom` to normalise). */
  headers?: Record<string, string>;
  body?: Buffer;
  remoteAddress?: string;
  /** Computes the remote address on first read (uWS: reading it costs an ArrayBuffer). */
  remoteAddressResolver?: () => string;
  peerCertificates?: Buffer[];
  requestId?: string;
}

/** Percent-decodes like Go's `url.PathUnescape`, returning the input when it is not valid escaping. */
export function decodePath(raw: string): string {
  if (raw.indexOf('%') === -1) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/**
 * Header records inherit nothing (no `constructor`, no `__proto__` setter) yet stay in V8's fast
 * property mode, which `Object.create(null)` objects do not: the prototype is an empty
 * null-prototype object shared by all of them.
 */
const HeaderBag = function HeaderBag(this: object) {} as unknown as new () => Record<string, string>;
HeaderBag.prototype = Object.create(null);

export function newHeaderRecord(): Record<string, string> {
  return new HeaderBag();
}

/**
 * Adds one header line to a record (`name` lower-cased): a repeated name is joined with ', ', except
 * `content-type`, which keeps its first value, as Node's parser and Go's `Header.Get` (OpenZiti) read it.
 */
export function addHeaderLine(out: Record<string, string>, name: string, value: string): void {
  const prev = out[name];
  if (prev === undefined) out[name] = value;
  else if (name !== 'content-type') out[name] = `${prev}, ${value}`;
}

/** Builds a header record: names lower-cased, repeated lines as `addHeaderLine` adds them. */
export function headersFrom(pairs: Iterable<readonly [string, string]>): Record<string, string> {
  const out = newHeaderRecord();
  for (const [name, value] of pairs) addHeaderLine(out, name.toLowerCase(), value);
  return out;
}

export class IncomingRequest implements HttpRequest {
  method: string;
  path: string;
  rawPath: string;
  rawQuery: string;
  headers: Record<string, string>;
  body: Buffer;
  params: Record<string, string> = NO_PARAMS;
  routeSlot = -1;
  peerCertificates?: Buffer[];
  readonly receivedAt_ms = performance.now();
  private requestIdValue: string | undefined;
  private queryValue: URLSearchParams | undefined;
  private jsonValue: unknown = UNPARSED;
  private remoteAddressValue: string | undefined;
  private remoteAddressResolver: (() => string) | undefined;

  constructor(init: RequestInit) {
    this.method = init.method.toUpperCase();
    let rawPath = init.rawPath;
    let rawQuery = init.rawQuery ?? '';
    if (rawPath === undefined) {
      const url = init.url ?? '/';
      const q = url.indexOf('?');
      rawPath = q === -1 ? url : url.slice(0, q);
      if (q !== -1 && init.rawQuery === undefined) rawQuery = url.slice(q + 1);
    }
    this.rawPath = rawPath;
    this.path = rawPath;
    this.rawQuery = rawQuery;
    this.headers = init.headers ?? newHeaderRecord();
    this.body = init.body ?? EMPTY_BODY;
    this.remoteAddressValue = init.remoteAddress;
    this.remoteAddressResolver = init.remoteAddressResolver;
    if (init.peerCertificates !== undefined) this.peerCertificates = init.peerCertificates;
    this.requestIdValue = init.requestId;
  }

  get remoteAddress(): string {
    if (this.remoteAddressValue === undefined) {
      const resolve = this.remoteAddressResolver;
      this.remoteAddressResolver = undefined;
      let value = '';
      if (resolve !== undefined) {
        try {
          value = resolve();
        } catch {
          // the connection is gone (uWS refuses access to an aborted response)
        }
      }
      this.remoteAddressValue = value;
    }
    return this.remoteAddressValue;
  }

  set remoteAddress(value: string) {
    this.remoteAddressValue = value;
    this.remoteAddressResolver = undefined;
  }

  get requestId(): string {
    if (this.requestIdValue === undefined) this.requestIdValue = newRequestId();
    return this.requestIdValue;
  }

  set requestId(value: string) {
    this.requestIdValue = value;
  }

  get query(): URLSearchParams {
    if (this.queryValue === undefined) this.queryValue = new URLSearchParams(this.rawQuery);
    return this.queryValue;
  }

  set query(value: URLSearchParams) {
    this.queryValue = value;
  }

  json<T = unknown>(): T {
    if (this.jsonValue === UNPARSED) {
      if (this.body.length === 0) {
        this.jsonValue = undefined;
      } else {
        this.jsonValue = parseJsonBody(this.body);
      }
    }
    return this.jsonValue as T;
  }
}

export function createRequest(init: RequestInit): IncomingRequest {
  return new IncomingRequest(init);
}
