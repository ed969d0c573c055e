// The node:http / node:https engine: slower than uWS but it can ask for client certificates
// (mTLS), which uWS cannot report. `peerCertificates` carries the DER chain, leaf first.
//
// `maxConnections` bounds open connections: a connection beyond it is still read, but each of its
// requests is answered 429 SERVER_TOO_MANY_REQUESTS with `Connection: close`; past twice the
// bound new sockets are dropped outright. Header, request and keep-alive timeouts close slow clients.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer, Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { DetailedPeerCertificate, TLSSocket } from 'node:tls';
import type { App } from '../app.js';
import {
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_HEADERS_TIMEOUT_MS,
  DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  DEFAULT_MAX_HEADER_BYTES,
  headersTooLarge,
  MAX_DISCARD_BYTES,
  methodNotServed,
  rawErrorResponse,
  requestTimeout,
} from '../edge.js';
import { Errors } from '../errors.js';
import { addHeaderLine, IncomingRequest, newHeaderRecord } from '../request.js';
import type { HttpHeaders, HttpRequest, HttpResponse, HttpServer } from '../types.js';
import { BodyCollector, bodyLength } from './body.js';
import { bodyBytes, isEngineHeader, normalizeAddress, validateMaxConnections } from './common.js';

export interface NodeTlsOptions {
  key: string | Buffer;
  cert: string | Buffer;
  ca?: string | Buffer | (string | Buffer)[];
  /** Ask the client for a certificate; it is optional and not verified here (the controller does that). */
  requestCert?: boolean;
  /** Refuse clients whose certificate does not chain to `ca` (default false: the app decides). */
  rejectUnauthorized?: boolean;
}

export interface NodeServeOptions {
  host: string;
  /** 0 = ephemeral. */
  port: number;
  tls?: NodeTlsOptions;
  /** Bound on open connections (see the file comment); default 4096. */
  maxConnections?: number;
  /** Called when writing a response fails unexpectedly (the connection is then destroyed). */
  onError?: (err: unknown) => void;
  /** Request line and headers must arrive within this time (default 10 s); else 408 and close. */
  headersTimeout_ms?: number;
  /** The whole request, body included, must arrive within this time (default 30 s); else 408 and close. */
  requestTimeout_ms?: number;
  /** Idle keep-alive connections are closed after this time (default 5 s). */
  keepAliveTimeout_ms?: number;
  /** Bound on the request line plus headers (default 80 KiB); beyond → 431 and close. */
  maxHeaderBytes?: number;
}

/** Longest certificate chain walked from the peer certificate. */
const MAX_CHAIN_LENGTH = 16;
/** How long a rejected upload may keep streaming into the void before its socket is destroyed. */
const DRAIN_AFTER_REJECT_MS = 1_000;
/** How often node checks the header and request timeouts (its default, 30 s, would stretch them). */
const TIMEOUT_CHECK_INTERVAL_MS = 500;

/** node:http's clientError codes Keel answers with an envelope. */
function clientErrorResponse(code: string | undefined, limits: { headers_bytes: number; request_ms: number }) {
  if (code === 'HPE_HEADER_OVERFLOW') return rawErrorResponse(headersTooLarge(limits.headers_bytes));
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return rawErrorResponse(requestTimeout(limits.request_ms));
  if (code === 'HPE_INVALID_METHOD') return rawErrorResponse(methodNotServed());
  return 'HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n';
}

/**
 * The origin-form of a request target: an absolute-form target (`http://host/path?q`, RFC 9112 §3.2.2, which
 * a server must accept) loses its scheme and authority.
 */
export function originForm(url: string): string {
  if (url.charCodeAt(0) === 0x2f) return url; // '/'
  const scheme = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//.exec(url);
  if (scheme === null) return url;
  const rest = url.slice(scheme[0].length);
  const cut = rest.search(/[/?]/);
  if (cut === -1) return '/';
  return rest[cut] === '?' ? `/${rest.slice(cut)}` : rest.slice(cut);
}

const OVER_LIMIT = Symbol('keel.overLimit');
const PEER_CHAIN = Symbol('keel.peerChain');
type TrackedSocket = Socket & { [OVER_LIMIT]?: boolean; [PEER_CHAIN]?: Buffer[] | null };

