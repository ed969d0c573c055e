import { describe, expect, it } from 'vitest';
import type { RouteFound, RouteMatch } from './router.js';
import { cleanSegments, Router } from './router.js';
import type { Handler } from './types.js';

const ok = (name: string): Handler => {
  const h: Handler = () => ({ status: 200, body: name });
  Object.defineProperty(h, 'name', { value: name });
  return h;
};

function found<M>(m: RouteMatch<M>): RouteFound<M> {
  if (m.status !== 200) throw new Error(`expected a match, got ${m.status}`);
  return m;
}

const BASE = '/edge/management/v1';

function managementRouter(): Router<{ op: string }> {
  const r = new Router<{ op: string }>();
  r.add('GET', `${BASE}/identities`, ok('listIdentities'), { op: 'listIdentities' });
  r.add('POST', `${BASE}/identities`, ok('createIdentity'), { op: 'createIdentity' });
  r.add('GET', `${BASE}/identities/{id}`, ok('detailIdentity'), { op: 'detailIdentity' });
  r.add('PUT', `${BASE}/identities/{id}`, ok('updateIdentity'), { op: 'updateIdentity' });
  r.add('PATCH', `${BASE}/identities/{id}`, ok('patchIdentity'), { op: 'patchIdentity' });
  r.add('DELETE', `${BASE}/identities/{id}`, ok('deleteIdentity'), { op: 'deleteIdentity' });
  r.add('GET', `${BASE}/identities/{id}/service-policies`, ok('policies'), { op: 'policies' });
  r.add('GET', `${BASE}/identities/{id}/policy-advice/{serviceId}`, ok('advice'), { op: 'advice' });
  r.add('GET', `${BASE}/identity-types`, ok('types'), { op: 'types' });
  r.add('GET', `${BASE}/current-identity`, ok('current'), { op: 'current' });
  r.add('GET', '/edge/client/v1/version', ok('version'), { op: 'version' });
  return r;
}

describe('Router matching', () => {
  const r = managementRouter();

  it('matches static routes and returns meta and pattern', () => {
    const m = found(r.match('GET', `${BASE}/identities`));
    expect(m.meta).toEqual({ op: 'listIdentities' });
    expect(m.pattern).toBe(`${BASE}/identities`);
    expect(m.params).toEqual({});
    expect(found(r.match('POST', `${BASE}/identities`)).meta?.op).toBe('createIdentity');
  });

  it('captures parameters, percent-decoded', () => {
    expect(found(r.match('GET', `${BASE}/identities/abc`)).params).toEqual({ id: 'abc' });
    expect(found(r.match('GET', `${BASE}/identities/a%2Fb%20c`)).params).toEqual({ id: 'a/b c' });
    expect(found(r.match('GET', `${BASE}/identities/%E2%82%AC`)).params).toEqual({ id: '€' });
    // invalid escaping keeps the raw value (Go's PathUnescape error path)
    expect(found(r.match('GET', `${BASE}/identities/bad%zz`)).params).toEqual({ id: 'bad%zz' });
    const advice = found(r.match('GET', `${BASE}/identities/i1/policy-advice/s1`));
    expect(advice.params).toEqual({ id: 'i1', serviceId: 's1' });
  });

  it('prefers a static segment over a parameter', () => {
    const s = new Router();
    s.add('GET', '/a/{id}', ok('param'));
    s.add('GET', '/a/mine', ok('static'));
    expect(found(s.match('GET', '/a/mine')).handler.name).toBe('static');
    expect(found(s.match('GET', '/a/other')).handler.name).toBe('param');
  });

  it('backtracks from a static branch that dead-ends to the parameter branch', () => {
    const s = new Router();
    s.add('GET', '/a/mine/x', ok('static'));
    s.add('GET', '/a/{id}/y', ok('param'));
    expect(found(s.match('GET', '/a/mine/y')).params).toEqual({ id: 'mine' });
    expect(found(s.match('GET', '/a/mine/x')).handler.name).toBe('static');
  });

  it('ignores trailing slashes, repeated slashes and dot segments like path.Clean', () => {
    expect(found(r.match('GET', `${BASE}/identities/`)).meta?.op).toBe('listIdentities');
    expect(found(r.match('GET', '/edge//management/v1//identities')).meta?.op).toBe('listIdentities');
    expect(found(r.match('GET', `${BASE}/./identities/x/../y`)).params).toEqual({ id: 'y' });
    expect(found(r.match('GET', `${BASE}/identities/abc/`)).params).toEqual({ id: 'abc' });
  });

  it('answers 404 for unknown paths', () => {
    expect(r.match('GET', `${BASE}/nope`)).toEqual({ status: 404 });
    expect(r.match('GET', `${BASE}/identities/a/b/c/d`)).toEqual({ status: 404 });
    expect(r.match('GET', '/')).toEqual({ status: 404 });
    // matching is case-sensitive
    expect(r.match('GET', `${BASE}/Identities`)).toEqual({ status: 404 });
    // static segments compare against the escaped form, as go-openapi does
    expect(r.match('GET', `${BASE}/identit%69es`)).toEqual({ status: 404 });
  });

  it('answers 405 with the sorted allowed methods for a known path', () => {
    expect(r.match('POST', `${BASE}/identities/x`)).toEqual({
      status: 405,
      allow: ['DELETE', 'GET', 'PATCH', 'PUT'],
    });
    expect(r.match('DELETE', `${BASE}/identities`)).toEqual({ status: 405, allow: ['GET', 'POST'] });
  });

  it('does not map HEAD onto GET (OpenZiti answers 405)', () => {
    expect(r.match('HEAD', '/edge/client/v1/version')).toEqual({ status: 405, allow: ['GET'] });
    const s = new Router();
    s.add('HEAD', '/x', ok('head'));
    expect(found(s.match('HEAD', '/x')).handler.name).toBe('head');
  });

  it('matches the root pattern', () => {
    const s = new Router();
    s.add('GET', '/', ok('root'));
    expect(found(s.match('GET', '/')).handler.name).toBe('root');
    expect(found(s.match('GET', '//')).handler.name).toBe('root');
  });

  it('lists routes in registration order with their meta', () => {
    const routes = r.routes();
    expect(routes.length).toBe(11);
    expect(routes[0]).toEqual({ method: 'GET', pattern: `${BASE}/identities`, meta: { op: 'listIdentities' } });
    expect(routes.map((x) => x.meta?.op)).toContain('advice');
  });
});

