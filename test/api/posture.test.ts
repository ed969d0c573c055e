/**
 * Posture checks: CRUD of every type with its validation errors, posture check types, role attributes, the service
 * policy association; posture responses (single and bulk) evaluated into the client's `postureQueries`, session
 * creation allowed or refused with 409 INVALID_POSTURE (recorded as a failed service request), and the identity's
 * posture data. Every call goes through the conformance helper (responses validated against OpenZiti's schemas).
 */
import { generate } from 'otplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MFA_PROMPT_GRACE_S } from '../../src/model/posture.js';
import { MAX_BULK_RESPONSES, MAX_RESPONSE_LIST } from '../../src/model/posture-wire.js';
import { expectError, ids, interceptNextWrite } from '../support/api.js';
import { manualClock } from '../support/clock.js';
import { conformant, ownOperations } from '../support/conformance.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

const clock = manualClock();

let srv: TestServer;
let token: string;
const M = 'management' as const;
const C = 'client' as const;

beforeAll(async () => {
  srv = await startServer({ clock });
  token = await login(srv.base);
});
afterAll(async () => {
  const { served, missing } = ownOperations('test/api/posture.test.ts', srv.ctl.ops);
  await srv.stop();
  expect(served.length).toBeGreaterThan(8);
  expect(missing).toEqual([]);
});

const mgmt = (method: string, path: string, body?: unknown, t = token) =>
  conformant(M, method, path, srv.base, { token: t, body });

async function create(path: string, body: unknown): Promise<string> {
  const r = await mgmt('POST', path, body);
  expect(r.status, r.text).toBe(201);
  return r.body.data.id;
}

const VALID: Record<string, Record<string, unknown>> = {
  OS: {
    operatingSystems: [
      { type: 'Windows', versions: ['>=10.0.19041'] },
      { type: 'Linux', versions: [] },
    ],
  },
  PROCESS: { process: { osType: 'Linux', path: '/usr/bin/agent', hashes: ['ABCDEF01'], signerFingerprint: 'AA11' } },
  PROCESS_MULTI: { semantic: 'AnyOf', processes: [{ osType: 'Windows', path: 'C:\\agent.exe' }] },
  DOMAIN: { domains: ['Corp.Example'] },
  MAC: { macAddresses: ['AA:BB:CC:DD:EE:FF'] },
  MFA: { timeoutSeconds: 300, promptOnWake: true },
};