function peerChain(socket: TLSSocket & TrackedSocket): Buffer[] | undefined {
  const cached = socket[PEER_CHAIN];
  if (cached !== undefined) return cached ?? undefined;
  const chain: Buffer[] = [];
  let cert: DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
  const seen = new Set<string>();
  while (cert !== undefined && cert.raw !== undefined && chain.length < MAX_CHAIN_LENGTH) {
    if (seen.has(cert.fingerprint256)) break;
    seen.add(cert.fingerprint256);
    chain.push(cert.raw);
    const issuer: DetailedPeerCertificate | undefined = cert.issuerCertificate;
    if (issuer === undefined || issuer === cert) break;
    cert = issuer;
  }
  socket[PEER_CHAIN] = chain.length > 0 ? chain : null;
  return chain.length > 0 ? chain : undefined;
}

function collectHeaders(raw: string[]): Record<string, string> {
  const out = newHeaderRecord();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    addHeaderLine(out, raw[i]!.toLowerCase(), raw[i + 1]!);
  }
  return out;
}

/** Statuses that never carry a body (nor a content-length). */
function bodiless(status: number): boolean {
  return status === 204 || status === 304 || status < 200;
}

function toNodeHeaders(
  headers: HttpHeaders | undefined,
  contentLength: number | null,
  close: boolean,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  if (headers !== undefined) {
    for (const name in headers) {
      if (isEngineHeader(name)) continue;
      const value = headers[name]!;
      out[name] = Array.isArray(value) ? value.map(String) : String(value);
    }
  }
  if (contentLength !== null) out['content-length'] = String(contentLength);
  if (close) out.connection = 'close';
  return out;
}

/** node:http's server options for Keel's timeouts and header bound (documented in docs/http.md, Limits). */
export function nodeServerOptions(opts: NodeServeOptions) {
  const headers_ms = opts.headersTimeout_ms ?? DEFAULT_HEADERS_TIMEOUT_MS;
  const request_ms = opts.requestTimeout_ms ?? DEFAULT_BODY_TIMEOUT_MS;
  const keepAlive_ms = opts.keepAliveTimeout_ms ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS;
  const headers_bytes = opts.maxHeaderBytes ?? DEFAULT_MAX_HEADER_BYTES;
  for (const [name, v] of Object.entries({ headers_ms, request_ms, keepAlive_ms, headers_bytes })) {
    if (!Number.isSafeInteger(v) || v < 1) throw new RangeError(`node engine: ${name} must be a positive integer`);
  }
  if (headers_ms > request_ms) throw new RangeError('node engine: headersTimeout_ms must not exceed requestTimeout_ms');
  return {
    headersTimeout: headers_ms,
    requestTimeout: request_ms,
    keepAliveTimeout: keepAlive_ms,
    connectionsCheckingInterval: Math.min(TIMEOUT_CHECK_INTERVAL_MS, headers_ms),
    maxHeaderSize: headers_bytes,
  };
}