describe('Router registration', () => {
  it('rejects duplicates, bad params and composite segments', () => {
    const r = new Router();
    r.add('get', '/x/{id}', ok('a'));
    expect(() => r.add('GET', '/x/{id}', ok('b'))).toThrow(/conflicts/);
    expect(() => r.add('GET', '/x/{name}/', ok('b'))).toThrow(/conflicts/);
    expect(() => r.add('GET', '/y/{a}/{a}', ok('b'))).toThrow(/duplicate/);
    expect(() => r.add('GET', '/y/{a}.json', ok('b'))).toThrow(/whole segment/);
    expect(() => r.add('GET', '/y/{}', ok('b'))).toThrow(/invalid parameter/);
    expect(() => r.add('GET', 'y', ok('b'))).toThrow(/start with/);
    expect(() => r.add('G ET', '/z', ok('b'))).toThrow(/invalid method/);
    // same shape with another method and another parameter name is fine
    r.add('DELETE', '/x/{name}', ok('c'));
    expect(found(r.match('DELETE', '/x/1')).params).toEqual({ name: '1' });
    expect(found(r.match('GET', '/x/1')).params).toEqual({ id: '1' });
  });
});

describe('cleanSegments', () => {
  it('splits and cleans', () => {
    expect(cleanSegments('/')).toEqual([]);
    expect(cleanSegments('')).toEqual([]);
    expect(cleanSegments('/a/b/')).toEqual(['a', 'b']);
    expect(cleanSegments('a//b/./c/..')).toEqual(['a', 'b']);
    expect(cleanSegments('/../a')).toEqual(['a']);
  });

  it('refuses absurdly deep paths', () => {
    expect(cleanSegments('/a'.repeat(65))).toBeNull();
    expect(cleanSegments('/a'.repeat(64))?.length).toBe(64);
  });
});

describe('Router scale', () => {
  it('matches among ~260 routes without scanning them (trie)', () => {
    const r = new Router();
    const entities = Array.from({ length: 40 }, (_, i) => `entity-${i}`);
    for (const e of entities) {
      r.add('GET', `${BASE}/${e}`, ok(`list-${e}`));
      r.add('POST', `${BASE}/${e}`, ok(`create-${e}`));
      r.add('GET', `${BASE}/${e}/{id}`, ok(`detail-${e}`));
      r.add('PUT', `${BASE}/${e}/{id}`, ok(`update-${e}`));
      r.add('PATCH', `${BASE}/${e}/{id}`, ok(`patch-${e}`));
      r.add('DELETE', `${BASE}/${e}/{id}`, ok(`delete-${e}`));
      r.add('GET', `${BASE}/${e}/{id}/things`, ok(`things-${e}`));
    }
    expect(r.routes().length).toBe(280);
    for (const e of entities) {
      expect(found(r.match('PATCH', `${BASE}/${e}/42`)).handler.name).toBe(`patch-${e}`);
      expect(found(r.match('GET', `${BASE}/${e}/42/things`)).params).toEqual({ id: '42' });
    }
    // A lookup walks segments, not routes: among these 280 routes it costs about what it costs among the 7 of one
    // entity (a scan would cost ~40×). Compared in the same run rather than against a wall-clock bound, which a
    // loaded machine can miss: rounds alternate between the two routers and the best round of each counts (the
    // first rounds warm the JIT, a preempted round does not count).
    const one = new Router();
    for (const route of r.routes().filter((x) => x.pattern.includes('/entity-39/') || x.pattern.endsWith('/entity-39')))
      one.add(route.method, route.pattern, ok('x'));
    expect(one.routes().length).toBe(7);
    const best_ms = [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY];
    for (let round = 0; round < 8; round++) {
      const router = round % 2 === 0 ? one : r;
      const started = performance.now();
      for (let i = 0; i < 10_000; i++) router.match('GET', `${BASE}/entity-39/${i}`);
      best_ms[round % 2] = Math.min(best_ms[round % 2]!, performance.now() - started);
    }
    const [among7_ms, among280_ms] = best_ms as [number, number];
    expect(
      among280_ms,
      `${among280_ms.toFixed(1)} ms among 280 routes, ${among7_ms.toFixed(1)} ms among 7`,
    ).toBeLessThan(4 * among7_ms);
  });
});