describe('posture checks', () => {
  it('version counts every change, also of writes racing (counted where they apply)', async () => {
    const id = await create('/posture-checks', { name: 'pc-raced', typeId: 'MFA' });
    // the second PATCH is checked first and applied after the first: both changes count
    interceptNextWrite(srv.ctl.svc)(() =>
      mgmt('PATCH', `/posture-checks/${id}`, { typeId: 'MFA', timeoutSeconds: 60 }),
    );
    const second = await mgmt('PATCH', `/posture-checks/${id}`, { typeId: 'MFA', name: 'pc-raced-2' });
    expect(second.status, second.text).toBe(200);
    const after = (await mgmt('GET', `/posture-checks/${id}`)).body.data;
    expect(after).toMatchObject({ name: 'pc-raced-2', timeoutSeconds: 60, version: 3 });
  });

  it('CRUD of every type: detail shows its own fields, normalised; version counts changes; typeId is immutable', async () => {
    for (const [typeId, fields] of Object.entries(VALID)) {
      const id = await create('/posture-checks', { name: `pc-${typeId}`, typeId, roleAttributes: ['crud'], ...fields });
      const r = await mgmt('GET', `/posture-checks/${id}`);
      expect(r.status, r.text).toBe(200);
      expect(r.body.data).toMatchObject({ name: `pc-${typeId}`, typeId, version: 1, roleAttributes: ['crud'] });
      for (const other of Object.keys(VALID).filter((t) => t !== typeId)) {
        for (const f of Object.keys(VALID[other]!)) if (!(f in fields)) expect(r.body.data).not.toHaveProperty(f);
      }
      const patched = await mgmt('PATCH', `/posture-checks/${id}`, { typeId, name: `pc-${typeId}-2`, tags: { t: 1 } });
      expect(patched.status, patched.text).toBe(200);
      const after = (await mgmt('GET', `/posture-checks/${id}`)).body.data;
      expect(after).toMatchObject({ name: `pc-${typeId}-2`, version: 2, tags: { t: 1 } });
      const other = typeId === 'MFA' ? 'OS' : 'MFA';
      expectError(await mgmt('PATCH', `/posture-checks/${id}`, { typeId: other }), 400, 'COULD_NOT_VALIDATE', 'typeId');
    }
    const byName = async (n: string) =>
      (await mgmt('GET', `/posture-checks?filter=${encodeURIComponent(`name="${n}"`)}`)).body.data[0];
    expect((await byName('pc-MAC-2')).macAddresses).toEqual(['aabbccddeeff']);
    expect((await byName('pc-DOMAIN-2')).domains).toEqual(['corp.example']);
    expect((await byName('pc-PROCESS-2')).process).toMatchObject({ hashes: ['abcdef01'], signerFingerprint: 'aa11' });
    expect(await byName('pc-MFA-2')).toMatchObject({
      timeoutSeconds: 300,
      promptOnWake: true,
      promptOnUnlock: false,
      ignoreLegacyEndpoints: false,
    });
    const os = await byName('pc-OS-2');
    const put = await mgmt('PUT', `/posture-checks/${os.id}`, {
      name: 'pc-os-put',
      operatingSystems: [{ type: 'macOS', versions: ['>=13'] }],
    });
    expect(put.status, put.text).toBe(200);
    expect((await mgmt('GET', `/posture-checks/${os.id}`)).body.data).toMatchObject({
      name: 'pc-os-put',
      version: 3,
      operatingSystems: [{ type: 'macOS', versions: ['>=13'] }],
      roleAttributes: [],
    });
    const list = await mgmt('GET', '/posture-checks?filter=typeId="MAC"');
    expect(list.body.data.map((c: { typeId: string }) => c.typeId)).toEqual(['MAC']);
    const del = await conformant(M, 'DELETE', '/posture-checks/{id}', srv.base, { token, params: { id: os.id } });
    expect(del.status, del.text).toBe(200);
    expectError(await mgmt('GET', `/posture-checks/${os.id}`), 404, 'NOT_FOUND');
  });

  it('validation errors per type', async () => {
    const bad = async (body: Record<string, unknown>, field: string) =>
      expectError(await mgmt('POST', '/posture-checks', { name: 'bad', ...body }), 400, 'COULD_NOT_VALIDATE', field);
    await bad({ typeId: 'NOPE' }, 'typeId');
    await bad({ operatingSystems: [] }, 'typeId');
    await bad({ typeId: 'OS' }, 'operatingSystems');
    await bad({ typeId: 'OS', operatingSystems: [] }, 'operatingSystems');
    await bad({ typeId: 'OS', operatingSystems: [{ type: 'BeOS', versions: [] }] }, 'operatingSystems.0.type');
    await bad(
      { typeId: 'OS', operatingSystems: [{ type: 'Linux', versions: ['>=banana'] }] },
      'operatingSystems.0.versions',
    );
    await bad({ typeId: 'PROCESS' }, 'process');
    await bad({ typeId: 'PROCESS', process: { osType: 'Linux' } }, 'process.path');
    await bad({ typeId: 'PROCESS', process: { osType: 'Linux', path: '/a', hashes: ['xyz'] } }, 'process.hashes');
    await bad({ typeId: 'PROCESS_MULTI', processes: [{ osType: 'Linux', path: '/a' }] }, 'semantic');
    await bad({ typeId: 'PROCESS_MULTI', semantic: 'AllOf', processes: [] }, 'processes');
    await bad({ typeId: 'DOMAIN', domains: [] }, 'domains');
    await bad({ typeId: 'DOMAIN', domains: [' '] }, 'domains');
    await bad({ typeId: 'MAC', macAddresses: ['not-a-mac'] }, 'macAddresses');
    await bad({ typeId: 'MAC', macAddresses: Array.from({ length: 101 }, () => 'aabbccddeeff') }, 'macAddresses');
    await bad({ typeId: 'MFA', timeoutSeconds: -2 }, 'timeoutSeconds');
    await bad({ typeId: 'MFA', roleAttributes: ['#x'] }, 'roleAttributes');
    await create('/posture-checks', { name: 'dup', typeId: 'MFA' });
    const dup = await mgmt('POST', '/posture-checks', { name: 'dup', typeId: 'MFA' });
    expect(dup.status, dup.text).toBe(400);
  });

  it('types, role attributes, and the service policies that select checks', async () => {
    const types = await mgmt('GET', '/posture-check-types');
    expect(types.status, types.text).toBe(200);
    expect(types.body.data.map((t: { id: string }) => t.id).sort()).toEqual(
      ['DOMAIN', 'MAC', 'MFA', 'OS', 'PROCESS', 'PROCESS_MULTI'].sort(),
    );
    const one = await conformant(M, 'GET', '/posture-check-types/{id}', srv.base, { token, params: { id: 'OS' } });
    expect(one.body.data).toMatchObject({ id: 'OS', name: 'Operating System' });
    expectError(await mgmt('GET', '/posture-check-types/NOPE'), 404, 'NOT_FOUND');

    const a = await create('/posture-checks', {
      name: 'attr-a',
      typeId: 'MFA',
      roleAttributes: ['pc-green', 'pc-blue'],
    });
    const b = await create('/posture-checks', {
      name: 'attr-b',
      typeId: 'DOMAIN',
      domains: ['x'],
      roleAttributes: ['pc-blue'],
    });
    const attrs = await mgmt('GET', `/posture-check-role-attributes?filter=${encodeURIComponent('id contains "pc-"')}`);
    expect(attrs.body.data).toEqual(['pc-blue', 'pc-green']);
    const sp = await create('/service-policies', {
      name: 'sp-posture',
      type: 'Dial',
      semantic: 'AllOf',
      postureCheckRoles: ['#pc-blue'],
    });
    const listed = await conformant(M, 'GET', '/service-policies/{id}/posture-checks', srv.base, {
      token,
      params: { id: sp },
    });
    expect(ids(listed)).toEqual([a, b].sort());
    expectError(
      await mgmt('POST', '/service-policies', {
        name: 'sp-bad',
        type: 'Dial',
        semantic: 'AllOf',
        postureCheckRoles: ['@nope'],
      }),
      400,
      'COULD_NOT_VALIDATE',
      'postureCheckRoles',
    );
    await mgmt('PATCH', `/posture-checks/${b}`, { typeId: 'DOMAIN', roleAttributes: [] });
    expect(ids(await mgmt('GET', `/service-policies/${sp}/posture-checks`))).toEqual([a]);
    const detail = (await mgmt('GET', `/service-policies/${sp}`)).body.data;
    expect(detail.postureCheckRolesDisplay).toEqual([{ role: '#pc-blue', name: '#pc-blue' }]);
    // deleting a check named by @id removes it from the policies naming it
    const byId = await create('/service-policies', {
      name: 'sp-posture-id',
      type: 'Bind',
      semantic: 'AnyOf',
      postureCheckRoles: [`@${a}`],
    });
    expect((await mgmt('GET', `/service-policies/${byId}`)).body.data.postureCheckRolesDisplay).toEqual([
      { role: `@${a}`, name: '@attr-a' },
    ]);
    expect((await mgmt('DELETE', `/posture-checks/${a}`)).status).toBe(200);
    expect((await mgmt('GET', `/service-policies/${byId}`)).body.data.postureCheckRoles).toEqual([]);
    expect(ids(await mgmt('GET', `/service-policies/${sp}/posture-checks`))).toEqual([]);
    expectError(await mgmt('GET', '/service-policies/nope/posture-checks'), 404, 'NOT_FOUND');
  });
});

