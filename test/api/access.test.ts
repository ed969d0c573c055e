/**
 * Services, edge routers and the three policy types: every operation (CRUD, association lists in both directions,
 * role-attribute listings, the client's service view) through the conformance helper (responses validated against
 * OpenZiti's schemas), their error cases, and the permissions that grant them. The policy semantics end to end are
 * in policies.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, ids, interceptNextWrite, userWith as makeUser } from '../support/api.js';
import { conformant, ownOperations } from '../support/conformance.js';
import { enrolledRouter } from '../support/router-client.js';
import { ADMIN_PASSWORD, call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let token: string;
const M = 'management' as const;
const C = 'client' as const;

beforeAll(async () => {
  srv = await startServer();
  token = await login(srv.base);
});
afterAll(async () => {
  const { served, missing } = ownOperations('test/api/access.test.ts', srv.ctl.ops);
  await srv.stop();
  expect(served.length).toBeGreaterThan(40);
  expect(missing).toEqual([]);
});

async function create(path: string, body: unknown, t = token): Promise<string> {
  const r = await conformant(M, 'POST', path, srv.base, { token: t, body });
  expect(r.status, r.text).toBe(201);
  return r.body.data.id;
}

const get = (path: string, t = token) => call('GET', `${srv.mgmt}${path}`, { token: t });

async function identity(name: string, roleAttributes: string[] = []): Promise<string> {
  const r = await call('POST', `${srv.mgmt}/identities`, {
    token,
    body: { name, type: 'User', isAdmin: false, roleAttributes },
  });
  expect(r.status, r.text).toBe(201);
  return r.body.data.id;
}

/** A non-admin identity with `permissions`, logged in with a password: its token. */
async function userWith(name: string, permissions: string[], roleAttributes: string[] = []): Promise<string> {
  return (await makeUser(srv.base, token, name, { permissions, roleAttributes })).token;
}

async function configOf(name: string, typeId: string, data: unknown): Promise<string> {
  const r = await call('POST', `${srv.mgmt}/configs`, { token, body: { name, configTypeId: typeId, data } });
  expect(r.status, r.text).toBe(201);
  return r.body.data.id;
}

describe('services', () => {
  it('CRUD with configs, role attributes, encryptionRequired (create and PUT only), terminatorStrategy, maxIdleTimeMillis', async () => {
    const anyType = (await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'any.v1' } })).body.data
      .id as string;
    const cfg = await configOf('web-intercept', anyType, { a: 1 });
    const id = await create('/services', {
      name: 'web',
      encryptionRequired: false,
      roleAttributes: ['web', 'public', 'web'],
      configs: [cfg],
      terminatorStrategy: 'weighted',
      maxIdleTimeMillis: 5000,
      tags: { team: 'a' },
    });
    const detail = await conformant(M, 'GET', '/services/{id}', srv.base, { token, params: { id } });
    expect(detail.body.data).toMatchObject({
      name: 'web',
      encryptionRequired: false,
      roleAttributes: ['web', 'public'],
      configs: [cfg],
      terminatorStrategy: 'weighted',
      maxIdleTimeMillis: 5000,
      tags: { team: 'a' },
    });
    const other = await create('/services', { name: 'db', encryptionRequired: true });
    const defaults = (await get(`/services/${other}`)).body.data;
    expect(defaults).toMatchObject({ roleAttributes: [], configs: [], terminatorStrategy: 'smartrouting' });
    expect(defaults.maxIdleTimeMillis).toBe(0);

    const list = await conformant(M, 'GET', '/services', srv.base, {
      token,
      query: `filter=${encodeURIComponent('name = "web"')}`,
    });
    expect(ids(list)).toEqual([id]);
    const byRole = await call('GET', `${srv.mgmt}/services?roleFilter=%23public`, { token });
    expect(ids(byRole)).toEqual([id]);

    // PUT sets encryptionRequired (OpenZiti's service manager drops it from PATCHes only); fields left out go back
    // to their defaults
    const put = await conformant(M, 'PUT', '/services/{id}', srv.base, {
      token,
      params: { id },
      body: { name: 'web2', encryptionRequired: true, roleAttributes: ['web'] },
    });
    expect(put.status, put.text).toBe(200);
    expect((await get(`/services/${id}`)).body.data).toMatchObject({
      name: 'web2',
      encryptionRequired: true,
      configs: [],
      terminatorStrategy: 'smartrouting',
      maxIdleTimeMillis: 0,
      tags: {},
    });
    const patch = await conformant(M, 'PATCH', '/services/{id}', srv.base, {
      token,
      params: { id },
      body: { configs: [cfg], maxIdleTimeMillis: 10, encryptionRequired: false },
    });
    expect(patch.status, patch.text).toBe(200);
    expect((await get(`/services/${id}`)).body.data).toMatchObject({
      name: 'web2',
      configs: [cfg],
      maxIdleTimeMillis: 10,
      encryptionRequired: true,
      roleAttributes: ['web'],
    });
    // a PUT that leaves it out sets it false, as every field it leaves out goes back to its default
    const bare = await conformant(M, 'PUT', '/services/{id}', srv.base, {
      token,
      params: { id },
      body: { name: 'web2', configs: [cfg], maxIdleTimeMillis: 10, roleAttributes: ['web'] },
    });
    expect(bare.status, bare.text).toBe(200);
    expect((await get(`/services/${id}`)).body.data.encryptionRequired).toBe(false);

    // an empty terminator strategy is the default, stored as such (OpenZiti's service store), on every write
    const filtered = async () => {
      const q = encodeURIComponent(`terminatorStrategy = "smartrouting" and name = "web2"`);
      return ids(await call('GET', `${srv.mgmt}/services?filter=${q}`, { token }));
    };
    expect(await filtered()).toEqual([id]);
    for (const terminatorStrategy of ['weighted', '']) {
      expect((await call('PATCH', `${srv.mgmt}/services/${id}`, { token, body: { terminatorStrategy } })).status).toBe(
        200,
      );
    }
    expect((await get(`/services/${id}`)).body.data.terminatorStrategy).toBe('smartrouting');
    expect(await filtered()).toEqual([id]);
    const blank = await create('/services', {
      name: 'blank-strategy',
      encryptionRequired: true,
      terminatorStrategy: '',
    });
    expect((await get(`/services/${blank}`)).body.data.terminatorStrategy).toBe('smartrouting');
    // a strategy the fabric does not have: refused (400 on the field; OpenZiti's registry answers an undeclared 404)
    for (const r of [
      await call('PATCH', `${srv.mgmt}/services/${id}`, { token, body: { terminatorStrategy: 'nope' } }),
      await call('POST', `${srv.mgmt}/services`, {
        token,
        body: { name: 'nope-strategy', encryptionRequired: true, terminatorStrategy: 'nope' },
      }),
    ]) {
      expectError(r, 400, 'COULD_NOT_VALIDATE', 'terminatorStrategy');
    }
    expect((await get(`/services/${id}`)).body.data.terminatorStrategy).toBe('smartrouting');
    expect((await call('DELETE', `${srv.mgmt}/services/${blank}`, { token })).status).toBe(200);

    const configs = await conformant(M, 'GET', '/services/{id}/configs', srv.base, { token, params: { id } });
    expect(ids(configs)).toEqual([cfg]);
    const users = await conformant(M, 'GET', '/configs/{id}/services', srv.base, { token, params: { id: cfg } });
    expect(ids(users)).toEqual([id]);

    // deleting a config takes it off the services that name it (OpenZiti's link collection)
    expect((await call('DELETE', `${srv.mgmt}/configs/${cfg}`, { token })).status).toBe(200);
    expect((await get(`/services/${id}`)).body.data.configs).toEqual([]);

    const attrs = await conformant(M, 'GET', '/service-role-attributes', srv.base, { token });
    expect(attrs.body.data).toEqual(['web']);
    const del = await conformant(M, 'DELETE', '/services/{id}', srv.base, { token, params: { id: other } });
    expect(del.status).toBe(200);
    expectError(
      await conformant(M, 'GET', '/services/{id}', srv.base, { token, params: { id: other } }),
      404,
      'NOT_FOUND',
    );
    await call('DELETE', `${srv.mgmt}/services/${id}`, { token });
  });

  it('configs: service-target only, one per type, existing; role attributes plain; names unique', async () => {
    const typeA = (await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'a.v1' } })).body.data.id;
    const routerType = (
      await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'r.v1', target: 'router' } })
    ).body.data.id;
    const a1 = await configOf('a1', typeA, {});
    const a2 = await configOf('a2', typeA, {});
    const r1 = await configOf('r1', routerType, {});
    const post = (body: Record<string, unknown>) =>
      conformant(M, 'POST', '/services', srv.base, { token, body: { encryptionRequired: true, ...body } });
    expectError(await post({ name: 's', configs: [a1, a2] }), 400, 'COULD_NOT_VALIDATE', 'configs');
    expectError(await post({ name: 's', configs: [r1] }), 400, 'COULD_NOT_VALIDATE', 'configs');
    expectError(await post({ name: 's', configs: ['no-such-config'] }), 400, 'COULD_NOT_VALIDATE', 'configs');
    expectError(await post({ name: 's', roleAttributes: ['#web'] }), 400, 'COULD_NOT_VALIDATE', 'roleAttributes');
    expectError(await post({ name: 's', maxIdleTimeMillis: -1 }), 400, 'COULD_NOT_VALIDATE');
    expectError(
      await conformant(M, 'POST', '/services', srv.base, { token, body: { name: 's' } }),
      400,
      'COULD_NOT_VALIDATE',
    );
    const id = await create('/services', { name: 'unique-svc', encryptionRequired: true, configs: [a1, a1] });
    expect((await get(`/services/${id}`)).body.data.configs).toEqual([a1]);
    expectError(await post({ name: 'unique-svc' }), 400, 'COULD_NOT_VALIDATE', 'name');
    expectError(
      await conformant(M, 'PATCH', '/services/{id}', srv.base, { token, params: { id }, body: { configs: [a1, a2] } }),
      400,
      'COULD_NOT_VALIDATE',
      'configs',
    );
    expectError(
      await conformant(M, 'PUT', '/services/{id}', srv.base, { token, params: { id: 'nope' }, body: { name: 'x' } }),
      404,
      'NOT_FOUND',
    );
    expectError(
      await conformant(M, 'DELETE', '/services/{id}', srv.base, { token, params: { id: 'nope' } }),
      404,
      'NOT_FOUND',
    );
    expectError(
      await conformant(M, 'GET', '/services/{id}/configs', srv.base, { token, params: { id: 'nope' } }),
      404,
      'NOT_FOUND',
    );
    expectError(
      await conformant(M, 'GET', '/configs/{id}/services', srv.base, { token, params: { id: 'nope' } }),
      404,
      'NOT_FOUND',
    );
    await call('DELETE', `${srv.mgmt}/services/${id}`, { token });
  });
});

