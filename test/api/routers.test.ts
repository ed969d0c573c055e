/**
 * Routers (`/routers` and the deprecated `/transit-routers`: one collection, every edge router included) and
 * terminators: every operation through the conformance helper, the enrollment data a router carries until it
 * enrolls, the shared fields of an edge router and its router row, reference checks, cascades, permissions.
 */
import { importJWK, type JWK, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, ids, userWith } from '../support/api.js';
import { conformant, ownOperations } from '../support/conformance.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let token: string;
const M = 'management' as const;

beforeAll(async () => {
  srv = await startServer();
  token = await login(srv.base);
});
afterAll(async () => {
  const { served, missing } = ownOperations('test/api/routers.test.ts', srv.ctl.ops);
  await srv.stop();
  expect(served.length).toBe(18);
  expect(missing).toEqual([]);
});

async function create(path: string, body: unknown, t = token): Promise<string> {
  const r = await conformant(M, 'POST', path, srv.base, { token: t, body });
  expect(r.status, r.text).toBe(201);
  return r.body.data.id;
}
const get = (path: string, t = token) => call('GET', `${srv.mgmt}${path}`, { token: t });
const detail = async (path: string, id: string) => {
  const r = await conformant(M, 'GET', `${path}/{id}`, srv.base, { token, params: { id } });
  expect(r.status, r.text).toBe(200);
  return r.body.data;
};

async function verifiedClaims(jwt: string) {
  const keys = (await call('GET', `${srv.client}/enroll/jwks`)).body.keys as JWK[];
  return (await jwtVerify(jwt, await importJWK(keys[0]!, 'ES256'))).payload;
}

