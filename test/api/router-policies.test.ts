/**
 * The scenario suite's edge router half (the service policy half is policies.test.ts): edge router policies and
 * service edge router policies end to end, as an identity sees them on the client API — `current-identity/edge-routers`,
 * `services/{id}/edge-routers`, and session create succeeding or answering 400 NO_EDGE_ROUTERS_AVAILABLE: AllOf vs
 * AnyOf on both role lists, `#all`, policy updates and deletes, role attribute changes of routers, and OpenZiti's
 * rule for disabled routers (they still count for NO_EDGE_ROUTERS_AVAILABLE).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminApi } from '../support/admin-api.js';
import { expectError, userWith } from '../support/api.js';
import { enrolledRouter, enrollRouter } from '../support/router-client.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let admin: string;

beforeAll(async () => {
  srv = await startServer();
  admin = await login(srv.base);
});
afterAll(() => srv.stop());

const { mgmt, create, patch } = adminApi(
  () => srv,
  () => admin,
);

/** A new edge router, enrolled (verified): the client lists only those (OpenZiti's `isVerified = true`). */
const router = async (name: string, roleAttributes: string[] = []) =>
  (await enrolledRouter(srv.mgmt, srv.client, admin, { name, roleAttributes })).id;
const erp = (name: string, semantic: string, identityRoles: string[], edgeRouterRoles: string[]) =>
  create('/edge-router-policies', { name, semantic, identityRoles, edgeRouterRoles });
const serp = (name: string, semantic: string, serviceRoles: string[], edgeRouterRoles: string[]) =>
  create('/service-edge-router-policies', { name, semantic, serviceRoles, edgeRouterRoles });

/** A service the identity selected by `identityRole` may dial. */
async function dialable(name: string, identityRole: string, roleAttributes: string[] = []): Promise<string> {
  const id = await create('/services', { name, encryptionRequired: true, roleAttributes });
  await create('/service-policies', {
    name: `${name}-dial`,
    type: 'Dial',
    semantic: 'AnyOf',
    identityRoles: [identityRole],
    serviceRoles: [`@${id}`],
  });
  return id;
}

/** The caller's edge routers (client API), by name. */
async function mine(token: string): Promise<string[]> {
  const r = await call('GET', `${srv.client}/current-identity/edge-routers?limit=500`, { token });
  expect(r.status, r.text).toBe(200);
  return r.body.data.map((x: { name: string }) => x.name).sort();
}

/** The routers through which the caller may reach the service (client API), by name. */
async function viaService(token: string, serviceId: string): Promise<string[]> {
  const r = await call('GET', `${srv.client}/services/${serviceId}/edge-routers?limit=500`, { token });
  expect(r.status, r.text).toBe(200);
  return r.body.data.edgeRouters.map((x: { name: string }) => x.name).sort();
}

/** Session create's answer: 201 or the error code. */
async function sessionFor(token: string, serviceId: string): Promise<number | string> {
  const r = await call('POST', `${srv.client}/sessions`, { token, body: { serviceId } });
  return r.status === 201 ? 201 : r.body?.error?.code;
}