describe('edge routers (data model)', () => {
  it('CRUD with roleAttributes, cost, noTraversal, disabled, isTunnelerEnabled, appData; offline', async () => {
    const id = await create('/edge-routers', {
      name: 'er-east',
      roleAttributes: ['east', 'public'],
      cost: 10,
      noTraversal: true,
      disabled: false,
      isTunnelerEnabled: false,
      appData: { region: 'us-east' },
    });
    const detail = await conformant(M, 'GET', '/edge-routers/{id}', srv.base, { token, params: { id } });
    expect(detail.body.data).toMatchObject({
      name: 'er-east',
      roleAttributes: ['east', 'public'],
      cost: 10,
      noTraversal: true,
      disabled: false,
      isOnline: false,
      appData: { region: 'us-east' },
    });
    const west = await create('/edge-routers', { name: 'er-west', roleAttributes: ['west'] });
    expect((await get(`/edge-routers/${west}`)).body.data).toMatchObject({ cost: 0, noTraversal: false });
    const list = await conformant(M, 'GET', '/edge-routers', srv.base, { token, query: 'roleFilter=%23east' });
    expect(ids(list)).toEqual([id]);
    const put = await conformant(M, 'PUT', '/edge-routers/{id}', srv.base, {
      token,
      params: { id },
      body: { name: 'er-east', roleAttributes: ['east'], disabled: true },
    });
    expect(put.status, put.text).toBe(200);
    expect((await get(`/edge-routers/${id}`)).body.data).toMatchObject({
      roleAttributes: ['east'],
      disabled: true,
      cost: 0,
      noTraversal: false,
      appData: {},
    });
    const patch = await conformant(M, 'PATCH', '/edge-routers/{id}', srv.base, {
      token,
      params: { id },
      body: { cost: 65535 },
    });
    expect(patch.status, patch.text).toBe(200);
    expect((await get(`/edge-routers/${id}`)).body.data).toMatchObject({ cost: 65535, disabled: true });
    const attrs = await conformant(M, 'GET', '/edge-router-role-attributes', srv.base, {
      token,
      query: `filter=${encodeURIComponent('id contains "e"')}`,
    });
    expect(attrs.body.data).toEqual(['east', 'west']);

    expectError(
      await conformant(M, 'POST', '/edge-routers', srv.base, { token, body: { name: 'x', cost: 65536 } }),
      400,
      'COULD_NOT_VALIDATE',
    );
    expectError(
      await conformant(M, 'POST', '/edge-routers', srv.base, { token, body: { name: 'er-west' } }),
      400,
      'COULD_NOT_VALIDATE',
      'name',
    );
    expectError(
      await conformant(M, 'POST', '/edge-routers', srv.base, { token, body: { name: 'x', roleAttributes: ['@a'] } }),
      400,
      'COULD_NOT_VALIDATE',
      'roleAttributes',
    );
    for (const del of [id, west]) {
      expect(
        (await conformant(M, 'DELETE', '/edge-routers/{id}', srv.base, { token, params: { id: del } })).status,
      ).toBe(200);
    }
  });
});

describe('edge routers: isTunnelerEnabled', () => {
  it('creates and removes the Router identity and the system edge router policy as OpenZiti does', async () => {
    const id = await create('/edge-routers', { name: 'tun-router', isTunnelerEnabled: true });
    const routerIdentity = (await get(`/identities/${id}`)).body.data;
    expect(routerIdentity).toMatchObject({ id, name: 'tun-router', typeId: 'Router', isAdmin: false });
    const system = (await get(`/edge-router-policies/${id}`)).body.data;
    expect(system).toMatchObject({
      name: `edge-router-${id}-system`,
      isSystem: true,
      semantic: 'AnyOf',
      identityRoles: [`@${id}`],
      edgeRouterRoles: [`@${id}`],
    });
    expect(ids(await get(`/identities/${id}/edge-routers`))).toEqual([id]);
    // system policies are the controller's
    expectError(
      await conformant(M, 'PATCH', '/edge-router-policies/{id}', srv.base, {
        token,
        params: { id },
        body: { name: 'x' },
      }),
      400,
      'ENTITY_CAN_NOT_BE_UPDATED',
    );
    expectError(
      await conformant(M, 'DELETE', '/edge-router-policies/{id}', srv.base, { token, params: { id } }),
      400,
      'ENTITY_CAN_NOT_BE_DELETED',
    );
    // a rename follows to the identity; turning tunneling off removes both, on again brings them back
    await call('PATCH', `${srv.mgmt}/edge-routers/${id}`, { token, body: { name: 'tun-router-2' } });
    expect((await get(`/identities/${id}`)).body.data.name).toBe('tun-router-2');
    await call('PATCH', `${srv.mgmt}/edge-routers/${id}`, { token, body: { isTunnelerEnabled: false } });
    expect((await get(`/identities/${id}`)).status).toBe(404);
    expect((await get(`/edge-router-policies/${id}`)).status).toBe(404);
    await call('PATCH', `${srv.mgmt}/edge-routers/${id}`, { token, body: { isTunnelerEnabled: true } });
    expect((await get(`/identities/${id}`)).body.data.name).toBe('tun-router-2');
    expect(ids(await get(`/edge-routers/${id}/edge-router-policies`))).toEqual([id]);
    // deleting the router takes both with it
    expect((await call('DELETE', `${srv.mgmt}/edge-routers/${id}`, { token })).status).toBe(200);
    expect((await get(`/identities/${id}`)).status).toBe(404);
    expect((await get(`/edge-router-policies/${id}`)).status).toBe(404);
    // an identity name in use: the router is not created either (all or nothing)
    await identity('taken-name');
    expectError(
      await conformant(M, 'POST', '/edge-routers', srv.base, {
        token,
        body: { name: 'taken-name', isTunnelerEnabled: true },
      }),
      400,
      'COULD_NOT_VALIDATE',
      'name',
    );
    expect(ids(await get(`/edge-routers?filter=${encodeURIComponent('name = "taken-name"')}`))).toEqual([]);
  });
});

