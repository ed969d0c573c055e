import { describe, expect, it, vi } from 'vitest';
import { type AppOptions, createApp } from './app.js';
import { canonicalHeaderKey, corsOptionsResponse } from './cors.js';
import { ApiError, dataEnvelope, Errors } from './errors.js';
import { createRequest, headersFrom, type RequestInit } from './request.js';
import { newRequestId, REQUEST_ID_ALPHABET } from './request-id.js';
import { Router } from './router.js';
import type { HttpRequest, HttpResponse } from './types.js';

const DEFAULTS = { server: 'ziti-controller/v0.0.0-keel', 'ziti-instance-id': 'inst-1' };

function build(extra: Partial<AppOptions> = {}, setup?: (r: Router) => void) {
  const router = new Router();
  router.add('GET', '/edge/client/v1/version', () => dataEnvelope({ version: 'v1' }));
  router.add('GET', '/edge/client/v1/items/{id}', (req) => dataEnvelope({ id: req.params.id, path: req.path }));
  router.add('POST', '/edge/client/v1/items', (req) => dataEnvelope({ got: req.json() }, undefined, 201));
  router.add('GET', '/edge/client/v1/query', (req) =>
    dataEnvelope({ roles: req.query.getAll('roleFilter'), limit: req.query.get('limit') }),
  );
  setup?.(router);
  return createApp({ router, defaultHeaders: DEFAULTS, ...extra });
}

function req(init: Partial<RequestInit> & { method?: string }): HttpRequest {
  return createRequest({ method: 'GET', ...init });
}

function json(res: HttpResponse): any {
  return JSON.parse(String(res.body));
}

