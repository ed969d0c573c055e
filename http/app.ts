// The engine-independent request pipeline:
//   CORS preflight → body limit → path rewrite → route (404/405) → handler (with timeout)
//   → envelope for errors → default + CORS headers.
// `dispatch` returns synchronously when the handler does, so an engine can answer without a
// microtask hop; `handle` is the always-async form for tests and simple callers.
import { CORS_RESPONSE_HEADERS, corsOptionsResponse, hasOrigin } from './cors.js';
import { Deadline, DeadlineQueue } from './deadlines.js';
import { DEFAULT_MAX_URL_BYTES, uriTooLong } from './edge.js';
import { ApiError, Errors, errorResponse } from './errors.js';
import { decodePath } from './request.js';
import { MAX_ROUTES, type Router } from './router.js';
import type { HttpHeaders, HttpRequest, HttpResponse } from './types.js';

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;
/** setTimeout's ceiling (the handler timeouts' timer is one). */
const MAX_TIMEOUT_MS = 2_147_483_647;

export interface AppOptions {
  router: Router<any>;
  /** Largest accepted request body (default 1 MiB); larger → 413 REQUEST_ENTITY_TOO_LARGE. */
  maxBodyBytes?: number;
  /** Time a handler may take (default 10 000 ms); longer → 503 TIMEOUT. */
  requestTimeout_ms?: number;
  /** Maps the still-escaped request path to the path that is routed (e.g. '/version' → '/edge/client/v1/version'). */
  rewritePath?: (path: string) => string;
  /** Headers put on every response, errors and preflights included (e.g. server, ziti-instance-id). */
  defaultHeaders?: Record<string, string>;
  /** Called for every thrown value that is not an ApiError (it becomes a 500 UNHANDLED). */
  onError?: (err: unknown, req: HttpRequest) => void;
  /** OpenZiti's CORS behaviour (default on). */
  cors?: boolean;
  /** Longest request target (path + query as sent) served (default 64 KiB); longer → 414 URI_TOO_LONG. */
  maxUrlBytes?: number;
}

export interface App {
  readonly router: Router<any>;
  readonly maxBodyBytes: number;
  readonly maxUrlBytes: number;
  readonly requestTimeout_ms: number;
  /**
   * Runs the pipeline; never rejects. The returned `headers` object may be frozen and shared
   * between responses: copy it before changing it.
   */
  handle(req: HttpRequest): Promise<HttpResponse>;
  /** Same as `handle`, but synchronous when the handler is; never throws, never rejects. */
  dispatch(req: HttpRequest): HttpResponse | Promise<HttpResponse>;
  /**
   * `dispatch` answering through `done`, called exactly once: before this returns when the handler is synchronous,
   * else when it settles or times out. No promise of its own, no extra microtask (the engines' hot path).
   */
  dispatchTo(req: HttpRequest, done: (res: HttpResponse) => void): void;
  /** The final response for an error raised by an engine (413 before reading, overload...). */
  reject(err: ApiError, req: HttpRequest): HttpResponse;
  /** Responses answered since the app was made, indexed by HTTP status (100–599): what `/metrics` reports. */
  readonly responseCounts: Float64Array;
  /** The response times of requests that carry `receivedAt_ms`, as a histogram over RESPONSE_TIME_BOUNDS_MS. */
  readonly responseTimes: ResponseTimes;
  /** The responses of the requests that matched a route, per route (its slot) and status class. */
  readonly routeStats: RouteStats;
}

/** Per route (the router's slot), the responses by status class and their time (see RouteStats' fields). */
export interface RouteStats {
  /** `counts[slot * ROUTE_STATUS_CLASSES + c]`: responses of class c (0: 1xx–2xx, 1: 3xx, 2: 4xx, 3: 5xx). */
  readonly counts: Float64Array;
  /** `sum_ms[slot]`: the sum of those responses' times (requests carrying `receivedAt_ms`), in ms. */
  readonly sum_ms: Float64Array;
  /** `timed[slot]`: how many responses `sum_ms[slot]` sums. */
  readonly timed: Float64Array;
}

/** The status classes RouteStats counts per route. */
export const ROUTE_STATUS_CLASSES = 4;
export const ROUTE_STATUS_CLASS_NAMES: readonly string[] = Object.freeze(['2xx', '3xx', '4xx', '5xx']);

/** responseCounts' length: one slot per status code up to 599. */
const STATUS_SLOTS = 600;

/** Upper bounds (inclusive, ms) of the response-time histogram's buckets; a last bucket holds the slower ones. */
export const RESPONSE_TIME_BOUNDS_MS: readonly number[] = Object.freeze([
  0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000,
]);

/** Response times: `counts[i]` responses took at most RESPONSE_TIME_BOUNDS_MS[i] (and more than the bound before). */
export interface ResponseTimes {
  /** One slot per bound, then one for the slower responses. */
  readonly counts: Float64Array;
  /** `sum_ms[0]`: the sum of every response time counted, in ms. */
  readonly sum_ms: Float64Array;
}