describe('edge routers: isTunnelerEnabled with writes racing', () => {
  /** The next write's handler checks, then `meanwhile` runs, then its command applies. */
  const raced = async (meanwhile: () => Promise<unknown>, write: () => Promise<unknown>) => {
    interceptNextWrite(srv.ctl.svc)(meanwhile);
    await write();
  };
  const tunneler = async (id: string) => ({
    identity: (await get(`/identities/${id}`)).status,
    policy: (await get(`/edge-router-policies/${id}`)).status,
  });

  it('the Router identity and system policy follow the flag as applied, not as each handler saw it', async () => {
    const id = await create('/edge-routers', { name: 'raced-tun', isTunnelerEnabled: false });
    const patch = (body: unknown) => () => call('PATCH', `${srv.mgmt}/edge-routers/${id}`, { token, body });
    // turned on, then off by a PATCH that had seen it off: off, nothing left behind
    await raced(patch({ isTunnelerEnabled: true }), patch({ isTunnelerEnabled: false }));
    expect((await get(`/edge-routers/${id}`)).body.data.isTunnelerEnabled).toBe(false);
    expect(await tunneler(id)).toEqual({ identity: 404, policy: 404 });
    // turned on, then renamed by a PATCH that had seen it off: the identity takes the new name
    await raced(patch({ isTunnelerEnabled: true }), patch({ name: 'raced-tun-2' }));
    expect((await get(`/identities/${id}`)).body.data.name).toBe('raced-tun-2');
    // turned off, then renamed by a PATCH that had seen it on: no identity brought back, none renamed
    await raced(patch({ isTunnelerEnabled: false }), patch({ name: 'raced-tun-3' }));
    expect(await tunneler(id)).toEqual({ identity: 404, policy: 404 });
    // turned on, then deleted by a DELETE that had seen it off: both go with the router
    await raced(patch({ isTunnelerEnabled: true }), () => call('DELETE', `${srv.mgmt}/edge-routers/${id}`, { token }));
    expect((await get(`/edge-routers/${id}`)).status).toBe(404);
    expect(await tunneler(id)).toEqual({ identity: 404, policy: 404 });
  });

  it('through /routers: a rename and a delete of the router row follow the flag as applied', async () => {
    const id = await create('/edge-routers', { name: 'raced-row', isTunnelerEnabled: false });
    const enable = () => call('PATCH', `${srv.mgmt}/edge-routers/${id}`, { token, body: { isTunnelerEnabled: true } });
    await raced(enable, () => call('PATCH', `${srv.mgmt}/routers/${id}`, { token, body: { name: 'raced-row-2' } }));
    expect((await get(`/identities/${id}`)).body.data.name).toBe('raced-row-2');
    await call('PATCH', `${srv.mgmt}/edge-routers/${id}`, { token, body: { isTunnelerEnabled: false } });
    await raced(enable, () => call('DELETE', `${srv.mgmt}/routers/${id}`, { token }));
    expect((await get(`/edge-routers/${id}`)).status).toBe(404);
    expect(await tunneler(id)).toEqual({ identity: 404, policy: 404 });
  });
});