describe('routers and transit routers', () => {
  it('CRUD on both paths; a new router carries a trott enrollment JWT until it enrolls', async () => {
    const id = await create('/transit-routers', {
      name: 'tr-1',
      cost: 7,
      noTraversal: true,
      ctrlChanListeners: { 'tls:ctl:6262': ['default'] },
      tags: { a: 1 },
    });
    for (const path of ['/routers', '/transit-routers']) {
      const d = await detail(path, id);
      expect(d).toMatchObject({
        name: 'tr-1',
        cost: 7,
        noTraversal: true,
        disabled: false,
        ctrlChanListeners: { 'tls:ctl:6262': ['default'] },
        fingerprint: '',
        isVerified: false,
        isOnline: false,
        unverifiedFingerprint: null,
        tags: { a: 1 },
      });
      expect(d.enrollmentToken).toMatch(/^[0-9a-f-]{36}$/);
      const claims = await verifiedClaims(d.enrollmentJwt);
      expect(claims).toMatchObject({ em: 'trott', sub: id, jti: d.enrollmentToken });
      expect(claims.exp).toBe(Math.floor(Date.parse(d.enrollmentExpiresAt) / 1000));
      expect(Date.parse(d.enrollmentExpiresAt) - Date.parse(d.enrollmentCreatedAt)).toBe(180 * 60 * 1000);
    }
    const other = await create('/routers', { name: 'r-2' });
    const list = await conformant(M, 'GET', '/routers', srv.base, {
      token,
      query: 'filter=name%20contains%20%22r-%22',
    });
    expect(ids(list)).toEqual([id, other].sort());
    expect(ids(await conformant(M, 'GET', '/transit-routers', srv.base, { token }))).toEqual(
      expect.arrayContaining([id, other]),
    );
    const put = await conformant(M, 'PUT', '/routers/{id}', srv.base, {
      token,
      params: { id },
      body: { name: 'tr-1b', disabled: true },
    });
    expect(put.status, put.text).toBe(200);
    // PUT resets what it leaves out
    expect(await detail('/routers', id)).toMatchObject({ name: 'tr-1b', disabled: true, cost: 0, noTraversal: false });
    const put2 = await conformant(M, 'PUT', '/transit-routers/{id}', srv.base, {
      token,
      params: { id },
      body: { name: 'tr-1c', cost: 3 },
    });
    expect(put2.status, put2.text).toBe(200);
    for (const path of ['/routers/{id}', '/transit-routers/{id}']) {
      const p = await conformant(M, 'PATCH', path, srv.base, { token, params: { id }, body: { noTraversal: true } });
      expect(p.status, p.text).toBe(200);
    }
    expect(await detail('/transit-routers', id)).toMatchObject({ name: 'tr-1c', cost: 3, noTraversal: true });
    expect((await conformant(M, 'DELETE', '/routers/{id}', srv.base, { token, params: { id } })).status).toBe(200);
    expect(
      (await conformant(M, 'DELETE', '/transit-routers/{id}', srv.base, { token, params: { id: other } })).status,
    ).toBe(200);
    expectError(await get(`/routers/${id}`), 404, 'NOT_FOUND');
  });

  it('errors: name required and unique across edge routers, cost bounds, router configs only, unknown ids', async () => {
    expectError(await call('POST', `${srv.mgmt}/routers`, { token, body: { cost: 1 } }), 400, 'COULD_NOT_VALIDATE');
    expectError(
      await call('POST', `${srv.mgmt}/routers`, { token, body: { name: ' ' } }),
      400,
      'COULD_NOT_VALIDATE',
      'name',
    );
    expectError(
      await call('POST', `${srv.mgmt}/routers`, { token, body: { name: 'x', cost: 70000 } }),
      400,
      'COULD_NOT_VALIDATE',
    );
    await create('/edge-routers', { name: 'er-taken' });
    expectError(
      await call('POST', `${srv.mgmt}/routers`, { token, body: { name: 'er-taken' } }),
      400,
      'COULD_NOT_VALIDATE',
      'name',
    );
    await create('/routers', { name: 'tr-taken' });
    expectError(
      await call('POST', `${srv.mgmt}/edge-routers`, { token, body: { name: 'tr-taken' } }),
      400,
      'COULD_NOT_VALIDATE',
      'name',
    );
    // nothing half-applied: no edge router without its router row
    expect(ids(await get(`/edge-routers?filter=${encodeURIComponent('name = "tr-taken"')}`))).toEqual([]);
    const svcType = (await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'svc-only.v1' } })).body.data
      .id;
    const svcConfig = await create('/configs', { name: 'svc-cfg', configTypeId: svcType, data: {} });
    expectError(
      await call('POST', `${srv.mgmt}/routers`, { token, body: { name: 'cfg', configs: [svcConfig] } }),
      400,
      'COULD_NOT_VALIDATE',
      'configs',
    );
    const rType = (await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'r.v1', target: 'router' } }))
      .body.data.id;
    const rConfig = await create('/configs', { name: 'r-cfg', configTypeId: rType, data: {} });
    const withCfg = await create('/routers', { name: 'cfg', configs: [rConfig, rConfig] });
    expect((await detail('/routers', withCfg)).configs).toEqual([rConfig]);
    expectError(
      await call('POST', `${srv.mgmt}/routers`, { token, body: { name: 'nocfg', configs: ['nope'] } }),
      400,
      'COULD_NOT_VALIDATE',
      'configs',
    );
    for (const [method, body] of [
      ['GET', undefined],
      ['PUT', { name: 'x' }],
      ['PATCH', { name: 'x' }],
      ['DELETE', undefined],
    ] as const) {
      expectError(
        await conformant(M, method, '/transit-routers/{id}', srv.base, { token, params: { id: 'nope' }, body }),
        404,
        'NOT_FOUND',
      );
    }
    // Keel's bounds: 100 configs, 100 listeners of 100 addresses each
    expectError(
      await call('POST', `${srv.mgmt}/routers`, {
        token,
        body: { name: 'many', configs: Array.from({ length: 101 }, () => rConfig) },
      }),
      400,
      'COULD_NOT_VALIDATE',
      'configs',
    );
    const listeners = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`tls:h${i}:1`, ['g']]));
    expect(
      (await call('POST', `${srv.mgmt}/routers`, { token, body: { name: 'l100', ctrlChanListeners: listeners(100) } }))
        .status,
    ).toBe(201);
    for (const ctrlChanListeners of [listeners(101), { 'tls:h:1': Array.from({ length: 101 }, () => 'g') }]) {
      expectError(
        await call('POST', `${srv.mgmt}/routers`, { token, body: { name: 'l101', ctrlChanListeners } }),
        400,
        'COULD_NOT_VALIDATE',
        'ctrlChanListeners',
      );
    }
    // fields the server sets are not writable: ignored, as go-swagger ignores unknown properties
    const ignored = await call('PATCH', `${srv.mgmt}/routers/${withCfg}`, {
      token,
      body: { isVerified: true, fingerprint: 'ff', enrollmentToken: null },
    });
    expect(ignored.status, ignored.text).toBe(200);
    expect(await detail('/routers', withCfg)).toMatchObject({ isVerified: false, fingerprint: '' });
    expect((await detail('/routers', withCfg)).enrollmentToken).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('an edge router is a router: listed, with an erott enrollment, its shared fields kept in step both ways', async () => {
    const er = await create('/edge-routers', { name: 'edge-a', cost: 5, isTunnelerEnabled: true, tags: { t: 1 } });
    const asRouter = await detail('/routers', er);
    expect(asRouter).toMatchObject({ name: 'edge-a', cost: 5, isVerified: false, isOnline: false, tags: { t: 1 } });
    const edge = await detail('/edge-routers', er);
    expect(edge).toMatchObject({ isOnline: false, isVerified: false, supportedProtocols: {}, fingerprint: '' });
    expect(edge.enrollmentJwt).toBe(asRouter.enrollmentJwt);
    expect(await verifiedClaims(edge.enrollmentJwt)).toMatchObject({ em: 'erott', sub: er, jti: edge.enrollmentToken });
    // edge side → router side
    await call('PATCH', `${srv.mgmt}/edge-routers/${er}`, { token, body: { name: 'edge-b', noTraversal: true } });
    expect(await detail('/routers', er)).toMatchObject({ name: 'edge-b', noTraversal: true, cost: 5 });
    // router side → edge side (and the tunneler's Router identity keeps the name)
    const p = await conformant(M, 'PATCH', '/routers/{id}', srv.base, {
      token,
      params: { id: er },
      body: { name: 'edge-c', cost: 9 },
    });
    expect(p.status, p.text).toBe(200);
    expect(await detail('/edge-routers', er)).toMatchObject({ name: 'edge-c', cost: 9, noTraversal: true });
    expect((await get(`/identities/${er}`)).body.data.name).toBe('edge-c');
    // its Router identity goes with the router: not deleted nor retyped on its own (OpenZiti's identity store)
    const idPath = `${srv.mgmt}/identities/${er}`;
    expectError(await call('DELETE', idPath, { token }), 400, 'ENTITY_CAN_NOT_BE_DELETED');
    expectError(await call('PATCH', idPath, { token, body: { type: 'Device' } }), 400, 'ENTITY_CAN_NOT_BE_UPDATED');
    expect((await get(`/identities/${er}`)).body.data.type).toMatchObject({ name: 'Router' });
    expect((await call('PATCH', idPath, { token, body: { type: 'Router', roleAttributes: ['r'] } })).status).toBe(200);
    // deleting the router deletes the edge router, its Router identity and its system policy
    expect((await call('DELETE', `${srv.mgmt}/routers/${er}`, { token })).status).toBe(200);
    expectError(await get(`/edge-routers/${er}`), 404, 'NOT_FOUND');
    expectError(await get(`/identities/${er}`), 404, 'NOT_FOUND');
    expectError(await get(`/edge-router-policies/${er}`), 404, 'NOT_FOUND');
    // and deleting an edge router deletes its router row
    const er2 = await create('/edge-routers', { name: 'edge-d' });
    expect((await call('DELETE', `${srv.mgmt}/edge-routers/${er2}`, { token })).status).toBe(200);
    expectError(await get(`/routers/${er2}`), 404, 'NOT_FOUND');
  });
});

