/**
 * The fabric API's read operations (src/ops/fabric.ts): routers in the fabric's shape, listed with ZitiQL filters
 * and pagination like any list, one by id or 404; links and circuits empty (no data plane), 404 for any id; admins
 * only; writes 405. A connected router's `connected`, `listenerAddresses` and `versionInfo` are checked in
 * test/api/router-control.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userWith } from '../support/api.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

const F = '/fabric/v1';
let srv: TestServer;
let admin: string;
let routerId: string;

beforeAll(async () => {
  srv = await startServer();
  admin = await login(srv.base);
  const created = await call('POST', `${srv.mgmt}/routers`, {
    token: admin,
    body: { name: 'fabric-r1', cost: 7, noTraversal: true, ctrlChanListeners: { tls: ['tls:r1.example:6262'] } },
  });
  expect(created.status, created.text).toBe(201);
  routerId = created.body.data.id;
  for (const name of ['fabric-r2', 'fabric-r3']) {
    expect((await call('POST', `${srv.mgmt}/routers`, { token: admin, body: { name } })).status).toBe(201);
  }
});
afterAll(() => srv.stop());

const get = (path: string, token = admin) => call('GET', `${srv.base}${F}${path}`, { token });

describe('fabric routers', () => {
  it('one by id, in the fabric shape: connected, not isOnline; no enrollment fields', async () => {
    const r = await get(`/routers/${routerId}`);
    expect(r.status, r.text).toBe(200);
    expect(r.body.data).toEqual({
      _links: { self: { href: `./routers/${routerId}` } },
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      id: routerId,
      tags: {},
      name: 'fabric-r1',
      fingerprint: '',
      connected: false,
      cost: 7,
      noTraversal: true,
      disabled: false,
      listenerAddresses: [],
      ctrlChanListeners: { tls: ['tls:r1.example:6262'] },
      configs: [],
    });
    const missing = await get('/routers/no-such-router');
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('NOT_FOUND');
  });

  it('listed with filters, sorting and pagination like any list', async () => {
    const all = await get('/routers?filter=name contains "fabric-" sort by name desc');
    expect(all.status, all.text).toBe(200);
    expect(all.body.data.map((r: { name: string }) => r.name)).toEqual(['fabric-r3', 'fabric-r2', 'fabric-r1']);
    expect(all.body.meta.pagination).toMatchObject({ offset: 0, totalCount: 3 });
    const page = await get('/routers?filter=name contains "fabric-" sort by name&limit=1&offset=1');
    expect(page.body.data.map((r: { name: string }) => r.name)).toEqual(['fabric-r2']);
    expect(page.body.meta.pagination).toMatchObject({ limit: 1, offset: 1, totalCount: 3 });
    const bad = await get('/routers?filter=name ==');
    expect(bad.status).toBe(400);
  });

  it('are read-only here: writes answer 405', async () => {
    const post = await call('POST', `${srv.base}${F}/routers`, { token: admin, body: { name: 'x' } });
    expect(post.status).toBe(405);
    expect(post.body.error.code).toBe('METHOD_NOT_ALLOWED');
    expect((await call('DELETE', `${srv.base}${F}/routers/${routerId}`, { token: admin })).status).toBe(405);
  });
});

describe('fabric links and circuits (no data plane)', () => {
  it('are empty lists, and no id is found', async () => {
    for (const name of ['links', 'circuits']) {
      const list = await get(`/${name}`);
      expect(list.status, list.text).toBe(200);
      expect(list.body.data).toEqual([]);
      expect(list.body.meta.pagination).toMatchObject({ offset: 0, totalCount: 0 });
      const one = await get(`/${name}/some-id`);
      expect(one.status).toBe(404);
      expect(one.body.error.code).toBe('NOT_FOUND');
    }
  });
});

describe('fabric reads: admins only', () => {
  it('refuses anyone else, as every management operation', async () => {
    const user = await userWith(srv.base, admin, 'fabric-user');
    for (const path of ['/routers', `/routers/${routerId}`, '/links', '/circuits']) {
      expect((await get(path, user.token)).status).toBe(401);
      expect((await call('GET', `${srv.base}${F}${path}`)).status).toBe(401);
    }
  });
});