describe('policies: CRUD, roles, displays, association lists', () => {
  it('service policies: Dial/Bind, roles with displays, lists in both directions', async () => {
    const alice = await identity('sp-alice', ['eng']);
    const bob = await identity('sp-bob', ['ops']);
    const web = await create('/services', { name: 'sp-web', encryptionRequired: true, roleAttributes: ['web'] });
    const db = await create('/services', { name: 'sp-db', encryptionRequired: true, roleAttributes: ['db'] });
    const id = await create('/service-policies', {
      name: 'eng-dial-web',
      type: 'Dial',
      semantic: 'AnyOf',
      identityRoles: ['#eng', `@${bob}`],
      serviceRoles: ['#web'],
      postureCheckRoles: [],
    });
    const detail = await conformant(M, 'GET', '/service-policies/{id}', srv.base, { token, params: { id } });
    expect(detail.body.data).toMatchObject({
      name: 'eng-dial-web',
      type: 'Dial',
      semantic: 'AnyOf',
      identityRoles: ['#eng', `@${bob}`],
      identityRolesDisplay: [
        { role: '#eng', name: '#eng' },
        { role: `@${bob}`, name: '@sp-bob' },
      ],
      serviceRolesDisplay: [{ role: '#web', name: '#web' }],
      postureCheckRoles: [],
      postureCheckRolesDisplay: [],
    });
    const list = await conformant(M, 'GET', '/service-policies', srv.base, {
      token,
      query: `filter=${encodeURIComponent('type = "Dial"')}`,
    });
    expect(ids(list)).toEqual([id]);
    // role lists are indexed ZitiQL set symbols
    expect(ids(await get(`/service-policies?filter=${encodeURIComponent('anyOf(identityRoles) = "#eng"')}`))).toEqual([
      id,
    ]);
    const params = { id };
    expect(ids(await conformant(M, 'GET', '/service-policies/{id}/identities', srv.base, { token, params }))).toEqual(
      [alice, bob].sort(),
    );
    expect(ids(await conformant(M, 'GET', '/service-policies/{id}/services', srv.base, { token, params }))).toEqual([
      web,
    ]);
    const forAlice = { token, params: { id: alice } };
    expect(ids(await conformant(M, 'GET', '/identities/{id}/service-policies', srv.base, forAlice))).toEqual([id]);
    expect(ids(await conformant(M, 'GET', '/identities/{id}/services', srv.base, forAlice))).toEqual([web]);
    const forWeb = { token, params: { id: web } };
    expect(ids(await conformant(M, 'GET', '/services/{id}/service-policies', srv.base, forWeb))).toEqual([id]);
    expect(ids(await conformant(M, 'GET', '/services/{id}/identities', srv.base, forWeb))).toEqual([alice, bob].sort());
    // policyType narrows to the Dial or Bind policies
    expect(ids(await get(`/services/${web}/identities?policyType=bind`))).toEqual([]);
    expect(ids(await get(`/identities/${alice}/services?policyType=dial`))).toEqual([web]);
    expectError(await get(`/identities/${alice}/services?policyType=listen`), 400, 'COULD_NOT_VALIDATE', 'policyType');
    // the listed entity's filter applies
    expect(ids(await get(`/services/${web}/identities?filter=${encodeURIComponent('name = "sp-bob"')}`))).toEqual([
      bob,
    ]);

    const put = await conformant(M, 'PUT', '/service-policies/{id}', srv.base, {
      token,
      params,
      body: { name: 'eng-bind-db', type: 'Bind', semantic: 'AllOf', identityRoles: ['#eng'], serviceRoles: ['#db'] },
    });
    expect(put.status, put.text).toBe(200);
    expect(ids(await get(`/identities/${alice}/services?policyType=bind`))).toEqual([db]);
    expect(ids(await get(`/identities/${bob}/services`))).toEqual([]);
    const patch = await conformant(M, 'PATCH', '/service-policies/{id}', srv.base, {
      token,
      params,
      body: { identityRoles: ['#all'] },
    });
    expect(patch.status, patch.text).toBe(200);
    expect((await get(`/service-policies/${id}`)).body.data).toMatchObject({
      name: 'eng-bind-db',
      type: 'Bind',
      serviceRoles: ['#db'],
    });
    expect(ids(await get(`/services/${db}/identities`))).toContain(bob);
    expect((await conformant(M, 'DELETE', '/service-policies/{id}', srv.base, { token, params })).status).toBe(200);
    expect(ids(await get(`/services/${db}/identities`))).toEqual([]);
    expectError(
      await conformant(M, 'GET', '/service-policies/{id}/identities', srv.base, { token, params: { id: 'nope' } }),
      404,
      'NOT_FOUND',
    );
  });

  it('edge router policies and service edge router policies, with their lists in both directions', async () => {
    const carol = await identity('erp-carol', ['field']);
    const er1 = await create('/edge-routers', { name: 'erp-er1', roleAttributes: ['edge'] });
    const er2 = await create('/edge-routers', { name: 'erp-er2', roleAttributes: ['core'] });
    const svc = await create('/services', { name: 'erp-svc', encryptionRequired: true, roleAttributes: ['app'] });
    const erp = await create('/edge-router-policies', {
      name: 'field-edge',
      semantic: 'AllOf',
      identityRoles: ['#field'],
      edgeRouterRoles: ['#edge', `@${er2}`],
    });
    const erpDetail = await conformant(M, 'GET', '/edge-router-policies/{id}', srv.base, {
      token,
      params: { id: erp },
    });
    expect(erpDetail.body.data).toMatchObject({
      isSystem: false,
      edgeRouterRolesDisplay: [
        { role: '#edge', name: '#edge' },
        { role: `@${er2}`, name: '@erp-er2' },
      ],
    });
    expect(ids(await conformant(M, 'GET', '/edge-router-policies', srv.base, { token }))).toEqual([erp]);
    const p = { token, params: { id: erp } };
    expect(ids(await conformant(M, 'GET', '/edge-router-policies/{id}/edge-routers', srv.base, p))).toEqual(
      [er1, er2].sort(),
    );
    expect(ids(await conformant(M, 'GET', '/edge-router-policies/{id}/identities', srv.base, p))).toEqual([carol]);
    const forCarol = { token, params: { id: carol } };
    expect(ids(await conformant(M, 'GET', '/identities/{id}/edge-router-policies', srv.base, forCarol))).toEqual([erp]);
    expect(ids(await conformant(M, 'GET', '/identities/{id}/edge-routers', srv.base, forCarol))).toEqual(
      [er1, er2].sort(),
    );
    const forEr1 = { token, params: { id: er1 } };
    expect(ids(await conformant(M, 'GET', '/edge-routers/{id}/edge-router-policies', srv.base, forEr1))).toEqual([erp]);
    expect(ids(await conformant(M, 'GET', '/edge-routers/{id}/identities', srv.base, forEr1))).toEqual([carol]);

    const serp = await create('/service-edge-router-policies', {
      name: 'app-core',
      semantic: 'AnyOf',
      serviceRoles: ['#app'],
      edgeRouterRoles: ['#core'],
    });
    const serpDetail = await conformant(M, 'GET', '/service-edge-router-policies/{id}', srv.base, {
      token,
      params: { id: serp },
    });
    expect(serpDetail.body.data).toMatchObject({ serviceRolesDisplay: [{ role: '#app', name: '#app' }] });
    expect(ids(await conformant(M, 'GET', '/service-edge-router-policies', srv.base, { token }))).toEqual([serp]);
    const q = { token, params: { id: serp } };
    expect(ids(await conformant(M, 'GET', '/service-edge-router-policies/{id}/services', srv.base, q))).toEqual([svc]);
    expect(ids(await conformant(M, 'GET', '/service-edge-router-policies/{id}/edge-routers', srv.base, q))).toEqual([
      er2,
    ]);
    const forSvc = { token, params: { id: svc } };
    expect(ids(await conformant(M, 'GET', '/services/{id}/service-edge-router-policies', srv.base, forSvc))).toEqual([
      serp,
    ]);
    expect(ids(await conformant(M, 'GET', '/services/{id}/edge-routers', srv.base, forSvc))).toEqual([er2]);
    const forEr2 = { token, params: { id: er2 } };
    expect(
      ids(await conformant(M, 'GET', '/edge-routers/{id}/service-edge-router-policies', srv.base, forEr2)),
    ).toEqual([serp]);
    expect(ids(await conformant(M, 'GET', '/edge-routers/{id}/services', srv.base, forEr2))).toEqual([svc]);

    for (const [path, id, body] of [
      ['/edge-router-policies/{id}', erp, { name: 'field-edge', semantic: 'AnyOf', identityRoles: ['#field'] }],
      [
        '/service-edge-router-policies/{id}',
        serp,
        { name: 'app-core', semantic: 'AllOf', serviceRoles: ['#app'], edgeRouterRoles: ['#all'] },
      ],
    ] as const) {
      const put = await conformant(M, 'PUT', path, srv.base, { token, params: { id }, body });
      expect(put.status, put.text).toBe(200);
      const patch = await conformant(M, 'PATCH', path, srv.base, { token, params: { id }, body: { tags: { x: 1 } } });
      expect(patch.status, patch.text).toBe(200);
    }
    // PUT left edgeRouterRoles out: reset to none; the service edge router policy now names #all
    expect(ids(await get(`/identities/${carol}/edge-routers`))).toEqual([]);
    expect(ids(await get(`/services/${svc}/edge-routers`))).toEqual([er1, er2].sort());
    for (const [path, id] of [
      ['/edge-router-policies/{id}', erp],
      ['/service-edge-router-policies/{id}', serp],
    ] as const) {
      expect((await conformant(M, 'DELETE', path, srv.base, { token, params: { id } })).status).toBe(200);
    }
    expect(ids(await get(`/services/${svc}/edge-routers`))).toEqual([]);
  });

  it('role validation (REFERENCE §5): prefixes, #all alone, @id must exist; unique names; semantic required', async () => {
    const ok = { name: 'v', semantic: 'AllOf' };
    const cases: [string, Record<string, unknown>, string][] = [
      ['/service-policies', { ...ok, type: 'Dial', identityRoles: ['eng'] }, 'identityRoles'],
      ['/service-policies', { ...ok, type: 'Dial', serviceRoles: ['#all', '#web'] }, 'serviceRoles'],
      ['/service-policies', { ...ok, type: 'Dial', identityRoles: ['@no-such-identity'] }, 'identityRoles'],
      ['/service-policies', { ...ok, type: 'Dial', serviceRoles: ['@no-such-service'] }, 'serviceRoles'],
      ['/service-policies', { ...ok, type: 'Dial', postureCheckRoles: ['posture'] }, 'postureCheckRoles'],
      ['/edge-router-policies', { ...ok, edgeRouterRoles: ['@no-such-router'] }, 'edgeRouterRoles'],
      ['/edge-router-policies', { ...ok, identityRoles: ['#'] }, 'identityRoles'],
      ['/service-edge-router-policies', { ...ok, edgeRouterRoles: ['#all', '@x'] }, 'edgeRouterRoles'],
    ];
    for (const [path, body, field] of cases) {
      const r = await conformant(M, 'POST', path, srv.base, { token, body });
      expectError(r, 400, 'COULD_NOT_VALIDATE', field);
    }
    // bounds: at most 1 000 roles per list, 100 configs per service, 1 000 service-config pairs per request
    const many = Array.from({ length: 1001 }, (_, i) => `#r${i}`);
    expectError(
      await conformant(M, 'POST', '/edge-router-policies', srv.base, { token, body: { ...ok, identityRoles: many } }),
      400,
      'COULD_NOT_VALIDATE',
      'identityRoles',
    );
    const atLimit = await create('/edge-router-policies', { ...ok, name: 'at-limit', identityRoles: many.slice(1) });
    expect((await get(`/edge-router-policies/${atLimit}`)).body.data.identityRoles).toHaveLength(1000);
    await call('DELETE', `${srv.mgmt}/edge-router-policies/${atLimit}`, { token });
    const configs = Array.from({ length: 101 }, (_, i) => `c${i}`);
    expectError(
      await conformant(M, 'POST', '/services', srv.base, {
        token,
        body: { name: 'too-many', encryptionRequired: true, configs },
      }),
      400,
      'COULD_NOT_VALIDATE',
      'configs',
    );
    const pairs = Array.from({ length: 1001 }, () => ({ serviceId: 's', configId: 'c' }));
    const admin = (await call('GET', `${srv.mgmt}/current-identity`, { token })).body.data.id;
    expectError(
      await conformant(M, 'POST', '/identities/{id}/service-configs', srv.base, {
        token,
        params: { id: admin },
        body: pairs,
      }),
      400,
      'COULD_NOT_VALIDATE',
    );
    const missing = await conformant(M, 'POST', '/service-policies', srv.base, {
      token,
      body: { ...ok, identityRoles: ['@gone', '@also-gone'], type: 'Bind' },
    });
    expect(missing.body.error.cause.reason).toBe('no identities found with the given ids');
    // type and semantic are required and enumerated
    for (const body of [
      { name: 'v', semantic: 'AllOf' },
      { name: 'v', type: 'Dial' },
      { name: 'v', type: 'Invalid', semantic: 'AllOf' },
      { name: 'v', type: 'Dial', semantic: 'OneOf' },
    ]) {
      expectError(
        await conformant(M, 'POST', '/service-policies', srv.base, { token, body }),
        400,
        'COULD_NOT_VALIDATE',
      );
    }
    const id = await create('/service-policies', { ...ok, type: 'Dial' });
    expectError(
      await conformant(M, 'POST', '/service-policies', srv.base, { token, body: { ...ok, type: 'Bind' } }),
      400,
      'COULD_NOT_VALIDATE',
      'name',
    );
    expectError(
      await conformant(M, 'PATCH', '/service-policies/{id}', srv.base, {
        token,
        params: { id },
        body: { serviceRoles: ['web'] },
      }),
      400,
      'COULD_NOT_VALIDATE',
      'serviceRoles',
    );
    expectError(
      await conformant(M, 'DELETE', '/service-policies/{id}', srv.base, { token, params: { id: 'nope' } }),
      404,
      'NOT_FOUND',
    );
    await call('DELETE', `${srv.mgmt}/service-policies/${id}`, { token });
  });

  it('deleting an entity named by @id takes it off the policies (OpenZiti deleteEntityReferences)', async () => {
    const dave = await identity('ref-dave');
    const svc = await create('/services', { name: 'ref-svc', encryptionRequired: true });
    const id = await create('/service-policies', {
      name: 'ref-policy',
      type: 'Dial',
      semantic: 'AnyOf',
      identityRoles: [`@${dave}`, '#x'],
      serviceRoles: [`@${svc}`],
    });
    expect(ids(await get(`/identities/${dave}/services`))).toEqual([svc]);
    expect((await call('DELETE', `${srv.mgmt}/identities/${dave}`, { token })).status).toBe(200);
    expect((await call('DELETE', `${srv.mgmt}/services/${svc}`, { token })).status).toBe(200);
    const detail = (await get(`/service-policies/${id}`)).body.data;
    expect(detail.identityRoles).toEqual(['#x']);
    expect(detail.serviceRoles).toEqual([]);
    expect(ids(await get(`/service-policies/${id}/services`))).toEqual([]);
    await call('DELETE', `${srv.mgmt}/service-policies/${id}`, { token });
  });
});