describe('terminators', () => {
  let service: string;
  let router: string;
  beforeAll(async () => {
    service = await create('/services', { name: 'term-svc', encryptionRequired: true });
    router = await create('/routers', { name: 'term-router' });
  });

  it('CRUD: service, router, binding, address, identity, cost, precedence, dynamicCost; the secret is never shown', async () => {
    const id = await create('/terminators', {
      service,
      router,
      binding: 'transport',
      address: 'tcp:localhost:2020',
      identity: 'host-1',
      identitySecret: 'c2VjcmV0',
      cost: 10,
      precedence: 'required',
      tags: { k: 'v' },
    });
    const d = await detail('/terminators', id);
    expect(d).toMatchObject({
      serviceId: service,
      service: { id: service, name: 'term-svc', entity: 'services' },
      routerId: router,
      router: { id: router, name: 'term-router' },
      binding: 'transport',
      address: 'tcp:localhost:2020',
      identity: 'host-1',
      cost: 10,
      precedence: 'required',
      dynamicCost: 0,
      tags: { k: 'v' },
    });
    expect(JSON.stringify(d)).not.toContain('c2VjcmV0');
    const byService = await conformant(M, 'GET', '/terminators', srv.base, {
      token,
      query: `filter=${encodeURIComponent(`service = "${service}" and binding = "transport"`)}`,
    });
    expect(ids(byService)).toEqual([id]);
    // PUT: the service stays (set on create only), the rest is replaced, precedence and cost back to defaults
    const other = await create('/services', { name: 'term-svc-2', encryptionRequired: true });
    const router2 = await create('/routers', { name: 'term-router-2' });
    const put = await conformant(M, 'PUT', '/terminators/{id}', srv.base, {
      token,
      params: { id },
      body: { service: other, router: router2, binding: 'edge', address: 'hosted:x' },
    });
    expect(put.status, put.text).toBe(200);
    expect(await detail('/terminators', id)).toMatchObject({
      serviceId: service,
      routerId: router2,
      binding: 'edge',
      address: 'hosted:x',
      identity: 'host-1',
      cost: 0,
      precedence: 'default',
    });
    const patch = await conformant(M, 'PATCH', '/terminators/{id}', srv.base, {
      token,
      params: { id },
      body: { cost: 3, precedence: 'failed' },
    });
    expect(patch.status, patch.text).toBe(200);
    expect(await detail('/terminators', id)).toMatchObject({ cost: 3, precedence: 'failed', binding: 'edge' });
    expect((await conformant(M, 'DELETE', '/terminators/{id}', srv.base, { token, params: { id } })).status).toBe(200);
    expectError(await get(`/terminators/${id}`), 404, 'NOT_FOUND');
  });

  it('errors: unknown service or router (400 naming the field), required fields, bounds, unknown ids', async () => {
    const base = { service, router, binding: 'transport', address: 'tcp:a:1' };
    const post = (body: unknown) => conformant(M, 'POST', '/terminators', srv.base, { token, body });
    expectError(await post({ ...base, service: 'nope' }), 400, 'COULD_NOT_VALIDATE', 'service');
    expectError(await post({ ...base, router: 'nope' }), 400, 'COULD_NOT_VALIDATE', 'router');
    expectError(await post({ ...base, binding: undefined }), 400, 'COULD_NOT_VALIDATE');
    expectError(await post({ ...base, address: '' }), 400, 'COULD_NOT_VALIDATE', 'address');
    expectError(await post({ ...base, cost: 65536 }), 400, 'COULD_NOT_VALIDATE');
    expectError(await post({ ...base, precedence: 'first' }), 400, 'COULD_NOT_VALIDATE');
    expectError(await post({ ...base, identitySecret: 'not base64!' }), 400, 'COULD_NOT_VALIDATE', 'identitySecret');
    expectError(await post({ ...base, address: 'x'.repeat(1025) }), 400, 'COULD_NOT_VALIDATE');
    expectError(await post({ ...base, identitySecret: 'A'.repeat(1028) }), 400, 'COULD_NOT_VALIDATE');
    expect((await post({ ...base, address: 'x'.repeat(1024), identitySecret: 'A'.repeat(1024) })).status).toBe(201);
    const id = await create('/terminators', base);
    expectError(
      await conformant(M, 'PATCH', '/terminators/{id}', srv.base, { token, params: { id }, body: { router: 'nope' } }),
      400,
      'COULD_NOT_VALIDATE',
      'router',
    );
    expectError(
      await conformant(M, 'PUT', '/terminators/{id}', srv.base, { token, params: { id }, body: { service, router } }),
      400,
      'COULD_NOT_VALIDATE',
    );
    for (const [method, body] of [
      ['GET', undefined],
      ['PUT', base],
      ['PATCH', { cost: 1 }],
      ['DELETE', undefined],
    ] as const) {
      expectError(
        await conformant(M, method, '/terminators/{id}', srv.base, { token, params: { id: 'nope' }, body }),
        404,
        'NOT_FOUND',
      );
    }
    // nothing half-applied: the failed writes left the terminator as it was
    expect(await detail('/terminators', id)).toMatchObject({ routerId: router, address: 'tcp:a:1' });
  });

  it('deleting a service, a router or an edge router deletes their terminators', async () => {
    const s2 = await create('/services', { name: 'cascade-svc', encryptionRequired: true });
    const r2 = await create('/routers', { name: 'cascade-router' });
    const er = await create('/edge-routers', { name: 'cascade-edge' });
    const t = (svcId: string, routerId: string) =>
      create('/terminators', { service: svcId, router: routerId, binding: 'edge', address: 'a' });
    const bySvc = await t(s2, router);
    const byRouter = await t(service, r2);
    const byEdge = await t(service, er);
    const kept = await t(service, router);
    await call('DELETE', `${srv.mgmt}/services/${s2}`, { token });
    await call('DELETE', `${srv.mgmt}/routers/${r2}`, { token });
    await call('DELETE', `${srv.mgmt}/edge-routers/${er}`, { token });
    for (const gone of [bySvc, byRouter, byEdge]) expectError(await get(`/terminators/${gone}`), 404, 'NOT_FOUND');
    expect((await get(`/terminators/${kept}`)).status).toBe(200);
  });

  it('permissions: terminator and router (and their .read / .create forms) grant exactly their entity', async () => {
    const cases = [
      { perm: 'terminator', path: '/terminators', body: { service, router, binding: 'b', address: 'a' } },
      { perm: 'router', path: '/routers', body: { name: 'perm-router' } },
      { perm: 'router', path: '/transit-routers', body: { name: 'perm-router-2' } },
    ];
    const nobody = (await userWith(srv.base, token, 'rt-nobody')).token;
    const readonly = (await userWith(srv.base, token, 'rt-readonly', { permissions: ['admin_readonly'] })).token;
    for (const [i, { perm, path, body }] of cases.entries()) {
      const full = (await userWith(srv.base, token, `rt-full-${i}`, { permissions: [perm] })).token;
      const reader = (await userWith(srv.base, token, `rt-read-${i}`, { permissions: [`${perm}.read`] })).token;
      const creator = (await userWith(srv.base, token, `rt-create-${i}`, { permissions: [`${perm}.create`] })).token;
      const id = await create(path, body, full);
      expect((await get(`${path}/${id}`, reader)).status).toBe(200);
      expect((await get(path, readonly)).status).toBe(200);
      expectError(await get(path, nobody), 401, 'UNAUTHORIZED');
      expectError(
        await call('PATCH', `${srv.mgmt}${path}/${id}`, { token: reader, body: { tags: {} } }),
        401,
        'UNAUTHORIZED',
      );
      expectError(await call('DELETE', `${srv.mgmt}${path}/${id}`, { token: creator }), 401, 'UNAUTHORIZED');
      expect((await call('DELETE', `${srv.mgmt}${path}/${id}`, { token: full })).status).toBe(200);
      expect((await call('POST', `${srv.mgmt}${path}`, { token: creator, body })).status).toBe(201);
      const other = perm === 'router' ? cases[0]! : cases[1]!;
      expectError(
        await call('POST', `${srv.mgmt}${other.path}`, { token: creator, body: other.body }),
        401,
        'UNAUTHORIZED',
      );
    }
    // the service's terminator list needs `terminator` (read), not `service`
    const svcReader = (await userWith(srv.base, token, 'rt-svc-reader', { permissions: ['service.read'] })).token;
    expectError(await get(`/services/${service}/terminators`, svcReader), 401, 'UNAUTHORIZED');
    const termReader = (await userWith(srv.base, token, 'rt-term-reader', { permissions: ['terminator.read'] })).token;
    expect((await get(`/services/${service}/terminators`, termReader)).status).toBe(200);
  });
});
