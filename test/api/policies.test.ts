/**
 * The policy semantics end to end over HTTP, as an identity sees them on the client API (`GET /services` with its
 * `permissions`) and as the management association lists show them: AllOf vs AnyOf, `#all`, `@id`, role attribute
 * changes on either side adding and removing access, policy update and delete, edge routers of identities and
 * services, and the same answers after a restart (the role indexes rebuilt from the store).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ids, userWith } from '../support/api.js';
import { conformant } from '../support/conformance.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let token: string;

beforeAll(async () => {
  srv = await startServer();
  token = await login(srv.base);
});
afterAll(async () => {
  await srv.stop();
});

const mgmt = (method: string, path: string, body?: unknown) => call(method, `${srv.mgmt}${path}`, { token, body });

async function create(path: string, body: Record<string, unknown>): Promise<string> {
  const r = await mgmt('POST', path, body);
  expect(r.status, r.text).toBe(201);
  return r.body.data.id;
}

async function patch(path: string, body: Record<string, unknown>): Promise<void> {
  const r = await mgmt('PATCH', path, body);
  expect(r.status, r.text).toBe(200);
}

const service = (name: string, roleAttributes: string[] = []) =>
  create('/services', { name, encryptionRequired: true, roleAttributes });

const policy = (name: string, type: 'Dial' | 'Bind', semantic: 'AllOf' | 'AnyOf', i: string[], s: string[]) =>
  create('/service-policies', { name, type, semantic, identityRoles: i, serviceRoles: s });

/** What the identity sees: service id → its permissions, from the client API (validated against the spec). */
async function seen(userToken: string): Promise<Record<string, string[]>> {
  const r = await conformant('client', 'GET', '/services', srv.base, { token: userToken, query: 'limit=500' });
  expect(r.status, r.text).toBe(200);
  const out: Record<string, string[]> = {};
  for (const s of r.body.data as { id: string; permissions: string[] }[]) out[s.id] = [...s.permissions].sort();
  return out;
}