describe('client view of services', () => {
  it('lists only the services the caller may dial or bind, with permissions and postureQueries', async () => {
    const user = await userWith('client-erin', [], ['client-team']);
    const typeId = (await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'client.v1' } })).body.data
      .id;
    const cfg = await configOf('client-cfg', typeId, { port: 80 });
    const both = await create('/services', {
      name: 'client-both',
      encryptionRequired: true,
      roleAttributes: ['client-svc'],
      configs: [cfg],
    });
    const dialOnly = await create('/services', { name: 'client-dial', encryptionRequired: true });
    const hidden = await create('/services', { name: 'client-hidden', encryptionRequired: true });
    const dial = await create('/service-policies', {
      name: 'client-dial-all',
      type: 'Dial',
      semantic: 'AllOf',
      identityRoles: ['#client-team'],
      serviceRoles: ['#client-svc', `@${dialOnly}`],
    });
    const bind = await create('/service-policies', {
      name: 'client-bind',
      type: 'Bind',
      semantic: 'AllOf',
      identityRoles: ['#client-team'],
      serviceRoles: [`@${both}`],
    });
    const list = await conformant(C, 'GET', '/services', srv.base, { token: user, query: 'configTypes=client.v1' });
    expect(ids(list)).toEqual([both, dialOnly].sort());
    const byId = new Map((list.body.data as { id: string }[]).map((s) => [s.id, s as Record<string, unknown>]));
    expect(byId.get(both)).toMatchObject({
      permissions: ['Dial', 'Bind'],
      config: { 'client.v1': { port: 80 } },
      postureQueries: [
        { policyId: dial, policyType: 'Dial', isPassing: true, postureQueries: [] },
        { policyId: bind, policyType: 'Bind', isPassing: true, postureQueries: [] },
      ],
    });
    expect(byId.get(dialOnly)).toMatchObject({ permissions: ['Dial'], config: {} });
    const detail = await conformant(C, 'GET', '/services/{id}', srv.base, { token: user, params: { id: dialOnly } });
    expect(detail.body.data.permissions).toEqual(['Dial']);
    expectError(
      await conformant(C, 'GET', '/services/{id}', srv.base, { token: user, params: { id: hidden } }),
      404,
      'NOT_FOUND',
    );
    const filtered = await call('GET', `${srv.client}/services?filter=${encodeURIComponent('name = "client-dial"')}`, {
      token: user,
    });
    expect(ids(filtered)).toEqual([dialOnly]);
    // the management list is not the client's
    expectError(await get('/services', user), 401, 'UNAUTHORIZED');
  });

  it('service-updates: the session start, then the time of the last change that can affect services', async () => {
    const user = await userWith('client-gina', [], ['gina']);
    const updates = async () => {
      const r = await conformant(C, 'GET', '/current-api-session/service-updates', srv.base, { token: user });
      expect(r.status, r.text).toBe(200);
      return Date.parse(r.body.data.lastChangeAt);
    };
    const session = (await call('GET', `${srv.client}/current-api-session`, { token: user })).body.data;
    const first = await updates();
    expect(first).toBeGreaterThanOrEqual(Date.parse(session.createdAt));
    // a change that cannot affect services (a tag on the identity) does not move it
    await call('PATCH', `${srv.mgmt}/identities/${session.identityId}`, { token, body: { tags: { x: 1 } } });
    expect(await updates()).toBe(first);
    await new Promise((r) => setTimeout(r, 5));
    const svcId = await create('/services', { name: 'gina-svc', encryptionRequired: true });
    const second = await updates();
    expect(second).toBeGreaterThan(first);
    expect(second).toBe(Date.parse((await get(`/services/${svcId}`)).body.data.createdAt));
    await new Promise((r) => setTimeout(r, 5));
    await call('PATCH', `${srv.mgmt}/identities/${session.identityId}`, { token, body: { roleAttributes: ['g2'] } });
    expect(await updates()).toBeGreaterThan(second);
  });

  it("an identity's own service configs replace the service's in its config map", async () => {
    const user = await makeUser(srv.base, token, 'client-hank', { roleAttributes: ['hank'] });
    const typeId = (await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'hank.v1' } })).body.data.id;
    const routerType = (
      await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'hank-router.v1', target: 'router' } })
    ).body.data.id;
    const [c1, c2, c3, r1] = [
      await configOf('hank-c1', typeId, { v: 1 }),
      await configOf('hank-c2', typeId, { v: 2 }),
      await configOf('hank-c3', typeId, { v: 3 }),
      await configOf('hank-r1', routerType, {}),
    ];
    const svcId = await create('/services', { name: 'hank-svc', encryptionRequired: true, configs: [c1] });
    await create('/service-policies', {
      name: 'hank-dial',
      type: 'Dial',
      semantic: 'AnyOf',
      identityRoles: ['#hank'],
      serviceRoles: [`@${svcId}`],
    });
    const configOfView = async () =>
      (await call('GET', `${srv.client}/services/${svcId}?configTypes=all`, { token: user.token })).body.data.config;
    expect(await configOfView()).toEqual({ 'hank.v1': { v: 1 } });
    const params = { id: user.id };
    const post = (body: unknown) =>
      conformant(M, 'POST', '/identities/{id}/service-configs', srv.base, { token, params, body });
    expect((await post([{ serviceId: svcId, configId: c2 }])).status).toBe(200);
    expect(await configOfView()).toEqual({ 'hank.v1': { v: 2 } });
    // another config of the same type replaces it
    expect((await post([{ serviceId: svcId, configId: c3 }])).status).toBe(200);
    const list = await conformant(M, 'GET', '/identities/{id}/service-configs', srv.base, { token, params });
    expect(list.body.data).toMatchObject([{ serviceId: svcId, configId: c3, config: { name: 'hank-c3' } }]);
    expect(await configOfView()).toEqual({ 'hank.v1': { v: 3 } });
    expectError(await post([{ serviceId: 'nope', configId: c3 }]), 404, 'NOT_FOUND');
    expectError(await post([{ serviceId: svcId, configId: 'nope' }]), 404, 'NOT_FOUND');
    expectError(await post([{ serviceId: svcId, configId: r1 }]), 400, 'COULD_NOT_VALIDATE', 'configId');
    expectError(await post([{ serviceId: svcId }]), 400, 'COULD_NOT_VALIDATE');
    expectError(
      await conformant(M, 'GET', '/identities/{id}/service-configs', srv.base, { token, params: { id: 'nope' } }),
      404,
      'NOT_FOUND',
    );
    // a config an identity uses cannot be deleted (OpenZiti: "config is in use by identity … for service …"); the
    // answer names the referencing row by an opaque id, not by the identity's or the service's
    const inUse = await call('DELETE', `${srv.mgmt}/configs/${c3}`, { token });
    expectError(inUse, 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY');
    expect(inUse.text).not.toContain(user.id);
    expect(inUse.text).not.toContain(svcId);
    const remove = (body?: unknown) =>
      conformant(M, 'DELETE', '/identities/{id}/service-configs', srv.base, { token, params, body });
    expect((await remove([{ serviceId: svcId, configId: c2 }])).status).toBe(200);
    expect((await call('GET', `${srv.mgmt}/identities/${user.id}/service-configs`, { token })).body.data).toHaveLength(
      1,
    );
    expect((await remove()).status).toBe(200);
    expect((await call('GET', `${srv.mgmt}/identities/${user.id}/service-configs`, { token })).body.data).toEqual([]);
    expect(await configOfView()).toEqual({ 'hank.v1': { v: 1 } });
    expect((await call('DELETE', `${srv.mgmt}/configs/${c3}`, { token })).status).toBe(200);
  });

  it('concurrent associations of one slot all succeed: the identity keeps one config there', async () => {
    const user = await identity('client-ivy');
    const typeId = (await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'ivy.v1' } })).body.data.id;
    const configs = [await configOf('ivy-c1', typeId, { v: 1 }), await configOf('ivy-c2', typeId, { v: 2 })];
    const svcId = await create('/services', { name: 'ivy-svc', encryptionRequired: true });
    const url = `${srv.mgmt}/identities/${user}/service-configs`;
    // every request finds the slot empty (or as it was) when it checks it; they apply one after the other
    const answers = await Promise.all(
      [0, 1, 0, 1, 0, 1].map((i) => call('POST', url, { token, body: [{ serviceId: svcId, configId: configs[i] }] })),
    );
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const list = (await call('GET', url, { token })).body.data;
    expect(list).toHaveLength(1);
    expect(configs).toContain(list[0].configId);
  });

  it('management list: `config` for the config types asked for (query, comma-separated, or the API session), empty otherwise', async () => {
    const typeA = (await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'mgmt-a.v1' } })).body.data.id;
    const typeB = (await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'mgmt-b.v1' } })).body.data.id;
    const a = await configOf('mgmt-a', typeA, { a: 1 });
    const b = await configOf('mgmt-b', typeB, { b: 2 });
    const svcId = await create('/services', { name: 'mgmt-config-svc', encryptionRequired: true, configs: [a, b] });
    const listed = async (query: string, t = token) => {
      const r = await conformant(M, 'GET', '/services', srv.base, {
        token: t,
        query: `filter=${encodeURIComponent(`id = "${svcId}"`)}${query}`,
      });
      expect(r.status, r.text).toBe(200);
      return r.body.data[0].config;
    };
    expect(await listed('')).toEqual({});
    expect(await listed('&configTypes=mgmt-a.v1')).toEqual({ 'mgmt-a.v1': { a: 1 } });
    expect(await listed(`&configTypes=${typeA},mgmt-b.v1`)).toEqual({ 'mgmt-a.v1': { a: 1 }, 'mgmt-b.v1': { b: 2 } });
    expect(await listed('&configTypes=all')).toEqual({ 'mgmt-a.v1': { a: 1 }, 'mgmt-b.v1': { b: 2 } });
    // the API session's config types when the query names none
    const withTypes = await call('POST', `${srv.mgmt}/authenticate?method=password`, {
      body: { username: 'admin', password: ADMIN_PASSWORD, configTypes: ['mgmt-b.v1'] },
    });
    expect(await listed('', withTypes.body.data.token)).toEqual({ 'mgmt-b.v1': { b: 2 } });
    // the detail leaves it empty, as OpenZiti's does
    expect((await get(`/services/${svcId}?configTypes=all`)).body.data.config).toEqual({});
  });

  it("edge routers: the caller's, and those through which it may reach a service", async () => {
    const user = await userWith('client-frank', [], ['frank']);
    const svcId = await create('/services', { name: 'frank-svc', encryptionRequired: true, roleAttributes: ['fs'] });
    const hidden = await create('/services', { name: 'frank-hidden', encryptionRequired: true });
    // enrolled: the caller's list holds verified routers only (router-policies.test.ts)
    const enrolled = async (body: Record<string, unknown>) =>
      (await enrolledRouter(srv.mgmt, srv.client, token, body)).id;
    const [r1, r2, r3] = [
      await enrolled({ name: 'frank-r1', roleAttributes: ['fr'], cost: 5 }),
      await enrolled({ name: 'frank-r2', roleAttributes: ['fr', 'fs-er'] }),
      await enrolled({ name: 'frank-r3', roleAttributes: ['fs-er'] }),
    ];
    await create('/edge-router-policies', {
      name: 'frank-erp',
      semantic: 'AnyOf',
      identityRoles: ['#frank'],
      edgeRouterRoles: ['#fr'],
    });
    await create('/service-edge-router-policies', {
      name: 'frank-serp',
      semantic: 'AnyOf',
      serviceRoles: ['#fs'],
      edgeRouterRoles: ['#fs-er'],
    });
    await create('/service-policies', {
      name: 'frank-dial',
      type: 'Dial',
      semantic: 'AnyOf',
      identityRoles: ['#frank'],
      serviceRoles: ['#fs'],
    });
    const mine = await conformant(C, 'GET', '/current-identity/edge-routers', srv.base, { token: user });
    expect(ids(mine)).toEqual([r1, r2].sort());
    const first = (mine.body.data as { id: string; cost: number; isOnline: boolean }[]).find((r) => r.id === r1)!;
    expect(first).toMatchObject({ cost: 5, isOnline: false, name: 'frank-r1' });
    // both sides must allow the router: r2 only (r1 is not the service's, r3 not the identity's)
    const forSvc = await conformant(C, 'GET', '/services/{id}/edge-routers', srv.base, {
      token: user,
      params: { id: svcId },
    });
    expect(forSvc.body.data.edgeRouters.map((r: { name: string }) => r.name)).toEqual(['frank-r2']);
    expect(r3).toBeTruthy();
    expectError(
      await conformant(C, 'GET', '/services/{id}/edge-routers', srv.base, { token: user, params: { id: hidden } }),
      404,
      'NOT_FOUND',
    );
  });
});