describe('edge router policies', () => {
  it('AllOf needs every attribute on both lists, AnyOf one; identities and routers gaining or losing them', async () => {
    const u = await userWith(srv.base, admin, 'erp-sem-user', { roleAttributes: ['sem-a'] });
    await router('sem-r1', ['sem-x']);
    const r2 = await router('sem-r2', ['sem-x', 'sem-y']);
    const p = await erp('erp-sem', 'AllOf', ['#sem-a', '#sem-b'], ['#sem-x', '#sem-y']);
    expect(await mine(u.token)).toEqual([]);
    await patch(`/identities/${u.id}`, { roleAttributes: ['sem-a', 'sem-b'] });
    expect(await mine(u.token)).toEqual(['sem-r2']);
    // AnyOf: one attribute on each side is enough
    await patch(`/edge-router-policies/${p}`, { semantic: 'AnyOf' });
    expect(await mine(u.token)).toEqual(['sem-r1', 'sem-r2']);
    await patch(`/identities/${u.id}`, { roleAttributes: ['sem-b'] });
    expect(await mine(u.token)).toEqual(['sem-r1', 'sem-r2']);
    // a router losing its attributes leaves; back to AllOf, a router gaining both joins
    await patch(`/edge-routers/${r2}`, { roleAttributes: [] });
    expect(await mine(u.token)).toEqual(['sem-r1']);
    await patch(`/edge-router-policies/${p}`, { semantic: 'AllOf', identityRoles: ['#sem-b'] });
    expect(await mine(u.token)).toEqual([]);
    await patch(`/edge-routers/${r2}`, { roleAttributes: ['sem-y', 'sem-x'] });
    expect(await mine(u.token)).toEqual(['sem-r2']);
    await patch(`/identities/${u.id}`, { roleAttributes: [] });
    expect(await mine(u.token)).toEqual([]);
    expect((await mgmt('DELETE', `/edge-router-policies/${p}`)).status).toBe(200);
  });

  it("the caller's routers are the verified (enrolled) ones; an admin's are every verified router", async () => {
    const u = await userWith(srv.base, admin, 'erp-ver-user', { roleAttributes: ['ver-u'] });
    const unenrolled = await create('/edge-routers', { name: 'ver-new-r', roleAttributes: ['ver-r'] });
    await router('ver-old-r', ['ver-r']);
    const p = await erp('erp-ver', 'AnyOf', ['#ver-u'], ['#ver-r']);
    // the policy grants both; the one not enrolled yet is left out of the page and of the count alike
    expect(await mine(u.token)).toEqual(['ver-old-r']);
    const counted = await call(
      'GET',
      `${srv.client}/current-identity/edge-routers?filter=${encodeURIComponent('name contains "ver-"')}`,
      { token: u.token },
    );
    expect(counted.body.meta.pagination.totalCount).toBe(1);
    await enrollRouter(srv.mgmt, srv.client, admin, unenrolled);
    expect(await mine(u.token)).toEqual(['ver-new-r', 'ver-old-r']);
    // an admin (no policy names it) lists every verified router, and no other
    await create('/edge-routers', { name: 'ver-never-r' });
    const mgmtAll = (await mgmt('GET', '/edge-routers?limit=500')).body.data as { name: string; isVerified: boolean }[];
    const verified = mgmtAll
      .filter((r) => r.isVerified)
      .map((r) => r.name)
      .sort();
    expect(verified).toContain('ver-new-r');
    expect(verified).not.toContain('ver-never-r');
    expect(await mine(admin)).toEqual(verified);
    expect((await mgmt('DELETE', `/edge-router-policies/${p}`)).status).toBe(200);
  });

  it('#all selects every router (and every identity), including those created later', async () => {
    const u = await userWith(srv.base, admin, 'erp-all-user');
    const p = await erp('erp-all', 'AllOf', [`@${u.id}`], ['#all']);
    await router('all-late-r');
    const all = await mine(u.token);
    expect(all).toContain('all-late-r');
    const verified = await mgmt('GET', `/edge-routers?limit=500&filter=${encodeURIComponent('isVerified = true')}`);
    expect(all.length).toBe(verified.body.data.length);
    // #all identities: a later identity gets the routers named
    await patch(`/edge-router-policies/${p}`, { identityRoles: ['#all'], edgeRouterRoles: ['#all-only'] });
    await router('all-only-r', ['all-only']);
    const later = await userWith(srv.base, admin, 'erp-all-later');
    expect(await mine(later.token)).toEqual(['all-only-r']);
    expect((await mgmt('DELETE', `/edge-router-policies/${p}`)).status).toBe(200);
    expect(await mine(later.token)).toEqual([]);
  });
});

describe('service edge router policies', () => {
  it('AllOf vs AnyOf on the service and router lists; #all services; services/{id}/edge-routers', async () => {
    const u = await userWith(srv.base, admin, 'serp-user', { roleAttributes: ['serp-u'] });
    const s1 = await dialable('serp-s1', '#serp-u', ['serp-a']);
    await router('serp-r1', ['serp-x']);
    await router('serp-r2', ['serp-x', 'serp-y']);
    const toMine = await erp('serp-mine', 'AnyOf', ['#serp-u'], ['#serp-x']);
    const p = await serp('serp-sem', 'AllOf', ['#serp-a', '#serp-b'], ['#serp-x', '#serp-y']);
    expect(await viaService(u.token, s1)).toEqual([]);
    expect(await sessionFor(u.token, s1)).toBe('NO_EDGE_ROUTERS_AVAILABLE');
    await patch(`/services/${s1}`, { roleAttributes: ['serp-a', 'serp-b'] });
    expect(await viaService(u.token, s1)).toEqual(['serp-r2']);
    expect(await sessionFor(u.token, s1)).toBe(201);
    await patch(`/service-edge-router-policies/${p}`, { semantic: 'AnyOf' });
    expect(await viaService(u.token, s1)).toEqual(['serp-r1', 'serp-r2']);
    await patch(`/services/${s1}`, { roleAttributes: [] });
    expect(await viaService(u.token, s1)).toEqual([]);
    // #all services: a later service reaches the routers named
    await patch(`/service-edge-router-policies/${p}`, { serviceRoles: ['#all'], edgeRouterRoles: ['#serp-y'] });
    const s2 = await dialable('serp-s2', '#serp-u');
    expect(await viaService(u.token, s2)).toEqual(['serp-r2']);
    expect(await viaService(u.token, s1)).toEqual(['serp-r2']);
    // only the routers both sides allow: the identity's policy no longer gives serp-r2
    await patch(`/edge-router-policies/${toMine}`, { edgeRouterRoles: [`@${await idOf('serp-r1')}`] });
    expect(await viaService(u.token, s2)).toEqual([]);
    expect(await sessionFor(u.token, s2)).toBe('NO_EDGE_ROUTERS_AVAILABLE');
    for (const path of [`/service-edge-router-policies/${p}`, `/edge-router-policies/${toMine}`]) {
      expect((await mgmt('DELETE', path)).status).toBe(200);
    }
  });
});

