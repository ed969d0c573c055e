/**
 * Posture checks: CRUD of every type with its validation errors, posture check types, role attributes, the service
 * policy association; posture responses (single and bulk) evaluated into the client's `postureQueries`, session
 * creation allowed or refused with 409 INVALID_POSTURE (recorded as a failed service request), and the identity's
 * posture data. Every call goes through the conformance helper (responses validated against OpenZiti's schemas).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, ids } from '../support/api.js';
import { conformant, ownOperations } from '../support/conformance.js';
import { login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let token: string;
const M = 'management' as const;
const C = 'client' as const;

beforeAll(async () => {
  srv = await startServer();
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
  it('CRUD of every type: detail shows its own fields, normalised; version counts changes; typeId is immutable', async () => {
    for (const [typeId, fields] of Object.entries(VALID)) {
      const id = await create('/posture-checks', { name: `pc-${typeId}`, typeId, roleAttributes: ['crud'], ...fields });
      const r = await mgmt('GET', `/posture-checks/${id}`);
      expect(r.status, r.text).toBe(200);
      expect(r.body.data).toMatchObject({ name: `pc-${typeId}`, typeId, version: 1, roleAttributes: ['crud'] });
      for (const other of Object.keys(VALID).filter((t) => t !== typeId)) {
        for (const f of Object.keys(VALID[other]!)) if (!(f in fields)) expect(r.body.data).not.toHaveProperty(f);
      }
      const patched = await mgmt('PATCH', `/posture-checks/${id}`, { typeId, name: `pc-${typeId}-2` });
      expect(patched.status, patched.text).toBe(200);
      const after = (await mgmt('GET', `/posture-checks/${id}`)).body.data;
      expect(after).toMatchObject({ name: `pc-${typeId}-2`, version: 2 });
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
  });
});