describe('service policies', () => {
  it('AllOf needs every attribute, AnyOf one; an identity gaining or losing attributes gains or loses access', async () => {
    const u = await userWith(srv.base, token, 'sem-user', { roleAttributes: ['a'] });
    const s1 = await service('sem-s1', ['sem']);
    const allOf = await policy('sem-all', 'Dial', 'AllOf', ['#a', '#b'], ['#sem']);
    expect(await seen(u.token)).toEqual({});
    const anyOf = await policy('sem-any', 'Bind', 'AnyOf', ['#a', '#b'], ['#sem']);
    expect(await seen(u.token)).toEqual({ [s1]: ['Bind'] });

    await patch(`/identities/${u.id}`, { roleAttributes: ['a', 'b'] });
    expect(await seen(u.token)).toEqual({ [s1]: ['Bind', 'Dial'] });
    expect(ids(await mgmt('GET', `/identities/${u.id}/service-policies`))).toEqual([allOf, anyOf].sort());

    await patch(`/identities/${u.id}`, { roleAttributes: ['b'] });
    expect(await seen(u.token)).toEqual({ [s1]: ['Bind'] });
    await patch(`/identities/${u.id}`, { roleAttributes: [] });
    expect(await seen(u.token)).toEqual({});
    expect(ids(await mgmt('GET', `/services/${s1}/identities`))).toEqual([]);
  });

  it('a service gaining or losing attributes gains or loses its callers', async () => {
    const u = await userWith(srv.base, token, 'svc-side-user', { roleAttributes: ['svc-side'] });
    const s1 = await service('svc-side-s1', ['x']);
    await policy('svc-side-dial', 'Dial', 'AllOf', ['#svc-side'], ['#x', '#y']);
    expect(await seen(u.token)).toEqual({});
    await patch(`/services/${s1}`, { roleAttributes: ['x', 'y'] });
    expect(await seen(u.token)).toEqual({ [s1]: ['Dial'] });
    expect(ids(await mgmt('GET', `/identities/${u.id}/services`))).toEqual([s1]);
    await patch(`/services/${s1}`, { roleAttributes: ['y'] });
    expect(await seen(u.token)).toEqual({});
    expect(ids(await mgmt('GET', `/identities/${u.id}/services`))).toEqual([]);
  });

  it('#all selects every identity and service, including those created later', async () => {
    const p = await policy('all-dial', 'Dial', 'AllOf', ['#all'], ['#all-target']);
    const late = await userWith(srv.base, token, 'all-late-user');
    const s1 = await service('all-s1', ['all-target']);
    expect(await seen(late.token)).toMatchObject({ [s1]: ['Dial'] });
    expect(ids(await mgmt('GET', `/service-policies/${p}/identities`))).toContain(late.id);
    // #all on the service side too: every service, whatever its attributes
    await patch(`/service-policies/${p}`, { serviceRoles: ['#all'] });
    const s2 = await service('all-s2');
    const view = await seen(late.token);
    expect(view[s1]).toEqual(['Dial']);
    expect(view[s2]).toEqual(['Dial']);
    await mgmt('DELETE', `/service-policies/${p}`);
    expect(await seen(late.token)).toEqual({});
  });

  it('@id selects that entity alone, whatever its attributes; deleting it takes it off the policy', async () => {
    const named = await userWith(srv.base, token, 'id-named', { roleAttributes: ['other'] });
    const peer = await userWith(srv.base, token, 'id-peer', { roleAttributes: ['other'] });
    const s1 = await service('id-s1');
    const p = await policy('id-bind', 'Bind', 'AllOf', [`@${named.id}`], [`@${s1}`]);
    expect(await seen(named.token)).toEqual({ [s1]: ['Bind'] });
    expect(await seen(peer.token)).toEqual({});
    // @id and #attr are OR'ed
    await patch(`/service-policies/${p}`, { identityRoles: [`@${named.id}`, '#other'] });
    expect(await seen(peer.token)).toEqual({ [s1]: ['Bind'] });
    await mgmt('DELETE', `/services/${s1}`);
    expect(await seen(named.token)).toEqual({});
    expect((await mgmt('GET', `/service-policies/${p}`)).body.data.serviceRoles).toEqual([]);
  });

  it('updating a policy (type, roles, semantic) and deleting it change access at once', async () => {
    const u = await userWith(srv.base, token, 'upd-user', { roleAttributes: ['upd'] });
    const s1 = await service('upd-s1', ['upd-a']);
    const s2 = await service('upd-s2', ['upd-b']);
    const p = await policy('upd-policy', 'Dial', 'AnyOf', ['#upd'], ['#upd-a']);
    expect(await seen(u.token)).toEqual({ [s1]: ['Dial'] });
    await patch(`/service-policies/${p}`, { type: 'Bind' });
    expect(await seen(u.token)).toEqual({ [s1]: ['Bind'] });
    await patch(`/service-policies/${p}`, { serviceRoles: ['#upd-a', '#upd-b'] });
    expect(await seen(u.token)).toEqual({ [s1]: ['Bind'], [s2]: ['Bind'] });
    // AllOf: no service holds both
    await patch(`/service-policies/${p}`, { semantic: 'AllOf' });
    expect(await seen(u.token)).toEqual({});
    const put = await mgmt('PUT', `/service-policies/${p}`, {
      name: 'upd-policy',
      type: 'Dial',
      semantic: 'AnyOf',
      identityRoles: ['#upd'],
      serviceRoles: ['#upd-b'],
    });
    expect(put.status, put.text).toBe(200);
    expect(await seen(u.token)).toEqual({ [s2]: ['Dial'] });
    const second = await policy('upd-second', 'Bind', 'AnyOf', [`@${u.id}`], ['#upd-b']);
    expect(await seen(u.token)).toEqual({ [s2]: ['Bind', 'Dial'] });
    expect((await mgmt('DELETE', `/service-policies/${p}`)).status).toBe(200);
    expect(await seen(u.token)).toEqual({ [s2]: ['Bind'] });
    expect((await mgmt('DELETE', `/service-policies/${second}`)).status).toBe(200);
    expect(await seen(u.token)).toEqual({});
  });

  it('a policy naming attributes nobody holds yet matches nothing and breaks nothing', async () => {
    const p = await policy('absent', 'Dial', 'AllOf', ['#nobody-has-this', '#nor-this'], ['#no-service']);
    expect(ids(await mgmt('GET', `/service-policies/${p}/identities`))).toEqual([]);
    const u = await userWith(srv.base, token, 'absent-user', { roleAttributes: ['nobody-has-this', 'nor-this'] });
    const s1 = await service('absent-s1', ['no-service']);
    expect(await seen(u.token)).toEqual({ [s1]: ['Dial'] });
  });
});