async function idOf(routerName: string): Promise<string> {
  const r = await mgmt('GET', `/edge-routers?filter=${encodeURIComponent(`name = "${routerName}"`)}`);
  return r.body.data[0].id;
}

describe('session create follows router policy updates and deletes', () => {
  it('adding, narrowing, restoring and deleting either policy grants and withdraws the edge router', async () => {
    const u = await userWith(srv.base, admin, 'upd-er-user', { roleAttributes: ['upd-er'] });
    const s = await dialable('upd-er-s', '#upd-er', ['upd-er-svc']);
    const r = await router('upd-er-r', ['upd-er-router']);
    expect(await sessionFor(u.token, s)).toBe('NO_EDGE_ROUTERS_AVAILABLE');
    const p1 = await erp('upd-er-erp', 'AnyOf', ['#upd-er'], [`@${r}`]);
    expect(await mine(u.token)).toEqual(['upd-er-r']);
    // the identity's router alone is not enough
    expect(await sessionFor(u.token, s)).toBe('NO_EDGE_ROUTERS_AVAILABLE');
    const p2 = await serp('upd-er-serp', 'AnyOf', ['#upd-er-svc'], ['#upd-er-router']);
    expect(await sessionFor(u.token, s)).toBe(201);
    // narrowing the service side (PATCH), then restoring it (PUT)
    await patch(`/service-edge-router-policies/${p2}`, { edgeRouterRoles: ['#nobody-has-this'] });
    expect(await viaService(u.token, s)).toEqual([]);
    expect(await sessionFor(u.token, s)).toBe('NO_EDGE_ROUTERS_AVAILABLE');
    const put = await mgmt('PUT', `/service-edge-router-policies/${p2}`, {
      name: 'upd-er-serp',
      semantic: 'AnyOf',
      serviceRoles: ['#upd-er-svc'],
      edgeRouterRoles: ['#upd-er-router'],
    });
    expect(put.status, put.text).toBe(200);
    expect(await sessionFor(u.token, s)).toBe(201);
    // the router losing the attribute the service side names
    await patch(`/edge-routers/${r}`, { roleAttributes: [] });
    expect(await sessionFor(u.token, s)).toBe('NO_EDGE_ROUTERS_AVAILABLE');
    await patch(`/edge-routers/${r}`, { roleAttributes: ['upd-er-router'] });
    expect(await sessionFor(u.token, s)).toBe(201);
    // narrowing the identity side, then deleting it
    await patch(`/edge-router-policies/${p1}`, { identityRoles: ['#nobody-has-this'] });
    expect(await mine(u.token)).toEqual([]);
    expect(await sessionFor(u.token, s)).toBe('NO_EDGE_ROUTERS_AVAILABLE');
    await patch(`/edge-router-policies/${p1}`, { identityRoles: ['#upd-er'] });
    expect(await sessionFor(u.token, s)).toBe(201);
    expect((await mgmt('DELETE', `/edge-router-policies/${p1}`)).status).toBe(200);
    expect(await mine(u.token)).toEqual([]);
    expect(await sessionFor(u.token, s)).toBe('NO_EDGE_ROUTERS_AVAILABLE');
    // and the service side deleted too
    await erp('upd-er-erp2', 'AnyOf', ['#upd-er'], ['#upd-er-router']);
    expect(await sessionFor(u.token, s)).toBe(201);
    expect((await mgmt('DELETE', `/service-edge-router-policies/${p2}`)).status).toBe(200);
    expect(await sessionFor(u.token, s)).toBe('NO_EDGE_ROUTERS_AVAILABLE');
  });

  it("a disabled router still counts for NO_EDGE_ROUTERS_AVAILABLE (OpenZiti's IsSharedEdgeRouterPresent)", async () => {
    const u = await userWith(srv.base, admin, 'dis-er-user', { roleAttributes: ['dis-er'] });
    const s = await dialable('dis-er-s', '#dis-er');
    const r = await router('dis-er-r');
    await erp('dis-er-erp', 'AnyOf', ['#dis-er'], [`@${r}`]);
    await serp('dis-er-serp', 'AnyOf', [`@${s}`], [`@${r}`]);
    await patch(`/edge-routers/${r}`, { disabled: true });
    // still listed (disabled shown), still enough for a session, which lists no router: a disabled one never connects
    const listed = await call('GET', `${srv.client}/current-identity/edge-routers`, { token: u.token });
    expect(listed.body.data.map((x: any) => [x.name, x.disabled, x.isOnline])).toEqual([['dis-er-r', true, false]]);
    const made = await call('POST', `${srv.client}/sessions`, { token: u.token, body: { serviceId: s } });
    expect(made.status, made.text).toBe(201);
    expect(made.body.data.edgeRouters).toEqual([]);
    expect((await mgmt('DELETE', `/edge-routers/${r}`)).status).toBe(200);
    expectError(
      await call('POST', `${srv.client}/sessions`, { token: u.token, body: { serviceId: s } }),
      400,
      'NO_EDGE_ROUTERS_AVAILABLE',
    );
  });
});