describe('App routing and envelopes', () => {
  it('routes, passes params, adds default headers and keeps the handler body', async () => {
    const app = build();
    const res = await app.handle(req({ url: '/edge/client/v1/items/a%20b?x=1' }));
    expect(res.status).toBe(200);
    expect(res.headers).toEqual({ ...DEFAULTS, 'content-type': 'application/json' });
    expect(json(res)).toEqual({ data: { id: 'a b', path: '/edge/client/v1/items/a b' }, meta: {} });
  });

  it('answers 404 NOT_FOUND with the go-openapi cause, default headers and a request id', async () => {
    const app = build();
    const res = await app.handle(req({ url: '/edge/client/v1/nope' }));
    expect(res.status).toBe(404);
    expect(res.headers).toMatchObject({ ...DEFAULTS, 'content-type': 'application/json' });
    const body = json(res);
    expect(body.error.code).toBe('NOT_FOUND');
    expect(body.error.cause).toEqual({ code: 'UNHANDLED', message: 'path /edge/client/v1/nope was not found' });
    expect(body.error.requestId).toMatch(/^[0-9a-zA-Z.-]{9}$/);
    expect(body.meta).toEqual({ apiEnrollmentVersion: '0.0.1', apiVersion: '0.0.1' });
  });

  it('answers 405 METHOD_NOT_ALLOWED with an Allow header', async () => {
    const app = build();
    const res = await app.handle(req({ method: 'DELETE', url: '/edge/client/v1/items' }));
    expect(res.status).toBe(405);
    expect(res.headers?.allow).toBe('POST');
    const body = json(res);
    expect(body.error.code).toBe('METHOD_NOT_ALLOWED');
    expect(body.error.cause.message).toBe('method DELETE is not allowed, but [POST] are');
  });

  it('applies rewritePath before routing; req.path is the rewritten, decoded path', async () => {
    const app = build({
      rewritePath: (p) => (p === '/' || p === '/version' ? '/edge/client/v1/version' : p),
    });
    for (const url of ['/', '/version', '/edge/client/v1/version']) {
      const res = await app.handle(req({ url }));
      expect(res.status).toBe(200);
      expect(json(res).data.version).toBe('v1');
    }
  });

  it('keeps multi-valued query parameters', async () => {
    const app = build();
    const res = await app.handle(req({ url: '/edge/client/v1/query?roleFilter=%23a&roleFilter=%23b&limit=5' }));
    expect(json(res).data).toEqual({ roles: ['#a', '#b'], limit: '5' });
  });

  it('parses JSON bodies and maps bad JSON to 400 COULD_NOT_PARSE_BODY', async () => {
    const app = build();
    const good = await app.handle(req({ method: 'POST', url: '/edge/client/v1/items', body: Buffer.from('{"a":1}') }));
    expect(good.status).toBe(201);
    expect(json(good).data).toEqual({ got: { a: 1 } });
    const empty = await app.handle(req({ method: 'POST', url: '/edge/client/v1/items' }));
    expect(json(empty).data).toEqual({});
    const bad = await app.handle(req({ method: 'POST', url: '/edge/client/v1/items', body: Buffer.from('{bad') }));
    expect(bad.status).toBe(400);
    const body = json(bad);
    expect(body.error.code).toBe('COULD_NOT_PARSE_BODY');
    expect(body.error.cause.code).toBe('UNHANDLED');
    expect(typeof body.error.cause.message).toBe('string');
  });

  it('rejects bodies above maxBodyBytes with 413', async () => {
    const app = build({ maxBodyBytes: 8 });
    const res = await app.handle(req({ method: 'POST', url: '/edge/client/v1/items', body: Buffer.alloc(9, 32) }));
    expect(res.status).toBe(413);
    expect(json(res).error.code).toBe('REQUEST_ENTITY_TOO_LARGE');
    const fits = await app.handle(req({ method: 'POST', url: '/edge/client/v1/items', body: Buffer.from('{"a":12}') }));
    expect(fits.status).toBe(201);
  });

  it('turns a thrown ApiError into its envelope, keeping its headers', async () => {
    const app = build({}, (r) =>
      r.add('GET', '/auth', () => {
        throw Errors.UNAUTHORIZED(undefined, { headers: { 'www-authenticate': 'zt-session realm="zt-session"' } });
      }),
    );
    const res = await app.handle(req({ url: '/auth' }));
    expect(res.status).toBe(401);
    expect(res.headers?.['www-authenticate']).toBe('zt-session realm="zt-session"');
    expect(res.headers?.server).toBe(DEFAULTS.server);
    expect(json(res).error.code).toBe('UNAUTHORIZED');
  });

  it('turns any other thrown value into 500 UNHANDLED, without the stack, and reports it', async () => {
    const onError = vi.fn();
    const app = build({ onError }, (r) => {
      r.add('GET', '/sync-throw', () => {
        throw new Error('secret internal detail');
      });
      r.add('GET', '/async-throw', async () => {
        throw 'a string';
      });
      r.add('GET', '/bad-return', () => 42 as unknown as HttpResponse);
    });
    for (const url of ['/sync-throw', '/async-throw', '/bad-return']) {
      const res = await app.handle(req({ url }));
      expect(res.status).toBe(500);
      const text = String(res.body);
      expect(JSON.parse(text).error.code).toBe('UNHANDLED');
      expect(JSON.parse(text).error.message).toBe('An unhandled error occurred');
      expect(text).not.toContain('secret');
      expect(text).not.toContain('at ');
    }
    expect(onError).toHaveBeenCalledTimes(3);
    expect((onError.mock.calls[0]![0] as Error).message).toBe('secret internal detail');
    expect((onError.mock.calls[0]![1] as HttpRequest).path).toBe('/sync-throw');
  });

  it('survives an onError hook that throws', async () => {
    const app = build(
      {
        onError: () => {
          throw new Error('logger down');
        },
      },
      (r) =>
        r.add('GET', '/x', () => {
          throw new Error('x');
        }),
    );
    expect((await app.handle(req({ url: '/x' }))).status).toBe(500);
  });

  it('answers 503 TIMEOUT when an async handler is too slow, and ignores its late answer', async () => {
    const onError = vi.fn();
    let release: () => void = () => {};
    const app = build({ requestTimeout_ms: 30, onError }, (r) =>
      r.add('GET', '/slow', () => new Promise<HttpResponse>((resolve) => (release = () => resolve({ status: 200 })))),
    );
    const res = await app.handle(req({ url: '/slow' }));
    expect(res.status).toBe(503);
    expect(json(res).error.code).toBe('TIMEOUT');
    expect(res.headers?.['ziti-instance-id']).toBe('inst-1');
    release();
    await new Promise((r) => setTimeout(r, 5));
    expect(onError).not.toHaveBeenCalled();
  });

  it('dispatch is synchronous for synchronous handlers', () => {
    const app = build();
    const out = app.dispatch(req({ url: '/edge/client/v1/version' }));
    expect(out).not.toBeInstanceOf(Promise);
    expect((out as HttpResponse).status).toBe(200);
  });

  it('dispatchTo answers once: inline for a synchronous handler, later for an async one, or with its timeout', async () => {
    let release: () => void = () => {};
    const app = build({ requestTimeout_ms: 40 }, (r) => {
      r.add('GET', '/async', async () => dataEnvelope({ late: true }));
      r.add('GET', '/slow', () => new Promise<HttpResponse>((resolve) => (release = () => resolve({ status: 200 }))));
      r.add('GET', '/fails', async () => {
        throw Errors.NOT_FOUND();
      });
    });
    const answers: Record<string, HttpResponse[]> = { sync: [], async: [], slow: [], fails: [] };
    app.dispatchTo(req({ url: '/edge/client/v1/version' }), (res) => answers.sync!.push(res));
    expect(answers.sync!.map((r) => r.status)).toEqual([200]); // before dispatchTo returned
    app.dispatchTo(req({ url: '/async' }), (res) => answers.async!.push(res));
    app.dispatchTo(req({ url: '/slow' }), (res) => answers.slow!.push(res));
    app.dispatchTo(req({ url: '/fails' }), (res) => answers.fails!.push(res));
    expect(answers.async).toEqual([]);
    // the timeout's answer comes last (a loaded machine delays timers: wait for it, at most 5 s)
    for (let i = 0; i < 500 && answers.slow!.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(answers.async!.map((r) => json(r).data)).toEqual([{ late: true }]);
    expect(answers.fails!.map((r) => json(r).error.code)).toEqual(['NOT_FOUND']);
    expect(answers.slow!.map((r) => json(r).error.code)).toEqual(['TIMEOUT']);
    release();
    await new Promise((r) => setTimeout(r, 5));
    expect(answers.slow).toHaveLength(1); // the late answer is dropped
  });

  it('lets handler headers override defaults, case-insensitively', async () => {
    const app = build({}, (r) =>
      r.add('GET', '/h', () => ({ status: 204, headers: { Server: 'custom', 'X-A': ['1', '2'] } })),
    );
    const res = await app.handle(req({ url: '/h' }));
    expect(res.headers).toEqual({ server: 'custom', 'ziti-instance-id': 'inst-1', 'x-a': ['1', '2'] });
    expect(res.body).toBeUndefined();
  });

  it('merges per-response header objects afresh and shares merged frozen ones', async () => {
    let n = 0;
    const constant = Object.freeze({ 'x-const': 'c' });
    const app = build({}, (r) => {
      r.add('GET', '/fresh', () => ({ status: 200, headers: { 'x-n': String(++n) } }));
      r.add('GET', '/const', () => ({ status: 200, headers: constant }));
    });
    expect((await app.handle(req({ url: '/fresh' }))).headers?.['x-n']).toBe('1');
    expect((await app.handle(req({ url: '/fresh' }))).headers?.['x-n']).toBe('2');
    const a = await app.handle(req({ url: '/const' }));
    const b = await app.handle(req({ url: '/const' }));
    expect(a.headers).toEqual({ ...DEFAULTS, 'x-const': 'c' });
    expect(a.headers).toBe(b.headers);
    const withOrigin = await app.handle(req({ url: '/const', headers: headersFrom([['Origin', 'https://o']]) }));
    expect(withOrigin.headers?.['access-control-allow-origin']).toBe('*');
    expect(a.headers?.['access-control-allow-origin']).toBeUndefined();
  });

  it('reject() produces a finished error response (used by engines)', () => {
    const app = build();
    const out = app.reject(
      Errors.REQUEST_ENTITY_TOO_LARGE(),
      req({ url: '/x', headers: headersFrom([['Origin', 'https://a']]) }),
    );
    expect(out.status).toBe(413);
    expect(out.headers).toMatchObject({ ...DEFAULTS, 'access-control-allow-origin': '*' });
  });

  it('validates its options', () => {
    const router = new Router();
    expect(() => createApp({ router, requestTimeout_ms: 0 })).toThrow(RangeError);
    expect(() => createApp({ router, maxBodyBytes: -1 })).toThrow(RangeError);
  });
});

describe('App CORS (gorilla/handlers as configured by OpenZiti)', () => {
  const origin = 'https://console.example';

  it('answers a preflight 200 with the allow headers, without touching the router', async () => {
    const app = build();
    const res = await app.handle(
      req({
        method: 'OPTIONS',
        url: '/edge/management/v1/does-not-exist',
        headers: headersFrom([
          ['Origin', origin],
          ['Access-Control-Request-Method', 'PUT'],
          ['Access-Control-Request-Headers', 'content-type, zt-session, accept'],
        ]),
      }),
    );
    expect(res.status).toBe(200);
    expect(res.body).toBeUndefined();
    expect(res.headers).toEqual({
      ...DEFAULTS,
      'access-control-allow-headers': 'Content-Type,Zt-Session',
      'access-control-allow-methods': 'PUT',
      'access-control-allow-credentials': 'true',
      'access-control-allow-origin': '*',
    });
  });

  it('omits Allow-Methods for simple methods and Allow-Headers when none are asked', async () => {
    const app = build();
    const res = await app.handle(
      req({
        method: 'OPTIONS',
        url: '/edge/client/v1/version',
        headers: headersFrom([
          ['Origin', origin],
          ['Access-Control-Request-Method', 'GET'],
        ]),
      }),
    );
    expect(res.status).toBe(200);
    expect(res.headers).toEqual({
      ...DEFAULTS,
      'access-control-allow-credentials': 'true',
      'access-control-allow-origin': '*',
    });
  });

  it('refuses preflights like gorilla: 400 without method, 405 bad method, 403 bad header', async () => {
    const app = build();
    const preflight = (pairs: [string, string][]) =>
      app.handle(req({ method: 'OPTIONS', url: '/x', headers: headersFrom([['Origin', origin], ...pairs]) }));
    const noMethod = await preflight([]);
    expect(noMethod.status).toBe(400);
    expect(noMethod.headers?.['access-control-allow-origin']).toBeUndefined();
    expect((await preflight([['Access-Control-Request-Method', 'TRACE']])).status).toBe(405);
    expect((await preflight([['Access-Control-Request-Method', 'put']])).status).toBe(405);
    const badHeader = await preflight([
      ['Access-Control-Request-Method', 'POST'],
      ['Access-Control-Request-Headers', 'x-evil'],
    ]);
    expect(badHeader.status).toBe(403);
    expect(badHeader.body).toBeUndefined();
  });

  it('answers OPTIONS without Origin 200 with an empty body (gorilla swallows it)', async () => {
    const app = build();
    const res = await app.handle(req({ method: 'OPTIONS', url: '/edge/client/v1/nope' }));
    expect(res.status).toBe(200);
    expect(res.body).toBeUndefined();
    expect(res.headers).toEqual(DEFAULTS);
  });

  it('adds Allow-Origin * and Allow-Credentials to actual responses with Origin, errors included', async () => {
    const app = build();
    const headers = headersFrom([['Origin', origin]]);
    for (const url of ['/edge/client/v1/version', '/edge/client/v1/nope']) {
      const res = await app.handle(req({ url, headers }));
      expect(res.headers?.['access-control-allow-origin']).toBe('*');
      expect(res.headers?.['access-control-allow-credentials']).toBe('true');
    }
    const noOrigin = await app.handle(req({ url: '/edge/client/v1/version' }));
    expect(noOrigin.headers?.['access-control-allow-origin']).toBeUndefined();
  });

  it('with cors off, OPTIONS goes through the router', async () => {
    const app = build({ cors: false });
    const res = await app.handle(
      req({ method: 'OPTIONS', url: '/edge/client/v1/version', headers: headersFrom([['Origin', origin]]) }),
    );
    expect(res.status).toBe(405);
    expect(res.headers?.['access-control-allow-origin']).toBeUndefined();
  });

  it('canonicalises header keys like Go', () => {
    expect(canonicalHeaderKey('zt-session')).toBe('Zt-Session');
    expect(canonicalHeaderKey('CONTENT-TYPE')).toBe('Content-Type');
    expect(canonicalHeaderKey('bad header')).toBe('bad header');
    expect(corsOptionsResponse(headersFrom([['origin', '']])).status).toBe(200);
  });
});

describe('request ids and requests', () => {
  it('are 9 characters of the OpenZiti alphabet and do not repeat', () => {
    const ids = Array.from({ length: 5_000 }, () => newRequestId());
    const bad = ids.filter((id) => id.length !== 9 || [...id].some((c) => !REQUEST_ID_ALPHABET.includes(c)));
    expect(bad).toEqual([]);
    expect(new Set(ids).size).toBe(5_000);
    // every alphabet character shows up (the 6-bit mapping is not biased away from any)
    expect(new Set(ids.join('')).size).toBe(64);
  });

  it('a request id is stable per request and generated lazily', () => {
    const r = createRequest({ method: 'get', url: '/a?b=1' });
    expect(r.method).toBe('GET');
    expect(r.rawPath).toBe('/a');
    expect(r.rawQuery).toBe('b=1');
    expect(r.requestId).toBe(r.requestId);
    expect(createRequest({ method: 'GET', requestId: 'fixed' }).requestId).toBe('fixed');
  });

  it('joins repeated headers and lower-cases names', () => {
    const h = headersFrom([
      ['Authorization', 'Bearer a'],
      ['authorization', 'Bearer b'],
      ['X-Y', '1'],
    ]);
    expect(h.authorization).toBe('Bearer a, Bearer b');
    expect(h['x-y']).toBe('1');
  });

  it('header records inherit nothing, so hostile names are plain keys', () => {
    const h = headersFrom([
      ['__proto__', 'x'],
      ['constructor', 'y'],
      ['toString', 'z'],
    ]);
    const protoKey = ['__', 'proto', '__'].join('');
    expect(h[protoKey]).toBe('x');
    expect(h.constructor).toBe('y');
    expect(h.tostring).toBe('z');
    expect(h.hasownproperty).toBeUndefined();
    expect(Object.keys(h)).toEqual(['__proto__', 'constructor', 'tostring']);
  });

  it('resolves the remote address lazily and once; a failing resolver gives an empty string', () => {
    let calls = 0;
    const r = createRequest({ method: 'GET', remoteAddressResolver: () => `10.0.0.${++calls}` });
    expect(calls).toBe(0);
    expect(r.remoteAddress).toBe('10.0.0.1');
    expect(r.remoteAddress).toBe('10.0.0.1');
    expect(calls).toBe(1);
    const gone = createRequest({
      method: 'GET',
      remoteAddressResolver: () => {
        throw new Error('aborted');
      },
    });
    expect(gone.remoteAddress).toBe('');
  });

  it('json() throws an ApiError and caches the parse', () => {
    const r = createRequest({ method: 'POST', body: Buffer.from('[1,2]') });
    expect(r.json()).toBe(r.json());
    const bad = createRequest({ method: 'POST', body: Buffer.from('nope') });
    expect(() => bad.json()).toThrow(ApiError);
  });
});
