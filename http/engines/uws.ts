// The uWebSockets.js engine (default). One uWS app per listener; every route goes to the App.
//
// uWS rules this file follows:
// - the uWS request object is only valid during the route callback: method, url, query,
//   headers and the remote address are copied out before anything else happens;
// - a response not finished inside the callback needs `onAborted`, after which it must not be
//   touched; writes made later are wrapped in `cork` (one syscall for status+headers+body);
// - `onData` chunks are neutered after the callback, so they are copied (BodyCollector);
// - big bodies go out with `tryEnd` + `onWritable` (backpressure) instead of one copying `end`.
//
// uWS exposes no per-connection events, so `maxConnections` bounds the requests in flight
// (reading a body or waiting for an async handler); beyond it a request is answered 429
// SERVER_TOO_MANY_REQUESTS with `Connection: close`.

import type {
  TemplatedApp,
  HttpRequest as UwsRequest,
  HttpResponse as UwsResponse,
  us_listen_socket,
} from '@trufflesuite/uws-js-unofficial';
import uws from '@trufflesuite/uws-js-unofficial';
import type { App } from '../app.js';
import { Deadline, DeadlineQueue } from '../deadlines.js';
import { MAX_DISCARD_BYTES, requestTimeout, UWS_BODY_TIMEOUT_MS } from '../edge.js';
import { Errors } from '../errors.js';
import { addHeaderLine, IncomingRequest, newHeaderRecord } from '../request.js';
import type { HttpResponse, HttpServer } from '../types.js';
import { BodyCollector, uwsBodyLength } from './body.js';
import { bodyBytes, formatAddress, headerPairs, statusLine, validateMaxConnections } from './common.js';

export interface UwsServeOptions {
  host: string;
  /** 0 = ephemeral. */
  port: number;
  /** Bound on requests in flight (see the file comment); default 4096. */
  maxConnections?: number;
  /** Called when writing a response fails unexpectedly (the connection is then closed). */
  onError?: (err: unknown) => void;
  /**
   * A body must be complete within this time of its request's headers (default UWS_BODY_TIMEOUT_MS, 8 s); else 408
   * and close. At most UWS_BODY_TIMEOUT_MS: uWS's own idle timer closes the connection without an answer soon after.
   */
  bodyTimeout_ms?: number;
}

/** Bodies above this size are streamed with backpressure instead of copied by `end`. */
export const UWS_STREAM_THRESHOLD_BYTES = 64 * 1024;

/** State of one response that outlives the route callback; queued on the body timeouts while its body is read. */
class Exchange extends Deadline {
  aborted = false;
  settled = false;
  /** Set while the body is read: what the body timeout answers. */
  res: UwsResponse | null = null;
  req: IncomingRequest | null = null;
  head = false;
}

