// The node:http / node:https engine: slower than uWS but it can ask for client certificates
// (mTLS), which uWS cannot report. `peerCertificates` carries the DER chain, leaf first.
//
// `maxConnections` bounds open connections: a connection beyond it is still read, but each of its
// requests is answered 429 SERVER_TOO_MANY_REQUESTS with `Connection: close`; past twice the
// bound node drops new sockets outright (`server.maxConnections`).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { DetailedPeerCertificate, TLSSocket } from 'node:tls';
import type { App } from '../app.js';
import { Errors } from '../errors.js';
import { IncomingRequest, newHeaderRecord } from '../request.js';
import type { HttpHeaders, HttpResponse, HttpServer } from '../types.js';
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
}

/** Longest certificate chain walked from the peer certificate. */
const MAX_CHAIN_LENGTH = 16;
/** How long a rejected upload may keep streaming into the void before its socket is destroyed. */
const DRAIN_AFTER_REJECT_MS = 1_000;

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
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    const prev = out[name];
    out[name] = prev === undefined ? value : `${prev}, ${value}`;
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

export function serveNode(app: App, opts: NodeServeOptions): Promise<HttpServer> {
  const maxConnections = validateMaxConnections(opts.maxConnections);
  const tls = opts.tls;
  let open = 0;

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

  /** Answers before the body is read, then lets the client's upload drain for a bounded time. */
  function rejectEarly(nreq: IncomingMessage, nres: ServerResponse, out: HttpResponse): void {
    send(nres, out, true);
    nreq.removeAllListeners('data');
    nreq.resume();
    const timer = setTimeout(() => nreq.socket.destroy(), DRAIN_AFTER_REJECT_MS);
    timer.unref();
    nreq.socket.once('close', () => clearTimeout(timer));
  }

  function respond(nres: ServerResponse, result: HttpResponse | Promise<HttpResponse>): void {
    if (result instanceof Promise) {
      result.then(
        (out) => send(nres, out, false),
        (err: unknown) => fail(nres, err),
      );
    } else {
      send(nres, result, false);
    }
  }

  function onRequest(nreq: IncomingMessage, nres: ServerResponse): void {
    nreq.on('error', () => {
      // client went away mid-request; nothing to answer
    });
    const socket = nreq.socket as TrackedSocket;
    const headers = collectHeaders(nreq.rawHeaders);
    const req = new IncomingRequest({
      method: nreq.method ?? 'GET',
      url: nreq.url ?? '/',
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
      respond(nres, app.dispatch(req));
      return;
    }
    if (framing.kind === 'invalid') {
      rejectEarly(nreq, nres, app.reject(Errors.COULD_NOT_PARSE_BODY(), req));
      return;
    }
    if (framing.kind === 'fixed' && framing.bytes > app.maxBodyBytes) {
      rejectEarly(nreq, nres, app.reject(Errors.REQUEST_ENTITY_TOO_LARGE(), req));
      return;
    }

    const collector = new BodyCollector(app.maxBodyBytes, framing.kind === 'fixed' ? framing.bytes : null);
    let rejected = false;
    nreq.on('data', (chunk: Buffer) => {
      if (rejected) return;
      if (!collector.push(chunk, true)) {
        rejected = true;
        rejectEarly(nreq, nres, app.reject(Errors.REQUEST_ENTITY_TOO_LARGE(), req));
      }
    });
    nreq.on('end', () => {
      if (rejected || nres.destroyed) return;
      req.body = collector.finish();
      respond(nres, app.dispatch(req));
    });
  }

  const server = tls
    ? createHttpsServer(
        {
          key: tls.key,
          cert: tls.cert,
          ...(tls.ca !== undefined ? { ca: tls.ca } : {}),
          requestCert: tls.requestCert ?? false,
          rejectUnauthorized: tls.rejectUnauthorized ?? false,
        },
        onRequest,
      )
    : createHttpServer(onRequest);
  server.maxConnections = maxConnections * 2;
  server.on(tls ? 'secureConnection' : 'connection', (socket: TrackedSocket) => {
    open++;
    if (open > maxConnections) socket[OVER_LIMIT] = true;
    socket.once('close', () => {
      open--;
    });
  });
  server.on('clientError', (_err, socket: Socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    else socket.destroy();
  });

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