describe('sessions', () => {
  it('created only with a granting policy of the type and an edge router both sides allow; end with the API session', async () => {
    const kate = await makeUser(srv.base, token, 'sess-kate', { roleAttributes: ['kate'] });
    const other = await makeUser(srv.base, token, 'sess-other');
    const svcId = await create('/services', { name: 'sess-svc', encryptionRequired: true, roleAttributes: ['ks'] });
    await create('/service-policies', {
      name: 'sess-dial',
      type: 'Dial',
      semantic: 'AllOf',
      identityRoles: ['#kate'],
      serviceRoles: ['#ks'],
    });
    const post = (t: string, body: unknown) => conformant(C, 'POST', '/sessions', srv.base, { token: t, body });
    expectError(await post(kate.token, { serviceId: svcId, type: 'Dial' }), 400, 'NO_EDGE_ROUTERS_AVAILABLE');
    await create('/edge-routers', { name: 'sess-er', roleAttributes: ['ker'] });
    await create('/edge-router-policies', {
      name: 'sess-erp',
      semantic: 'AllOf',
      identityRoles: ['#kate'],
      edgeRouterRoles: ['#ker'],
    });
    // the identity's router alone is not enough: the service's policies must allow it too
    expectError(await post(kate.token, { serviceId: svcId }), 400, 'NO_EDGE_ROUTERS_AVAILABLE');
    await create('/service-edge-router-policies', {
      name: 'sess-serp',
      semantic: 'AllOf',
      serviceRoles: ['#ks'],
      edgeRouterRoles: ['#ker'],
    });
    const made = await post(kate.token, { serviceId: svcId, type: 'Dial', tags: { app: 'x' } });
    expect(made.status, made.text).toBe(201);
    const sessionId = made.body.data.id as string;
    expect(made.body.data).toMatchObject({
      type: 'Dial',
      serviceId: svcId,
      service: { id: svcId, name: 'sess-svc' },
      identityId: kate.id,
      edgeRouters: [],
      tags: { app: 'x' },
    });
    expect(made.body.data.token).toMatch(/^[0-9a-f-]{36}$/);
    // asked again on the same API session: the same session (OpenZiti's session manager), not a second one
    const again = await post(kate.token, { serviceId: svcId, type: 'Dial' });
    expect(again.status).toBe(201);
    expect(again.body.data).toMatchObject({ id: sessionId, token: made.body.data.token });
    // no Bind policy (but a Dial one): "service not found" on the field, as OpenZiti's session manager answers;
    // unknown service, or one the caller may neither dial nor bind: 404; bad bodies
    expectError(await post(kate.token, { serviceId: svcId, type: 'Bind' }), 400, 'COULD_NOT_VALIDATE', 'ServiceId');
    expectError(await post(kate.token, { serviceId: 'nope' }), 404, 'NOT_FOUND');
    expectError(await post(other.token, { serviceId: svcId }), 404, 'NOT_FOUND');
    expectError(await post(kate.token, {}), 400, 'COULD_NOT_VALIDATE', 'serviceId');
    expectError(await post(kate.token, { serviceId: svcId, type: 'Invalid' }), 400, 'COULD_NOT_VALIDATE', 'type');

    const mine = await conformant(C, 'GET', '/sessions', srv.base, { token: kate.token });
    expect(ids(mine)).toEqual([sessionId]);
    expect(ids(await conformant(C, 'GET', '/sessions', srv.base, { token: other.token }))).toEqual([]);
    const detail = await conformant(C, 'GET', '/sessions/{id}', srv.base, {
      token: kate.token,
      params: { id: sessionId },
    });
    expect(detail.body.data.token).toBe(made.body.data.token);
    const asOther = { token: other.token, params: { id: sessionId } };
    expectError(await conformant(C, 'GET', '/sessions/{id}', srv.base, asOther), 404, 'NOT_FOUND');
    expectError(await conformant(C, 'DELETE', '/sessions/{id}', srv.base, asOther), 404, 'NOT_FOUND');
    // the management API: every session, for admins
    expect(ids(await conformant(M, 'GET', '/sessions', srv.base, { token }))).toContain(sessionId);
    const adminView = { token, params: { id: sessionId } };
    expect((await conformant(M, 'GET', '/sessions/{id}', srv.base, adminView)).body.data.apiSessionId).toBe(
      made.body.data.apiSessionId,
    );
    expect(
      (await conformant(C, 'DELETE', '/sessions/{id}', srv.base, { token: kate.token, params: { id: sessionId } }))
        .status,
    ).toBe(200);
    expect((await get(`/sessions/${sessionId}`)).status).toBe(404);
    // a deleted session is made anew; a session ends with its API session
    const second = (await post(kate.token, { serviceId: svcId })).body.data.id;
    expect(second).not.toBe(sessionId);
    expect((await conformant(M, 'DELETE', '/sessions/{id}', srv.base, { token, params: { id: second } })).status).toBe(
      200,
    );
    const third = (await post(kate.token, { serviceId: svcId })).body.data.id;
    expect(third).not.toBe(second);
    expect((await call('DELETE', `${srv.client}/current-api-session`, { token: kate.token })).status).toBe(200);
    expect((await get(`/sessions/${third}`)).status).toBe(404);
  });
});