export function serveUws(app: App, opts: UwsServeOptions): Promise<HttpServer> {
  const maxInFlight = validateMaxConnections(opts.maxConnections);
  const body_ms = opts.bodyTimeout_ms ?? UWS_BODY_TIMEOUT_MS;
  if (!Number.isSafeInteger(body_ms) || body_ms < 1 || body_ms > UWS_BODY_TIMEOUT_MS) {
    throw new RangeError(`uws engine: bodyTimeout_ms must be 1..${UWS_BODY_TIMEOUT_MS}`);
  }
  const server: TemplatedApp = uws.App();
  let inFlight = 0;
  // every body's deadline, one timer for all (DeadlineQueue)
  const bodyTimeouts = new DeadlineQueue<Exchange>(body_ms, (ex) => {
    writeLater(ex.res!, ex, app.reject(requestTimeout(body_ms), ex.req!), ex.head, true);
  });

  /** Registers the abort handler and counts the request as in flight. */
  function begin(res: UwsResponse): Exchange {
    const ex = new Exchange();
    inFlight++;
    res.onAborted(() => {
      ex.aborted = true;
      settle(ex);
    });
    return ex;
  }

  function settle(ex: Exchange): void {
    if (ex.settled) return;
    ex.settled = true;
    bodyTimeouts.cancel(ex);
    inFlight--;
    if (inFlight < 0) throw new Error('uws engine: in-flight count went negative');
  }

  /** Writes status, headers and body. `ex` is null only inside the route callback. */
  function write(res: UwsResponse, ex: Exchange | null, out: HttpResponse, head: boolean, close: boolean): void {
    res.writeStatus(statusLine(out.status));
    const pairs = headerPairs(out.headers);
    for (let i = 0; i < pairs.length; i += 2) res.writeHeader(pairs[i]!, pairs[i + 1]!);
    const body = out.body;
    if (head) {
      // uWS 20.30's endWithoutBody(length) leaves the response open (and aborts the process when
      // the callback returns); write the length ourselves and end without arguments. A HEAD
      // response that wanted `close` keeps the connection: it has no body left to discard.
      res.writeHeader('content-length', String(bodyBytes(body)));
      res.endWithoutBody();
    } else if (body === undefined || out.status === 204 || out.status === 304) {
      // no body; 204/304 must not carry a content-length either (and, as for HEAD, only the
      // argument-less endWithoutBody is safe in this uWS build)
      if (out.status === 204 || out.status === 304) res.endWithoutBody();
      else res.end('', close);
    } else {
      // a string of n UTF-16 units is at most 3n UTF-8 bytes
      const small =
        typeof body === 'string'
          ? body.length * 3 <= UWS_STREAM_THRESHOLD_BYTES
          : body.byteLength <= UWS_STREAM_THRESHOLD_BYTES;
      const bytes = small ? null : typeof body === 'string' ? Buffer.from(body) : body;
      if (bytes === null || close || bytes.byteLength <= UWS_STREAM_THRESHOLD_BYTES) {
        res.end(body, close);
      } else {
        stream(res, ex ?? begin(res), bytes);
        return;
      }
    }
    if (ex !== null) settle(ex);
  }

  /** Sends a big body in as many writes as the socket accepts, resuming on `onWritable`. */
  function stream(res: UwsResponse, ex: Exchange, bytes: Uint8Array): void {
    const total = bytes.byteLength;
    const start = res.getWriteOffset();
    const [, done] = res.tryEnd(bytes, total);
    if (done) {
      settle(ex);
      return;
    }
    res.onWritable((offset) => {
      if (ex.aborted) return true;
      const [ok, finished] = res.tryEnd(bytes.subarray(offset - start), total);
      if (finished) settle(ex);
      return ok;
    });
  }

  /** Last resort for an exception thrown while talking to uWS: drop the connection, keep serving. */
  function fail(res: UwsResponse, ex: Exchange | null, err: unknown): void {
    if (ex !== null) {
      if (ex.aborted) return;
      settle(ex);
    }
    try {
      opts.onError?.(err);
    } catch {
      // ignore a failing logger
    }
    if (ex === null) {
      try {
        // uWS aborts the process if a route callback returns neither responding nor watching aborts
        res.onAborted(() => {});
      } catch {
        // the response was already finished
      }
    }
    try {
      res.close();
    } catch {
      // already gone
    }
  }

  function writeLater(res: UwsResponse, ex: Exchange, out: HttpResponse, head: boolean, close: boolean): void {
    if (ex.aborted || ex.settled) return;
    try {
      res.cork(() => write(res, ex, out, head, close));
    } catch (err) {
      fail(res, ex, err);
    }
  }

  /**
   * Runs the app and sends its answer: inside the route callback (`ex` null) when the handler answers at once,
   * else when it settles (the exchange then watches for an abort).
   */
  function respond(res: UwsResponse, ex: Exchange | null, req: IncomingRequest, head: boolean): void {
    let exchange = ex;
    // true once answered inline, or once dispatchTo returned (from then on answers go through the exchange)
    let answered = false;
    app.dispatchTo(req, (out) => {
      // at once inside the route callback: written directly; later: through the exchange begun below
      if (!answered && exchange === null) write(res, null, out, head, false);
      else writeLater(res, exchange!, out, head, false);
      answered = true;
    });
    if (!answered && exchange === null) exchange = begin(res);
    answered = true;
  }

  /**
   * Answers and closes on the next turn of the event loop, not inside the route callback: there the socket is
   * corked, and this uWS build forgets the close when the same read holds a further request. It parses on with
   * its own framing (the first `content-length`) and routes that request, which a proxy reading the framing
   * otherwise sent as body: request smuggling. Out of the callback `end(…, true)` closes at once; a request uWS
   * parses before then on this connection makes it close the connection, this answer unsent. Answered as to a GET
   * even for HEAD: only end(…, true) closes the connection in this build (a HEAD answer keeps it, and a request
   * smuggled behind would be served); the connection ends after these bytes.
   */
  function refuseLater(res: UwsResponse, out: HttpResponse): void {
    const ex = begin(res);
    setImmediate(() => writeLater(res, ex, out, false, true));
  }

  function onRequest(res: UwsResponse, ureq: UwsRequest): void {
    try {
      handleRequest(res, ureq);
    } catch (err) {
      // only reachable when uWS itself rejects a write; the callback must not throw into uWS
      fail(res, null, err);
    }
  }

  function handleRequest(res: UwsResponse, ureq: UwsRequest): void {
    const headers = newHeaderRecord();
    ureq.forEach((name, value) => {
      addHeaderLine(headers, name, value);
    });
    const req = new IncomingRequest({
      method: ureq.getCaseSensitiveMethod(),
      rawPath: ureq.getUrl(),
      rawQuery: ureq.getQuery() ?? '',
      headers,
      // read on demand: it costs an ArrayBuffer per call, and is valid until the response ends
      remoteAddressResolver: () => formatAddress(new Uint8Array(res.getRemoteAddress())),
    });
    const head = req.method === 'HEAD';

    if (inFlight >= maxInFlight) {
      write(res, null, app.reject(Errors.SERVER_TOO_MANY_REQUESTS(), req), head, true);
      return;
    }
    const framing = uwsBodyLength(headers);
    if (framing.kind === 'none') {
      respond(res, null, req, head);
      return;
    }
    if (framing.kind === 'invalid') {
      refuseLater(res, app.reject(Errors.COULD_NOT_PARSE_BODY(), req));
      return;
    }
    const tooLarge = framing.kind === 'fixed' && framing.bytes > app.maxBodyBytes;
    if (tooLarge && framing.bytes > MAX_DISCARD_BYTES) {
      // refused on the announced length alone: too much to read and throw away. (A client expecting
      // `100 Continue` has had it already: this uWS build writes it before the route runs.)
      write(res, null, app.reject(Errors.REQUEST_ENTITY_TOO_LARGE(), req), head, true);
      return;
    }

    const ex = begin(res);
    ex.res = res;
    ex.req = req;
    ex.head = head;
    bodyTimeouts.add(ex);
    const collector = tooLarge
      ? null
      : new BodyCollector(app.maxBodyBytes, framing.kind === 'fixed' ? framing.bytes : null);
    // An oversize body is read and thrown away (at most MAX_DISCARD_BYTES in all) before the 413, so a client
    // still sending reads the answer instead of a reset; past the bound the 413 goes out at once. (One onData
    // handler: uWS must not have its handler replaced while it runs.)
    let discarded_bytes = tooLarge ? 0 : -1;
    res.onData((chunk, isLast) => {
      if (ex.aborted || ex.settled) return;
      if (discarded_bytes === -1 && collector !== null && !collector.push(new Uint8Array(chunk))) {
        // a body in too many pieces is answered at once (past the discard bound): draining it costs what refusing saves
        discarded_bytes = collector.tooManyPieces ? MAX_DISCARD_BYTES + 1 : collector.receivedBytes;
      }
      if (discarded_bytes !== -1) {
        discarded_bytes += chunk.byteLength;
        if (isLast || discarded_bytes > MAX_DISCARD_BYTES) {
          writeLater(res, ex, app.reject(Errors.REQUEST_ENTITY_TOO_LARGE(), req), head, true);
        }
        return;
      }
      if (!isLast) return;
      // the body arrived in time: from here the app's handler timeout applies
      bodyTimeouts.cancel(ex);
      ex.res = null;
      ex.req = null;
      req.body = collector!.finish();
      respond(res, ex, req, head);
    });
  }

  server.any('/*', onRequest);

  return listenUws(server, opts.host, opts.port);
}

/**
 * Listens with a uWS app and wraps the listen socket as an HttpServer. `close()` stops listening and closes the
 * keep-alive connections too (uWS >= 20.23; in-flight responses get onAborted).
 */
export function listenUws(app: TemplatedApp, host: string, port: number): Promise<HttpServer> {
  return new Promise<HttpServer>((resolve, reject) => {
    app.listen(host, port, (socket: us_listen_socket | false) => {
      if (socket === false) {
        reject(new Error(`uws: cannot listen on ${host}:${port}`));
        return;
      }
      let closed = false;
      resolve({
        engine: 'uws',
        port: uws.us_socket_local_port(socket as never),
        close: async () => {
          if (closed) return;
          closed = true;
          uws.us_listen_socket_close(socket);
          (app as TemplatedApp & { close?: () => void }).close?.();
        },
      });
    });
  });
}