/** A user with a password (role attribute `posture-user`), logged in on the client API: its id and token. */
async function clientUser(name: string): Promise<{ id: string; token: string }> {
  const id = await create('/identities', { name, type: 'User', isAdmin: false, roleAttributes: [`${name}-role`] });
  await create('/authenticators', { method: 'updb', identityId: id, username: name, password: `${name}-pw` });
  return { id, token: await clientLogin(name) };
}

async function clientLogin(name: string): Promise<string> {
  const r = await call('POST', `${srv.client}/authenticate?method=password`, {
    body: { username: name, password: `${name}-pw` },
  });
  expect(r.status, r.text).toBe(200);
  return r.headers.get('zt-session')!;
}

/** A service the identity role may dial (through an edge router) under a policy requiring `checks`. */
async function guardedService(
  name: string,
  identityRole: string,
  checks: string[],
): Promise<{ id: string; policy: string }> {
  const id = await create('/services', { name, encryptionRequired: true });
  const er = await create('/edge-routers', { name: `${name}-er` });
  await create('/edge-router-policies', {
    name: `${name}-erp`,
    semantic: 'AllOf',
    identityRoles: [`#${identityRole}`],
    edgeRouterRoles: [`@${er}`],
  });
  await create('/service-edge-router-policies', {
    name: `${name}-serp`,
    semantic: 'AllOf',
    serviceRoles: [`@${id}`],
    edgeRouterRoles: [`@${er}`],
  });
  const policy = await create('/service-policies', {
    name: `${name}-sp`,
    type: 'Dial',
    semantic: 'AllOf',
    identityRoles: [`#${identityRole}`],
    serviceRoles: [`@${id}`],
    postureCheckRoles: checks.map((c) => `@${c}`),
  });
  return { id, policy };
}