describe('route path, terminators of a service, client service writes', () => {
  it('route-path: [] for a session (no circuits yet), 404 for an unknown one', async () => {
    const user = await makeUser(srv.base, token, 'route-user', { roleAttributes: ['route-u'] });
    const svcId = await create('/services', {
      name: 'route-svc',
      encryptionRequired: true,
      roleAttributes: ['route-s'],
    });
    const er = await create('/edge-routers', { name: 'route-er', roleAttributes: ['route-r'] });
    await create('/service-policies', {
      name: 'route-sp',
      type: 'Dial',
      semantic: 'AllOf',
      identityRoles: ['#route-u'],
      serviceRoles: ['#route-s'],
    });
    await create('/edge-router-policies', {
      name: 'route-erp',
      semantic: 'AllOf',
      identityRoles: ['#route-u'],
      edgeRouterRoles: [`@${er}`],
    });
    await create('/service-edge-router-policies', {
      name: 'route-serp',
      semantic: 'AllOf',
      serviceRoles: ['#route-s'],
      edgeRouterRoles: [`@${er}`],
    });
    const made = await conformant(C, 'POST', '/sessions', srv.base, { token: user.token, body: { serviceId: svcId } });
    expect(made.status, made.text).toBe(201);
    // the edge routers a session may use are those online: none connects yet
    expect(made.body.data.edgeRouters).toEqual([]);
    const path = await conformant(M, 'GET', '/sessions/{id}/route-path', srv.base, {
      token,
      params: { id: made.body.data.id },
    });
    expect(path.status, path.text).toBe(200);
    expect(path.body.data).toEqual({ routePath: [] });
    expectError(
      await conformant(M, 'GET', '/sessions/{id}/route-path', srv.base, { token, params: { id: 'nope' } }),
      404,
      'NOT_FOUND',
    );
    // what reading sessions needs: a plain identity may not
    expectError(
      await conformant(M, 'GET', '/sessions/{id}/route-path', srv.base, {
        token: user.token,
        params: { id: made.body.data.id },
      }),
      401,
      'UNAUTHORIZED',
    );
  });

  it('GET /services/{id}/terminators: all of them (management), the limited view for a caller that may use it (client)', async () => {
    const user = await makeUser(srv.base, token, 'term-user', { roleAttributes: ['term-u'] });
    const svcId = await create('/services', { name: 'term-list-svc', encryptionRequired: true });
    const hidden = await create('/services', { name: 'term-hidden-svc', encryptionRequired: true });
    await create('/service-policies', {
      name: 'term-sp',
      type: 'Bind',
      semantic: 'AllOf',
      identityRoles: ['#term-u'],
      serviceRoles: [`@${svcId}`],
    });
    const router = await create('/routers', { name: 'term-list-router' });
    const term = await create('/terminators', {
      service: svcId,
      router,
      binding: 'edge',
      address: 'hosted:1',
      identity: 'host-a',
      identitySecret: 'c2VjcmV0',
    });
    await create('/terminators', { service: hidden, router, binding: 'edge', address: 'hosted:2' });
    const mgmt = await conformant(M, 'GET', '/services/{id}/terminators', srv.base, { token, params: { id: svcId } });
    expect(ids(mgmt)).toEqual([term]);
    expect(mgmt.body.data[0]).toMatchObject({ binding: 'edge', address: 'hosted:1', routerId: router });
    const filtered = await conformant(M, 'GET', '/services/{id}/terminators', srv.base, {
      token,
      params: { id: svcId },
      query: 'filter=binding%3D%22transport%22',
    });
    expect(ids(filtered)).toEqual([]);
    const client = await conformant(C, 'GET', '/services/{id}/terminators', srv.base, {
      token: user.token,
      params: { id: svcId },
    });
    expect(ids(client)).toEqual([term]);
    expect(client.body.data[0]).toMatchObject({
      identity: 'host-a',
      routerId: router,
      serviceId: svcId,
      service: { id: svcId, name: 'term-list-svc' },
    });
    // the limited view: no address, binding or secret
    expect(client.body.data[0].address).toBeUndefined();
    expect(client.text).not.toContain('c2VjcmV0');
    // a service the caller may not use does not exist for it; an unknown one neither, on either API
    for (const id of [hidden, 'nope']) {
      expectError(
        await conformant(C, 'GET', '/services/{id}/terminators', srv.base, { token: user.token, params: { id } }),
        404,
        'NOT_FOUND',
      );
    }
    expectError(
      await conformant(M, 'GET', '/services/{id}/terminators', srv.base, { token, params: { id: 'nope' } }),
      404,
      'NOT_FOUND',
    );
  });

  it('client PUT / PATCH / DELETE /services/{id}: 501 as OpenZiti (no handler), after the session and body checks', async () => {
    const user = await makeUser(srv.base, token, 'svc-writer');
    const svcId = await create('/services', { name: 'client-write-svc', encryptionRequired: true });
    for (const [method, body] of [
      ['PUT', { name: 'renamed' }],
      ['PATCH', { name: 'renamed' }],
      ['DELETE', undefined],
    ] as const) {
      for (const t of [user.token, token]) {
        const r = await conformant(C, method, '/services/{id}', srv.base, { token: t, params: { id: svcId }, body });
        expectError(r, 501, 'NOT_IMPLEMENTED');
      }
      expectError(
        await conformant(C, method, '/services/{id}', srv.base, { params: { id: svcId }, body }),
        401,
        'UNAUTHORIZED',
      );
    }
    expectError(
      await conformant(C, 'PUT', '/services/{id}', srv.base, { token: user.token, params: { id: svcId }, body: {} }),
      400,
      'COULD_NOT_VALIDATE',
    );
    // nothing changed
    expect((await get(`/services/${svcId}`)).body.data.name).toBe('client-write-svc');
  });
});

