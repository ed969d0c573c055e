// The engine-independent request/response shapes shared by the router, the app and the engines.

/** One HTTP request as the app and the route handlers see it. */
export interface HttpRequest {
  /** Upper-case method, e.g. `GET`. */
  method: string;
  /** Decoded path without query, after path rewriting (set by the app before the handler runs). */
  path: string;
  /** The path as received on the wire (still percent-encoded), before rewriting. */
  rawPath: string;
  /** Query string without the leading `?` ('' when none). */
  rawQuery: string;
  /** Parsed query (lazily); multi-valued parameters such as `roleFilter` are kept. */
  query: URLSearchParams;
  /** Lower-cased header names; repeated headers joined with ', '. */
  headers: Record<string, string>;
  /** Request body, already limited to `maxBodyBytes`; an empty Buffer when there is none. */
  body: Buffer;
  /** Peer IP address as text. */
  remoteAddress: string;
  /** Per-request shortid (alphabet `0-9a-zA-Z.-`, like OpenZiti's `eid`). */
  requestId: string;
  /** `performance.now()` when the engine took the request (its headers read): where its response time starts. */
  readonly receivedAt_ms?: number;
  /** Path parameters captured from the route pattern (percent-decoded). */
  params: Record<string, string>;
  /** The matched route's slot (Router: its registration index), set by the app; -1 before or without a match. */
  routeSlot?: number;
  /** DER chain of the client certificate, leaf first (node:https engine with `requestCert` only). */
  peerCertificates?: Buffer[];
  /** Parses the body as JSON: `undefined` for an empty body; throws ApiError COULD_NOT_PARSE_BODY. */
  json<T = unknown>(): T;
}

export type HttpHeaders = Record<string, string | string[]>;

/** What a handler returns; the engine writes it as is (plus the app's default/CORS headers). */
export interface HttpResponse {
  status: number;
  headers?: HttpHeaders;
  body?: string | Buffer | Uint8Array;
}

export type Handler = (req: HttpRequest) => HttpResponse | Promise<HttpResponse>;

/** A listening server returned by `serveUws` / `serveNode`. */
export interface HttpServer {
  /** The bound port (the ephemeral one when 0 was asked for). */
  port: number;
  /** Stops listening and closes open connections. */
  close(): Promise<void>;
  engine: 'uws' | 'node';
  /**
   * A TLS listener only (node engine): replaces the CA certificates it names to clients when it asks for a client
   * certificate (and that OpenSSL checks it against), for connections accepted from now on. Throws when a
   * certificate does not load; the listener then keeps the previous list.
   */
  setTrustedCas?(ca: string[]): void;
}