const client = (method: string, path: string, t: string, body?: unknown, params?: Record<string, string>) =>
  conformant(C, method, path, srv.base, { token: t, body, params });

async function serviceView(t: string, serviceId: string) {
  const r = await client('GET', '/services/{id}', t, undefined, { id: serviceId });
  expect(r.status, r.text).toBe(200);
  return r.body.data;
}

describe('posture responses, service posture queries and sessions', () => {
  it('OS, DOMAIN, MAC, PROCESS and PROCESS_MULTI: failing → 409 INVALID_POSTURE (recorded); reported → passing → session', async () => {
    const user = await clientUser('puser1');
    const checks = [
      await create('/posture-checks', {
        name: 'flow-os',
        typeId: 'OS',
        operatingSystems: [{ type: 'Windows', versions: ['>=10.0.19041'] }],
      }),
      await create('/posture-checks', { name: 'flow-domain', typeId: 'DOMAIN', domains: ['corp.example'] }),
      await create('/posture-checks', { name: 'flow-mac', typeId: 'MAC', macAddresses: ['aa:bb:cc:dd:ee:ff'] }),
      await create('/posture-checks', {
        name: 'flow-proc',
        typeId: 'PROCESS',
        process: { osType: 'Windows', path: 'C:\\av.exe', hashes: ['ab12'], signerFingerprint: 'ff00' },
      }),
      await create('/posture-checks', {
        name: 'flow-multi',
        typeId: 'PROCESS_MULTI',
        semantic: 'AnyOf',
        processes: [
          { osType: 'Windows', path: 'C:\\a.exe' },
          { osType: 'Windows', path: 'C:\\b.exe' },
        ],
      }),
    ];
    const svc = await guardedService('flow-svc', 'puser1-role', checks);

    const before = await serviceView(user.token, svc.id);
    expect(before.postureQueries).toHaveLength(1);
    expect(before.postureQueries[0]).toMatchObject({ policyId: svc.policy, policyType: 'Dial', isPassing: false });
    expect(before.postureQueries[0].postureQueries.map((q: { id: string }) => q.id).sort()).toEqual([...checks].sort());
    const proc = before.postureQueries[0].postureQueries.find((q: { queryType: string }) => q.queryType === 'PROCESS');
    expect(proc).toMatchObject({ isPassing: false, process: { osType: 'Windows', path: 'C:\\av.exe' }, timeout: -1 });

    const refused = await client('POST', '/sessions', user.token, { serviceId: svc.id, type: 'Dial' });
    expectError(refused, 409, 'INVALID_POSTURE');
    const failed = await mgmt('GET', `/identities/${user.id}/failed-service-requests`);
    expect(failed.status, failed.text).toBe(200);
    expect(failed.body.data).toHaveLength(1);
    expect(failed.body.data[0]).toMatchObject({ serviceId: svc.id, serviceName: 'flow-svc', sessionType: 'Dial' });
    expect(failed.body.data[0].policyFailures[0].policyId).toBe(svc.policy);
    expect(failed.body.data[0].policyFailures[0].checks).toHaveLength(5);

    const bulk = await client('POST', '/posture-response-bulk', user.token, [
      { id: checks[0], typeId: 'OS', type: 'Windows', version: '10.0.19045', build: '19045' },
      { id: checks[1], typeId: 'DOMAIN', domain: 'CORP.example' },
      { id: checks[2], typeId: 'MAC', macAddresses: ['11-22-33-44-55-66', 'AA-BB-CC-DD-EE-FF'] },
      {
        id: checks[3],
        typeId: 'PROCESS',
        path: 'C:\\av.exe',
        isRunning: true,
        hash: 'AB12',
        signerFingerprints: ['FF00'],
      },
    ]);
    expect(bulk.status, bulk.text).toBe(200);
    const partial = (await serviceView(user.token, svc.id)).postureQueries[0];
    expect(partial.isPassing).toBe(false); // the multi-process check still fails
    const passing = partial.postureQueries
      .filter((q: { isPassing: boolean }) => q.isPassing)
      .map((q: { id: string }) => q.id);
    expect(passing.sort()).toEqual(checks.slice(0, 4).sort());

    const one = await client('POST', '/posture-response', user.token, {
      id: checks[4],
      typeId: 'PROCESS',
      path: 'C:\\b.exe',
      isRunning: true,
    });
    expect(one.status, one.text).toBe(201);
    expect((await serviceView(user.token, svc.id)).postureQueries[0].isPassing).toBe(true);
    const list = await client('GET', '/services', user.token);
    expect(list.body.data.find((s: { id: string }) => s.id === svc.id).postureQueries[0].isPassing).toBe(true);
    const allowed = await client('POST', '/sessions', user.token, { serviceId: svc.id, type: 'Dial' });
    expect(allowed.status, allowed.text).toBe(201);

    const reportOs = (type: string, version: string) =>
      client('POST', '/posture-response', user.token, { id: checks[0], typeId: 'OS', type, version });
    // an older OS, a stopped process: failing again
    await reportOs('Windows', '6.1.7601');
    expectError(await client('POST', '/sessions', user.token, { serviceId: svc.id }), 409, 'INVALID_POSTURE');
    // a version that is not major.minor.patch satisfies no range (OpenZiti's semver.Make refuses it)
    await reportOs('windows', '11.0');
    expectError(await client('POST', '/sessions', user.token, { serviceId: svc.id }), 409, 'INVALID_POSTURE');
    await reportOs('windows', '11.0.22631');
    expect((await client('POST', '/sessions', user.token, { serviceId: svc.id })).status).toBe(201);
    await client('POST', '/posture-response', user.token, {
      id: checks[3],
      typeId: 'PROCESS',
      path: 'C:\\av.exe',
      isRunning: false,
    });
    expectError(await client('POST', '/sessions', user.token, { serviceId: svc.id }), 409, 'INVALID_POSTURE');
    expect((await mgmt('GET', `/identities/${user.id}/failed-service-requests`)).body.data).toHaveLength(4);

    // another granting policy without checks passes on its own
    await create('/service-policies', {
      name: 'flow-open',
      type: 'Dial',
      semantic: 'AllOf',
      identityRoles: ['#puser1-role'],
      serviceRoles: [`@${svc.id}`],
    });
    const view = await serviceView(user.token, svc.id);
    expect(view.postureQueries.map((q: { isPassing: boolean }) => q.isPassing).sort()).toEqual([false, true]);
    expect((await client('POST', '/sessions', user.token, { serviceId: svc.id })).status).toBe(201);

    // posture data: what the identity's sessions reported
    const data = await conformant(M, 'GET', '/identities/{id}/posture-data', srv.base, {
      token,
      params: { id: user.id },
    });
    expect(data.status, data.text).toBe(200);
    expect(data.body.data.os).toMatchObject({ type: 'windows', version: '11.0.22631', postureCheckId: checks[0] });
    expect(data.body.data.domain.domain).toBe('corp.example');
    expect(data.body.data.mac.addresses).toEqual(['112233445566', 'aabbccddeeff']);
    expect(data.body.data.processes.map((p: { isRunning: boolean }) => p.isRunning).sort()).toEqual([false, true]);
    expect(Object.keys(data.body.data.apiSessionPostureData)).toHaveLength(1);
    expectError(await mgmt('GET', '/identities/nope/posture-data'), 404, 'NOT_FOUND');
    expectError(await mgmt('GET', '/identities/nope/failed-service-requests'), 404, 'NOT_FOUND');

    // another API session of the identity is judged on the same device data (OpenZiti keeps it per identity)
    const second = await clientLogin('puser1');
    const queries = async (t: string) =>
      (await serviceView(t, svc.id)).postureQueries
        .find((q: { policyId: string }) => q.policyId === svc.policy)
        .postureQueries.map((q: { id: string; isPassing: boolean }) => [q.id, q.isPassing])
        .sort();
    const seen = await queries(second);
    expect(seen).toEqual(await queries(user.token));
    // OS, domain, MAC and the multi-process check pass; the stopped process fails
    expect(seen.filter(([, passing]: [string, boolean]) => passing)).toHaveLength(4);
  });

  it('posture response validation: type, required fields per type, bulk bound; a bad bulk entry records nothing', async () => {
    const user = await clientUser('puser2');
    const one = (body: unknown) => client('POST', '/posture-response', user.token, body);
    expectError(await one({ id: 'x', typeId: 'BOGUS' }), 400, 'COULD_NOT_VALIDATE', 'typeId');
    expectError(await one({ typeId: 'OS', type: 'Linux', version: '1' }), 400, 'COULD_NOT_VALIDATE');
    expectError(await one({ id: 'x', typeId: 'OS', type: 'Linux' }), 400, 'COULD_NOT_VALIDATE', 'version');
    expectError(await one({ id: 'x', typeId: 'DOMAIN' }), 400, 'COULD_NOT_VALIDATE', 'domain');
    expectError(await one({ id: 'x', typeId: 'MAC' }), 400, 'COULD_NOT_VALIDATE', 'macAddresses');
    expectError(await one({ id: 'x', typeId: 'PROCESS', isRunning: true }), 400, 'COULD_NOT_VALIDATE', 'path');
    const macs = Array.from({ length: MAX_RESPONSE_LIST + 1 }, () => 'aabbccddeeff');
    expectError(await one({ id: 'x', typeId: 'MAC', macAddresses: macs }), 400, 'COULD_NOT_VALIDATE', 'macAddresses');
    expect((await one({ id: 'x', typeId: 'MAC', macAddresses: macs.slice(1) })).status).toBe(201);
    const long = 'd'.repeat(1025);
    expectError(await one({ id: 'x', typeId: 'DOMAIN', domain: long }), 400, 'COULD_NOT_VALIDATE', 'domain');
    const state = await one({ id: 'x', typeId: 'ENDPOINT_STATE', woken: true });
    expect(state.status, state.text).toBe(201);
    const bad = await client('POST', '/posture-response-bulk', user.token, [
      { id: 'x', typeId: 'DOMAIN', domain: 'a.example' },
      { id: 'x', typeId: 'NOPE' },
    ]);
    expectError(bad, 400, 'COULD_NOT_VALIDATE', '1.typeId');
    const data = await mgmt('GET', `/identities/${user.id}/posture-data`);
    expect(data.body.data.domain.domain).toBe('');
    const many = Array.from({ length: MAX_BULK_RESPONSES + 1 }, () => ({ id: 'x', typeId: 'DOMAIN', domain: 'a' }));
    expectError(await client('POST', '/posture-response-bulk', user.token, many), 400, 'COULD_NOT_VALIDATE');
    const max = await client('POST', '/posture-response-bulk', user.token, many.slice(1));
    expect(max.status, max.text).toBe(200);
    expectError(
      await call('POST', `${srv.client}/posture-response`, { body: { id: 'x', typeId: 'OS' } }),
      401,
      'UNAUTHORIZED',
    );
  });

  it('MFA: passes once the API session completed MFA, until its timeout; promptOnWake requires MFA after waking', async () => {
    const user = await clientUser('puser3');
    const mfa = await create('/posture-checks', { name: 'flow-mfa', typeId: 'MFA', timeoutSeconds: 120 });
    const svc = await guardedService('mfa-svc', 'puser3-role', [mfa]);
    const query = async (t: string) => (await serviceView(t, svc.id)).postureQueries[0].postureQueries[0];
    expect(await query(user.token)).toMatchObject({ queryType: 'MFA', isPassing: false, timeout: 120 });
    expectError(await client('POST', '/sessions', user.token, { serviceId: svc.id }), 409, 'INVALID_POSTURE');

    await call('POST', `${srv.client}/current-identity/mfa`, { token: user.token });
    const detail = await call('GET', `${srv.client}/current-identity/mfa`, { token: user.token });
    const secret = new URL(detail.body.data.provisioningUrl).searchParams.get('secret')!;
    const code = await generate({ secret, epoch: Math.floor(clock.now() / 1000) });
    const verified = await call('POST', `${srv.client}/current-identity/mfa/verify`, {
      token: user.token,
      body: { code },
    });
    expect(verified.status, verified.text).toBe(200);
    expect(await query(user.token)).toMatchObject({ isPassing: true, timeoutRemaining: 120 });
    expect((await client('POST', '/sessions', user.token, { serviceId: svc.id })).status).toBe(201);
    clock.advance(60_000);
    expect((await query(user.token)).timeoutRemaining).toBe(60);
    clock.advance(61_000);
    expect(await query(user.token)).toMatchObject({ isPassing: false, timeoutRemaining: 0 });
    expectError(await client('POST', '/sessions', user.token, { serviceId: svc.id }), 409, 'INVALID_POSTURE');

    // a fresh login passing MFA passes again; with promptOnWake, waking after MFA fails it
    const again = await clientLogin('puser3');
    const mfaCode = await generate({ secret, epoch: Math.floor(clock.now() / 1000) });
    const passed = await call('POST', `${srv.client}/authenticate/mfa`, { token: again, body: { code: mfaCode } });
    expect(passed.status, passed.text).toBe(200);
    expect((await query(again)).isPassing).toBe(true);
    await mgmt('PATCH', `/posture-checks/${mfa}`, { typeId: 'MFA', promptOnWake: true, timeoutSeconds: -1 });
    expect(await query(again)).toMatchObject({ isPassing: true, timeoutRemaining: -1, promptOnWake: true });
    clock.advance(1000);
    const woke = await client('POST', '/posture-response', again, { id: mfa, typeId: 'ENDPOINT_STATE', woken: true });
    expect(woke.body.data.services).toEqual([
      { id: svc.id, name: 'mfa-svc', postureQueryType: 'MFA', timeout: -1, timeoutRemaining: MFA_PROMPT_GRACE_S },
    ]);
    // the grace period to pass MFA again, then failing
    expect(await query(again)).toMatchObject({ isPassing: true, timeoutRemaining: MFA_PROMPT_GRACE_S });
    clock.advance(MFA_PROMPT_GRACE_S * 1000);
    expect(await query(again)).toMatchObject({ isPassing: false, timeoutRemaining: 0 });
    const unlocked = await client('POST', '/posture-response', again, {
      id: mfa,
      typeId: 'ENDPOINT_STATE',
      unlocked: true,
    });
    expect(unlocked.body.data.services).toEqual([]); // promptOnUnlock is off
    const data = await mgmt('GET', `/identities/${user.id}/posture-data`);
    const mine = data.body.data.apiSessionPostureData;
    expect(Object.values(mine).some((s) => (s as { mfa: { passedMfa: boolean } }).mfa.passedMfa)).toBe(true);
  });
});