export function serveNode(app: App, opts: NodeServeOptions): Promise<HttpServer> {
  const maxConnections = validateMaxConnections(opts.maxConnections);
  const tls = opts.tls;
  let open = 0;
  /** Per connection, its exchanges whose answers are not finished yet (pipelined ones finish in order). */
  const unanswered = new WeakMap<Socket, Array<{ nreq: IncomingMessage; nres: ServerResponse }>>();

  function fail(nres: ServerResponse, err: unknown): void {
    try {
      opts.onError?.(err);
    } catch {
      // ignore a failing logger
    }
    nres.destroy();
  }

  function send(nres: ServerResponse, out: HttpResponse, close: boolean): void {
    if (nres.writableEnded || nres.destroyed) return;
    try {
      const none = bodiless(out.status);
      const body = none ? undefined : out.body;
      nres.writeHead(out.status, toNodeHeaders(out.headers, none ? null : bodyBytes(body), close));
      if (body === undefined) nres.end();
      else nres.end(body);
    } catch (err) {
      fail(nres, err);
    }
  }

  /**
   * Reads and throws away the rest of an oversize body (at most MAX_DISCARD_BYTES in all), then answers and
   * closes: a client still sending reads the 413 instead of a reset. Past the bound it answers at once.
   */
  function discardThenReject(nreq: IncomingMessage, nres: ServerResponse, out: HttpResponse, received_bytes: number) {
    let discarded_bytes = received_bytes;
    nreq.removeAllListeners('data');
    nreq.removeAllListeners('end');
    if (nreq.complete) {
      send(nres, out, true);
      return;
    }
    const announced = bodyLength(collectHeaders(nreq.rawHeaders));
    if (announced.kind === 'fixed' && announced.bytes > MAX_DISCARD_BYTES) {
      rejectEarly(nreq, nres, out);
      return;
    }
    nreq.on('data', (chunk: Buffer) => {
      discarded_bytes += chunk.length;
      if (discarded_bytes > MAX_DISCARD_BYTES) rejectEarly(nreq, nres, out);
    });
    nreq.on('end', () => send(nres, out, true));
    nreq.resume();
  }

  /** Answers before the body is read, then lets the client's upload drain for a bounded time. */
  function rejectEarly(nreq: IncomingMessage, nres: ServerResponse, out: HttpResponse): void {
    send(nres, out, true);
    nreq.removeAllListeners('data');
    nreq.resume();
    const timer = setTimeout(() => nreq.socket.destroy(), DRAIN_AFTER_REJECT_MS);
    timer.unref();
    nreq.socket.once('close', () => clearTimeout(timer));
  }

  /** Dispatches to the app and sends its answer (App.dispatchTo: the handler's timeout included, no rejection). */
  function respond(nres: ServerResponse, req: HttpRequest): void {
    app.dispatchTo(req, (out) => send(nres, out, false));
  }

  function onRequest(nreq: IncomingMessage, nres: ServerResponse): void {
    nreq.on('error', () => {
      // client went away mid-request; nothing to answer
    });
    const socket = nreq.socket as TrackedSocket;
    // the exchanges not answered yet: a malformed request read behind them is answered after them (clientError);
    // each leaves the list when its answer is done, so an idle connection holds no request (nor its body)
    let pending = unanswered.get(socket);
    if (pending === undefined) unanswered.set(socket, (pending = []));
    const exchange = { nreq, nres };
    pending.push(exchange);
    const done = () => {
      const i = pending.indexOf(exchange);
      if (i !== -1) pending.splice(i, 1);
    };
    nres.once('finish', done);
    nres.once('close', done);
    const headers = collectHeaders(nreq.rawHeaders);
    const req = new IncomingRequest({
      method: nreq.method ?? 'GET',
      url: originForm(nreq.url ?? '/'),
      headers,
      remoteAddress: normalizeAddress(socket.remoteAddress),
    });
    if (tls?.requestCert) {
      const chain = peerChain(socket as TLSSocket & TrackedSocket);
      if (chain !== undefined) req.peerCertificates = chain;
    }

    if (socket[OVER_LIMIT] === true) {
      rejectEarly(nreq, nres, app.reject(Errors.SERVER_TOO_MANY_REQUESTS(), req));
      return;
    }
    const framing = bodyLength(headers);
    if (framing.kind === 'none') {
      respond(nres, req);
      return;
    }
    if (framing.kind === 'invalid') {
      rejectEarly(nreq, nres, app.reject(Errors.COULD_NOT_PARSE_BODY(), req));
      return;
    }
    if (framing.kind === 'fixed' && framing.bytes > app.maxBodyBytes) {
      discardThenReject(nreq, nres, app.reject(Errors.REQUEST_ENTITY_TOO_LARGE(), req), 0);
      return;
    }

    const collector = new BodyCollector(app.maxBodyBytes, framing.kind === 'fixed' ? framing.bytes : null);
    let rejected = false;
    nreq.on('data', (chunk: Buffer) => {
      if (rejected) return;
      if (!collector.push(chunk)) {
        rejected = true;
        const out = app.reject(Errors.REQUEST_ENTITY_TOO_LARGE(), req);
        // a body in too many pieces is answered at once: draining it would cost what refusing it saves
        if (collector.tooManyPieces) rejectEarly(nreq, nres, out);
        else discardThenReject(nreq, nres, out, collector.receivedBytes + chunk.length);
      }
    });
    nreq.on('end', () => {
      if (rejected || nres.destroyed) return;
      req.body = collector.finish();
      respond(nres, req);
    });
  }

  const serverOptions = nodeServerOptions(opts);
  const headers_bytes = serverOptions.maxHeaderSize;
  const request_ms = serverOptions.requestTimeout;
  const headers_ms = serverOptions.headersTimeout;
  const server = tls
    ? createHttpsServer(
        {
          ...serverOptions,
          key: tls.key,
          cert: tls.cert,
          ...(tls.ca !== undefined ? { ca: tls.ca } : {}),
          requestCert: tls.requestCert ?? false,
          rejectUnauthorized: tls.rejectUnauthorized ?? false,
          // a handshake gets the time headers get (Node's default is 120 s): a silent socket is not held longer
          handshakeTimeout: headers_ms,
        },
        onRequest,
      )
    : createHttpServer(serverOptions, onRequest);
  // A client announcing a body over the limit and waiting for `100 Continue` gets the 413 instead: it then
  // does not send the body at all. (Without this listener node sends `100 Continue` to everyone.)
  server.on('checkContinue', (nreq: IncomingMessage, nres: ServerResponse) => {
    const framing = bodyLength(collectHeaders(nreq.rawHeaders));
    if (framing.kind === 'fixed' && framing.bytes > app.maxBodyBytes) {
      const req = new IncomingRequest({ method: nreq.method ?? 'POST', url: originForm(nreq.url ?? '/') });
      rejectEarly(nreq, nres, app.reject(Errors.REQUEST_ENTITY_TOO_LARGE(), req));
      return;
    }
    nres.writeContinue();
    onRequest(nreq, nres);
  });
  // Past twice the bound new sockets are dropped at once. (Not with `server.maxConnections`: on Node 20 setting
  // it stops the header and request timeouts from firing, which would let trickling clients hold every slot.)
  // Every socket counts here from its first byte: on HTTPS before its handshake is done (a client that connects and
  // never completes it holds a socket too, until handshakeTimeout), on HTTP the same sockets as `open`.
  let sockets = 0;
  server.on('connection', (socket: Socket) => {
    if (sockets >= maxConnections * 2) {
      socket.destroy();
      return;
    }
    sockets++;
    socket.once('close', () => {
      sockets--;
    });
  });
  server.on(tls ? 'secureConnection' : 'connection', (socket: TrackedSocket) => {
    if (socket.destroyed) return;
    open++;
    if (open > maxConnections) socket[OVER_LIMIT] = true;
    socket.once('close', () => {
      open--;
    });
  });
  const refuse = (socket: Socket, response: string) => {
    if (socket.destroyed) return;
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    socket.end(response);
    // a client that keeps its side open (still trickling) is cut off after a short grace
    setTimeout(() => socket.destroy(), DRAIN_AFTER_REJECT_MS).unref();
  };
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    const response = clientErrorResponse(err.code, { headers_bytes, request_ms });
    // A malformed request pipelined behind one still being answered: that answer goes out first, then this one
    // (as Go's server answers: it reads the next request only after the last answer). Refused at once, the
    // answer to a write already made would be lost with the connection, and the client told a success failed.
    // (An exchange whose request is still incomplete is the one the error is about: a timeout, a bad chunk; the
    // answers owed are those of the complete requests before it, the last of which finishes last.)
    const owed = (unanswered.get(socket) ?? []).filter((e) => e.nreq.complete);
    const pending = owed.length > 0 ? owed[owed.length - 1]!.nres : undefined;
    if (pending !== undefined && !pending.writableFinished && !pending.destroyed) {
      const later = () => refuse(socket, response);
      pending.once('finish', later);
      pending.once('close', () => {
        if (!pending.writableFinished) socket.destroy();
      });
      return;
    }
    refuse(socket, response);
  });
  // node hands CONNECT to this event and, without a listener, closes the socket with no answer
  server.on('connect', (_req: IncomingMessage, socket: Socket) => refuse(socket, rawErrorResponse(methodNotServed())));

  return new Promise<HttpServer>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      const address = server.address();
      if (address === null || typeof address === 'string') {
        reject(new Error('node engine: listening socket has no port'));
        return;
      }
      let closing: Promise<void> | null = null;
      resolve({
        engine: 'node',
        port: address.port,
        ...(tls && server instanceof HttpsServer
          ? { setTrustedCas: (ca: string[]) => server.setSecureContext({ key: tls.key, cert: tls.cert, ca }) }
          : {}),
        close: () => {
          if (closing === null) {
            closing = new Promise<void>((done) => {
              server.close(() => done());
              server.closeAllConnections();
            });
          }
          return closing;
        },
      });
    });
  });
}