describe('policy advice and summary', () => {
  it('advice: dial / bind allowed, the routers of each side and those in common', async () => {
    const ivan = await identity('advice-ivan', ['ivan']);
    const svcId = await create('/services', { name: 'advice-svc', encryptionRequired: true, roleAttributes: ['av'] });
    const [r1, r2] = [
      await create('/edge-routers', { name: 'advice-r1', roleAttributes: ['ar', 'as'] }),
      await create('/edge-routers', { name: 'advice-r2', roleAttributes: ['ar'] }),
    ];
    const params = { id: ivan, serviceId: svcId };
    const advice = async () =>
      (await conformant(M, 'GET', '/identities/{id}/policy-advice/{serviceId}', srv.base, { token, params })).body.data;
    expect(await advice()).toMatchObject({
      identityId: ivan,
      serviceId: svcId,
      isDialAllowed: false,
      isBindAllowed: false,
      identityRouterCount: 0,
      serviceRouterCount: 0,
      commonRouters: [],
    });
    await create('/service-policies', {
      name: 'advice-bind',
      type: 'Bind',
      semantic: 'AllOf',
      identityRoles: ['#ivan'],
      serviceRoles: ['#av'],
    });
    await create('/edge-router-policies', {
      name: 'advice-erp',
      semantic: 'AllOf',
      identityRoles: ['#ivan'],
      edgeRouterRoles: ['#ar'],
    });
    await create('/service-edge-router-policies', {
      name: 'advice-serp',
      semantic: 'AllOf',
      serviceRoles: ['#av'],
      edgeRouterRoles: ['#as'],
    });
    expect(await advice()).toMatchObject({
      identity: { id: ivan, name: 'advice-ivan' },
      service: { id: svcId, name: 'advice-svc' },
      isDialAllowed: false,
      isBindAllowed: true,
      identityRouterCount: 2,
      serviceRouterCount: 1,
      commonRouters: [{ id: r1, name: 'advice-r1', isOnline: false }],
    });
    expect(r2).toBeTruthy();
    for (const p of [
      { id: 'nope', serviceId: svcId },
      { id: ivan, serviceId: 'nope' },
    ]) {
      expectError(
        await conformant(M, 'GET', '/identities/{id}/policy-advice/{serviceId}', srv.base, { token, params: p }),
        404,
        'NOT_FOUND',
      );
    }
  });

  it('summary: the count of each entity type the caller may list', async () => {
    const all = (await conformant(M, 'GET', '/summary', srv.base, { token })).body.data;
    expect(all.services).toBe((await get('/services?limit=1')).body.meta.pagination.totalCount);
    expect(all.identities).toBe((await get('/identities?limit=1')).body.meta.pagination.totalCount);
    expect(all.edgeRouterPolicies).toBeGreaterThanOrEqual(1);
    const reader = await userWith('summary-reader', ['service.read']);
    const scoped = (await conformant(M, 'GET', '/summary', srv.base, { token: reader })).body.data;
    expect(Object.keys(scoped)).toEqual(['services']);
    // rows hidden from the caller (enrollments of admin identities) are not counted, as its list does not count them
    const body = { name: 'summary-new-admin', type: 'User', isAdmin: true, enrollment: { ott: true } };
    expect((await call('POST', `${srv.mgmt}/identities`, { token, body })).status).toBe(201);
    const enrollmentReader = await userWith('summary-enrollments', ['enrollment.read']);
    const listed = await get('/enrollments?limit=1', enrollmentReader);
    expect(listed.status, listed.text).toBe(200);
    const counted = (await conformant(M, 'GET', '/summary', srv.base, { token: enrollmentReader })).body.data;
    expect(counted).toEqual({ enrollments: listed.body.meta.pagination.totalCount });
    const everything = (await conformant(M, 'GET', '/summary', srv.base, { token })).body.data;
    expect(everything.enrollments).toBe((await get('/enrollments?limit=1')).body.meta.pagination.totalCount);
    expect(everything.enrollments).toBeGreaterThan(counted.enrollments);
  });
});

describe('permissions', () => {
  it('service, config, service-policy, edge-router-policy, service-edge-router-policy, router (and .read/.create …)', async () => {
    const svcId = await create('/services', { name: 'perm-svc', encryptionRequired: true });
    const cases: { perm: string; path: string; body: Record<string, unknown> }[] = [
      { perm: 'service', path: '/services', body: { name: 'perm-s2', encryptionRequired: true } },
      { perm: 'router', path: '/edge-routers', body: { name: 'perm-er' } },
      {
        perm: 'service-policy',
        path: '/service-policies',
        body: { name: 'perm-sp', type: 'Dial', semantic: 'AllOf', serviceRoles: [`@${svcId}`] },
      },
      { perm: 'edge-router-policy', path: '/edge-router-policies', body: { name: 'perm-erp', semantic: 'AllOf' } },
      {
        perm: 'service-edge-router-policy',
        path: '/service-edge-router-policies',
        body: { name: 'perm-serp', semantic: 'AllOf' },
      },
    ];
    const nobody = await userWith('perm-nobody', []);
    const readonly = await userWith('perm-readonly', ['admin_readonly']);
    for (const { perm, path, body } of cases) {
      const full = await userWith(`perm-full-${perm}`, [perm]);
      const reader = await userWith(`perm-read-${perm}`, [`${perm}.read`]);
      const creator = await userWith(`perm-create-${perm}`, [`${perm}.create`]);
      const id = await create(path, body, full);
      expect((await get(`${path}/${id}`, reader)).status, `${perm}.read reads`).toBe(200);
      expect((await get(path, readonly)).status, 'admin_readonly reads').toBe(200);
      expectError(await get(path, nobody), 401, 'UNAUTHORIZED');
      expectError(
        await call('PATCH', `${srv.mgmt}${path}/${id}`, { token: reader, body: { tags: { a: 1 } } }),
        401,
        'UNAUTHORIZED',
      );
      expectError(await call('DELETE', `${srv.mgmt}${path}/${id}`, { token: creator }), 401, 'UNAUTHORIZED');
      expect((await call('DELETE', `${srv.mgmt}${path}/${id}`, { token: full })).status).toBe(200);
      const again = await call('POST', `${srv.mgmt}${path}`, { token: creator, body });
      expect(again.status, `${perm}.create creates`).toBe(201);
      // another entity type's permission grants nothing here
      const other = cases.find((c) => c.perm !== perm)!;
      expectError(
        await call('POST', `${srv.mgmt}${other.path}`, { token: creator, body: other.body }),
        401,
        'UNAUTHORIZED',
      );
    }
  });
});