describe('edge router policies and service edge router policies', () => {
  it("an identity's and a service's edge routers follow the policies and both sides' attributes", async () => {
    const u = await userWith(srv.base, token, 'er-user', { roleAttributes: ['er-team'] });
    const s1 = await service('er-s1', ['er-app']);
    const east = await create('/edge-routers', { name: 'er-east', roleAttributes: ['er-east'] });
    const west = await create('/edge-routers', { name: 'er-west', roleAttributes: ['er-west'] });
    const erp = await create('/edge-router-policies', {
      name: 'er-team-east',
      semantic: 'AnyOf',
      identityRoles: ['#er-team'],
      edgeRouterRoles: ['#er-east'],
    });
    expect(ids(await mgmt('GET', `/identities/${u.id}/edge-routers`))).toEqual([east]);
    await patch(`/edge-routers/${west}`, { roleAttributes: ['er-west', 'er-east'] });
    expect(ids(await mgmt('GET', `/identities/${u.id}/edge-routers`))).toEqual([east, west].sort());
    expect(ids(await mgmt('GET', `/edge-routers/${west}/identities`))).toEqual([u.id]);
    await patch(`/identities/${u.id}`, { roleAttributes: [] });
    expect(ids(await mgmt('GET', `/identities/${u.id}/edge-routers`))).toEqual([]);

    const serp = await create('/service-edge-router-policies', {
      name: 'er-app-west',
      semantic: 'AllOf',
      serviceRoles: ['#er-app'],
      edgeRouterRoles: [`@${west}`],
    });
    expect(ids(await mgmt('GET', `/services/${s1}/edge-routers`))).toEqual([west]);
    expect(ids(await mgmt('GET', `/edge-routers/${west}/services`))).toEqual([s1]);
    await mgmt('DELETE', `/edge-routers/${west}`);
    expect(ids(await mgmt('GET', `/services/${s1}/edge-routers`))).toEqual([]);
    expect((await mgmt('GET', `/service-edge-router-policies/${serp}`)).body.data.edgeRouterRoles).toEqual([]);
    await mgmt('DELETE', `/edge-router-policies/${erp}`);
    expect(ids(await mgmt('GET', `/edge-routers/${east}/identities`))).toEqual([]);
  });
});

describe('restart', () => {
  it('answers the same after a restart: the role indexes are rebuilt from the store', async () => {
    const u = await userWith(srv.base, token, 'restart-user', { roleAttributes: ['restart'] });
    const s1 = await service('restart-s1', ['restart-svc']);
    await policy('restart-dial', 'Dial', 'AnyOf', ['#restart'], ['#restart-svc']);
    const before = await seen(u.token);
    expect(before).toEqual({ [s1]: ['Dial'] });
    const dataDir = srv.dataDir;
    await srv.stop({ keepData: true });
    srv = await startServer({ dataDir });
    token = await login(srv.base);
    const again = await login(srv.base, 'restart-user', 'restart-user-pass');
    expect(await seen(again)).toEqual(before);
    expect(ids(await mgmt('GET', `/services/${s1}/identities`))).toEqual([u.id]);
  });
});