/** A handler's pending response, until it settles or its timeout answers. */
class Pending extends Deadline {
  constructor(
    readonly req: HttpRequest,
    readonly done: (res: HttpResponse) => void,
  ) {
    super();
  }
}

function isPromiseLike(v: unknown): v is PromiseLike<HttpResponse> {
  return typeof v === 'object' && v !== null && typeof (v as PromiseLike<unknown>).then === 'function';
}

function isResponse(v: unknown): v is HttpResponse {
  if (typeof v !== 'object' || v === null) return false;
  const status = (v as HttpResponse).status;
  return Number.isInteger(status) && status >= 100 && status <= 599;
}

export function createApp(opts: AppOptions): App {
  const router = opts.router;
  const maxBodyBytes = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const timeout_ms = opts.requestTimeout_ms ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const rewritePath = opts.rewritePath;
  const onError = opts.onError;
  const cors = opts.cors ?? true;
  const maxUrlBytes = opts.maxUrlBytes ?? DEFAULT_MAX_URL_BYTES;
  if (!Number.isSafeInteger(maxUrlBytes) || maxUrlBytes < 1) throw new RangeError('maxUrlBytes must be >= 1');
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 0) throw new RangeError('maxBodyBytes must be >= 0');
  if (!Number.isInteger(timeout_ms) || timeout_ms <= 0 || timeout_ms > MAX_TIMEOUT_MS) {
    throw new RangeError(`requestTimeout_ms must be in 1..${MAX_TIMEOUT_MS}`);
  }
  const defaults: [string, string][] = [];
  for (const [name, value] of Object.entries(opts.defaultHeaders ?? {})) {
    if (typeof value !== 'string') throw new TypeError(`defaultHeaders.${name} must be a string`);
    defaults.push([name.toLowerCase(), value]);
  }

  function report(err: unknown, req: HttpRequest): void {
    if (onError === undefined) return;
    try {
      onError(err, req);
    } catch {
      // a failing logger must not turn into a failed response
    }
  }

  /** defaults, then CORS headers, then the handler's own (names lower-cased; later wins). */
  function merge(own: HttpHeaders | undefined, withCors: boolean): HttpHeaders {
    const headers: HttpHeaders = {};
    for (let i = 0; i < defaults.length; i++) {
      const d = defaults[i]!;
      headers[d[0]] = d[1];
    }
    if (withCors) Object.assign(headers, CORS_RESPONSE_HEADERS);
    if (own !== undefined) {
      for (const name in own) headers[name.toLowerCase()] = own[name]!;
    }
    return headers;
  }

  // Merged header sets for frozen header objects (dataEnvelope's, errorResponse's, a handler's
  // constants) are computed once and shared: the hot path allocates no header object.
  const mergedPlain = new WeakMap<HttpHeaders, HttpHeaders>();
  const mergedCors = new WeakMap<HttpHeaders, HttpHeaders>();
  const defaultsPlain = Object.freeze(merge(undefined, false));
  const defaultsCors = Object.freeze(merge(undefined, true));

  function headersFor(own: HttpHeaders | undefined, withCors: boolean): HttpHeaders {
    if (own === undefined) return withCors ? defaultsCors : defaultsPlain;
    if (!Object.isFrozen(own)) return merge(own, withCors);
    const cache = withCors ? mergedCors : mergedPlain;
    let headers = cache.get(own);
    if (headers === undefined) {
      headers = Object.freeze(merge(own, withCors));
      cache.set(own, headers);
    }
    return headers;
  }

  const responseCounts = new Float64Array(STATUS_SLOTS);
  const responseTimes: ResponseTimes = {
    counts: new Float64Array(RESPONSE_TIME_BOUNDS_MS.length + 1),
    sum_ms: new Float64Array(1),
  };
  // sized for every route the router can hold: no growth, no bounds to check on the hot path
  const routeStats: RouteStats = {
    counts: new Float64Array(MAX_ROUTES * ROUTE_STATUS_CLASSES),
    sum_ms: new Float64Array(MAX_ROUTES),
    timed: new Float64Array(MAX_ROUTES),
  };

  /** Counts a response that took `took_ms` (a linear scan: 15 buckets, most responses fall in the first few). */
  function timed(took_ms: number): void {
    let i = 0;
    while (i < RESPONSE_TIME_BOUNDS_MS.length && took_ms > RESPONSE_TIME_BOUNDS_MS[i]!) i++;
    responseTimes.counts[i]!++;
    responseTimes.sum_ms[0]! += took_ms;
  }

  /** Adds default and CORS headers; turns anything that is not a response into a 500. Counts the response. */
  function finish(req: HttpRequest, res: HttpResponse): HttpResponse {
    if (!isResponse(res)) {
      report(new TypeError(`handler for ${req.method} ${req.path} returned an invalid response`), req);
      res = errorResponse(Errors.UNHANDLED(), req.requestId);
    }
    responseCounts[res.status]!++;
    const slot = req.routeSlot ?? -1;
    if (slot >= 0) {
      const c = res.status < 300 ? 0 : res.status < 400 ? 1 : res.status < 500 ? 2 : 3;
      routeStats.counts[slot * ROUTE_STATUS_CLASSES + c]!++;
    }
    if (req.receivedAt_ms !== undefined) {
      const took_ms = performance.now() - req.receivedAt_ms;
      timed(took_ms);
      if (slot >= 0) {
        routeStats.sum_ms[slot]! += took_ms;
        routeStats.timed[slot]!++;
      }
    }
    const withCors = cors && req.method !== 'OPTIONS' && hasOrigin(req.headers);
    const out: HttpResponse = { status: res.status, headers: headersFor(res.headers, withCors) };
    if (res.body !== undefined) out.body = res.body;
    return out;
  }

  function fromThrown(err: unknown, req: HttpRequest): HttpResponse {
    if (err instanceof ApiError) return errorResponse(err, req.requestId);
    report(err, req);
    return errorResponse(Errors.UNHANDLED(), req.requestId);
  }

  // every handler's timeout, one timer for all (DeadlineQueue): the response is a 503 TIMEOUT when it expires first
  const timeouts = new DeadlineQueue<Pending>(timeout_ms, (p) => {
    p.done(finish(p.req, errorResponse(Errors.TIMEOUT(), p.req.requestId)));
  });

  /** Answers `pending` through `done`: its response, its error's envelope, or 503 TIMEOUT, whichever comes first. */
  function watch(req: HttpRequest, pending: PromiseLike<HttpResponse>, done: (res: HttpResponse) => void): void {
    const p = new Pending(req, done);
    timeouts.add(p);
    pending.then(
      (res) => {
        // false: the timeout answered already
        if (timeouts.cancel(p)) done(finish(req, res));
      },
      (err: unknown) => {
        if (timeouts.cancel(p)) done(finish(req, fromThrown(err, req)));
        else if (!(err instanceof ApiError)) report(err, req);
      },
    );
  }

  function dispatch(req: HttpRequest): HttpResponse | Promise<HttpResponse> {
    const out = route(req);
    if (!isPromiseLike(out)) return out;
    return new Promise<HttpResponse>((resolve) => watch(req, out, resolve));
  }

  function dispatchTo(req: HttpRequest, done: (res: HttpResponse) => void): void {
    const out = route(req);
    if (isPromiseLike(out)) watch(req, out, done);
    else done(out);
  }

  /** The pipeline up to the handler: the final response when it is synchronous, else the handler's promise. */
  function route(req: HttpRequest): HttpResponse | PromiseLike<HttpResponse> {
    try {
      // a valid request target is ASCII: one character per byte
      if (req.rawPath.length + req.rawQuery.length > maxUrlBytes) {
        return finish(req, errorResponse(uriTooLong(maxUrlBytes), req.requestId));
      }
      if (cors && req.method === 'OPTIONS') return finish(req, corsOptionsResponse(req.headers));
      if (req.body.length > maxBodyBytes) {
        return finish(req, errorResponse(Errors.REQUEST_ENTITY_TOO_LARGE(), req.requestId));
      }
      let path = req.rawPath;
      if (rewritePath !== undefined) {
        path = rewritePath(path);
        if (typeof path !== 'string') throw new TypeError('rewritePath must return a string');
      }
      req.path = decodePath(path);
      const m = router.match(req.method, path);
      if (m.status === 404) {
        const cause = { code: 'UNHANDLED', message: `path ${path} was not found` };
        return finish(req, errorResponse(Errors.NOT_FOUND(cause), req.requestId));
      }
      if (m.status === 405) {
        const cause = {
          code: 'UNHANDLED',
          message: `method ${req.method} is not allowed, but [${m.allow.join(',')}] are`,
        };
        const err = Errors.METHOD_NOT_ALLOWED(cause, { headers: { allow: m.allow.join(', ') } });
        return finish(req, errorResponse(err, req.requestId));
      }
      req.params = m.params;
      req.routeSlot = m.slot;
      const out = m.handler(req);
      if (isPromiseLike(out)) return out;
      return finish(req, out);
    } catch (err) {
      return finish(req, fromThrown(err, req));
    }
  }

  return {
    router,
    maxBodyBytes,
    maxUrlBytes,
    requestTimeout_ms: timeout_ms,
    dispatch,
    dispatchTo,
    handle: (req) => Promise.resolve(dispatch(req)),
    reject: (err, req) => finish(req, errorResponse(err, req.requestId)),
    responseCounts,
    responseTimes,
    routeStats,
  };
}
