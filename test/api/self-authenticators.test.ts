/**
 * Self-service authenticators, step by step on both APIs: an identity lists and reads only its own authenticators
 * (no secret in any answer), changes its password and username proving the current password, under its auth
 * policy's password rules; cert authenticators cannot be changed this way; the checks made before the write are
 * made again inside apply.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_AUTH_POLICY } from '../../src/model/auth-policy.js';
import { createRootCa } from '../../src/pki/index.js';
import { expectError, interceptNextWrite, userWith } from '../support/api.js';
import { conformant, ownOperations } from '../support/conformance.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let root: string;
/** Runs the function given once, after the next handler has done its checks and before its command is applied. */
let meanwhile: (f: () => Promise<unknown>) => void;

beforeAll(async () => {
  srv = await startServer();
  root = await login(srv.base);
  meanwhile = interceptNextWrite(srv.ctl.svc);
});
afterAll(async () => {
  const { served, missing } = ownOperations('test/api/self-authenticators.test.ts', srv.ctl.ops);
  await srv.stop();
  expect(served.length).toBe(8);
  expect(missing).toEqual([]);
});

const APIS = ['client', 'management'] as const;
/** The fields an authenticator renders with, besides its method's own (`username`, or `certPem` and `fingerprint`). */
const PUBLIC_FIELDS = [
  '_links',
  'createdAt',
  'extendRequestedAt',
  'id',
  'identity',
  'identityId',
  'isExtendRequested',
  'isIssuedByNetwork',
  'isKeyRollRequested',
  'lastAuthResolvedToRoot',
  'lastExtendRolledKeys',
  'method',
  'tags',
  'updatedAt',
];
const SELF = '/current-identity/authenticators';

async function ownAuthenticators(api: (typeof APIS)[number], token: string, query?: string) {
  const r = await conformant(api, 'GET', SELF, srv.base, { token, ...(query ? { query } : {}) });
  expect(r.status, r.text).toBe(200);
  return r.body.data as Record<string, unknown>[];
}

async function canLogin(username: string, password: string): Promise<boolean> {
  const r = await call('POST', `${srv.mgmt}/authenticate?method=password`, { body: { username, password } });
  return r.status === 200;
}

describe('reading your own authenticators', () => {
  it.each(APIS)('%s: lists and details only the caller’s own, with no secret', async (api) => {
    const me = await userWith(srv.base, root, `reader-${api}`);
    await userWith(srv.base, root, `other-${api}`);
    const list = await ownAuthenticators(api, me.token);
    expect(list.map((a) => [a.identityId, a.method, a.username])).toEqual([[me.id, 'updb', `reader-${api}`]]);
    // exactly the public fields: no password hash, salt or pending certificate
    expect(Object.keys(list[0]!).sort()).toEqual([...PUBLIC_FIELDS, 'username'].sort());
    // the list's filter and paging apply within the caller's own
    expect(await ownAuthenticators(api, me.token, 'filter=method%3D%22cert%22')).toEqual([]);
    const all = await ownAuthenticators(api, root, 'limit=100');
    expect(all.map((a) => a.username)).toEqual(['admin']);
    const id = list[0]!.id as string;
    const detail = await conformant(api, 'GET', `${SELF}/{id}`, srv.base, { token: me.token, params: { id } });
    expect(detail.status, detail.text).toBe(200);
    expect(detail.body.data).toMatchObject({ id, method: 'updb', username: `reader-${api}` });
    expect(JSON.stringify(detail.body)).not.toMatch(/argon2/);
    // another identity's authenticator does not exist for the caller, not even for an admin
    const adminsOwn = (await ownAuthenticators(api, root))[0]!.id as string;
    const theirs = await conformant(api, 'GET', `${SELF}/{id}`, srv.base, {
      token: me.token,
      params: { id: adminsOwn },
    });
    expectError(theirs, 404, 'NOT_FOUND');
    const asAdmin = await conformant(api, 'GET', `${SELF}/{id}`, srv.base, { token: root, params: { id } });
    expectError(asAdmin, 404, 'NOT_FOUND');
    expectError(await conformant(api, 'GET', SELF, srv.base, {}), 401, 'UNAUTHORIZED');
    expectError(
      await conformant(api, 'GET', SELF, srv.base, { token: me.token, query: 'filter=nope%3D1' }),
      400,
      'INVALID_FILTER',
    );
  });
});

describe('changing your own password and username', () => {
  it.each(APIS)('%s: PATCH changes the password, proving the current one', async (api) => {
    const name = `patcher-${api}`;
    const me = await userWith(srv.base, root, name);
    const id = (await ownAuthenticators(api, me.token))[0]!.id as string;
    const patch = (body: unknown) =>
      conformant(api, 'PATCH', `${SELF}/{id}`, srv.base, { token: me.token, params: { id }, body });
    // the current password is required, and must be right (OpenZiti: 401 with the field as cause, value hidden)
    expectError(await patch({ password: 'new-password-1' }), 400, 'COULD_NOT_VALIDATE');
    const wrong = await patch({ currentPassword: 'not-my-password', password: 'new-password-1' });
    expectError(wrong, 401, 'UNAUTHORIZED', 'currentPassword');
    expect(wrong.text).not.toContain('not-my-password');
    expect(await canLogin(name, `${name}-pass`)).toBe(true);
    // bounds of the spec's password schema
    expectError(await patch({ currentPassword: `${name}-pass`, password: 'abc' }), 400, 'COULD_NOT_VALIDATE');
    const ok = await patch({ currentPassword: `${name}-pass`, password: 'new-password-1' });
    expect(ok.status, ok.text).toBe(200);
    expect(await canLogin(name, `${name}-pass`)).toBe(false);
    expect(await canLogin(name, 'new-password-1')).toBe(true);
    // a PATCH with only the current password (right) and tags changes nothing else
    const tagged = await patch({ currentPassword: 'new-password-1', tags: { team: 'a' } });
    expect(tagged.status, tagged.text).toBe(200);
    expect((await ownAuthenticators(api, me.token))[0]).toMatchObject({ username: name, tags: { team: 'a' } });
    expect(await canLogin(name, 'new-password-1')).toBe(true);
  });

  it.each(APIS)('%s: PUT sets username and password; a taken username is refused', async (api) => {
    const name = `putter-${api}`;
    const me = await userWith(srv.base, root, name);
    const id = (await ownAuthenticators(api, me.token))[0]!.id as string;
    const put = (body: unknown) =>
      conformant(api, 'PUT', `${SELF}/{id}`, srv.base, { token: me.token, params: { id }, body });
    // PUT needs all three
    expectError(await put({ currentPassword: `${name}-pass`, password: 'pw-12345' }), 400, 'COULD_NOT_VALIDATE');
    expectError(
      await put({ currentPassword: `${name}-pass`, username: 'admin', password: 'pw-12345' }),
      400,
      'COULD_NOT_VALIDATE',
      'username',
    );
    expect(await canLogin(name, `${name}-pass`)).toBe(true);
    const ok = await put({ currentPassword: `${name}-pass`, username: `${name}-renamed`, password: 'pw-12345' });
    expect(ok.status, ok.text).toBe(200);
    expect(await canLogin(name, 'pw-12345')).toBe(false);
    expect(await canLogin(`${name}-renamed`, 'pw-12345')).toBe(true);
    // keeping the same username is no conflict with itself
    const same = await put({ currentPassword: 'pw-12345', username: `${name}-renamed`, password: 'pw-67890' });
    expect(same.status, same.text).toBe(200);
    expect(await canLogin(`${name}-renamed`, 'pw-67890')).toBe(true);
  });

  it("applies the identity's auth policy password rules", async () => {
    const policy = structuredClone(DEFAULT_AUTH_POLICY) as Record<string, any>;
    policy.name = 'strict-self';
    policy.primary.updb = { ...policy.primary.updb, minPasswordLength: 12, requireNumberChar: true };
    const pid = (await call('POST', `${srv.mgmt}/auth-policies`, { token: root, body: policy })).body.data.id;
    const me = await userWith(srv.base, root, 'strict-user');
    await call('PATCH', `${srv.mgmt}/identities/${me.id}`, { token: root, body: { authPolicyId: pid } });
    const id = (await ownAuthenticators('client', me.token))[0]!.id as string;
    const patch = (password: string) =>
      conformant('client', 'PATCH', `${SELF}/{id}`, srv.base, {
        token: me.token,
        params: { id },
        body: { currentPassword: 'strict-user-pass', password },
      });
    expectError(await patch('short-1'), 400, 'COULD_NOT_VALIDATE', 'password');
    expectError(await patch('long-enough-but-no-digit'), 400, 'COULD_NOT_VALIDATE', 'password');
    expect(await canLogin('strict-user', 'strict-user-pass')).toBe(true);
    expect((await patch('long-enough-with-1')).status).toBe(200);
    expect(await canLogin('strict-user', 'long-enough-with-1')).toBe(true);
  });

  it.each(APIS)('%s: a cert authenticator cannot be changed this way (409), nor another identity’s', async (api) => {
    const name = `certholder-${api}`;
    const me = await userWith(srv.base, root, name);
    const ca = await createRootCa({ commonName: `self-${api}` });
    const made = await call('POST', `${srv.mgmt}/authenticators`, {
      token: root,
      body: { method: 'cert', identityId: me.id, certPem: ca.certPem },
    });
    expect(made.status, made.text).toBe(201);
    const certId = made.body.data.id as string;
    const listed = await ownAuthenticators(api, me.token);
    expect(listed.map((a) => a.method).sort()).toEqual(['cert', 'updb']);
    const cert = listed.find((a) => a.id === certId)!;
    expect(String(cert.certPem)).toContain('BEGIN CERTIFICATE');
    expect(Object.keys(cert).sort()).toEqual([...PUBLIC_FIELDS, 'certPem', 'fingerprint'].sort());
    for (const method of ['PUT', 'PATCH'] as const) {
      const r = await conformant(api, method, `${SELF}/{id}`, srv.base, {
        token: me.token,
        params: { id: certId },
        body: { currentPassword: `${name}-pass`, username: `${name}-x`, password: 'pw-12345' },
      });
      expectError(r, 409, 'CAN_NOT_UPDATE_AUTHENTICATOR');
      // the admin's own authenticator is not found for this caller
      const admins = (await ownAuthenticators(api, root))[0]!.id as string;
      const other = await conformant(api, method, `${SELF}/{id}`, srv.base, {
        token: me.token,
        params: { id: admins },
        body: { currentPassword: `${name}-pass`, username: `${name}-x`, password: 'pw-12345' },
      });
      expectError(other, 404, 'NOT_FOUND');
    }
    expect(await canLogin('admin', 'pw-12345')).toBe(false);
  });
});

describe('checked again inside apply', () => {
  it('a username taken between the check and the apply is refused', async () => {
    const me = await userWith(srv.base, root, 'racer-a');
    const id = (await ownAuthenticators('client', me.token))[0]!.id as string;
    meanwhile(() => userWith(srv.base, root, 'racer-wanted'));
    const r = await call('PUT', `${srv.client}${SELF}/${id}`, {
      token: me.token,
      body: { currentPassword: 'racer-a-pass', username: 'racer-wanted', password: 'pw-12345' },
    });
    expectError(r, 400, 'COULD_NOT_VALIDATE', 'username');
    expect(await canLogin('racer-a', 'racer-a-pass')).toBe(true);
  });

  it('a password changed between the check and the apply makes the proof stale (401)', async () => {
    const me = await userWith(srv.base, root, 'racer-b');
    const id = (await ownAuthenticators('client', me.token))[0]!.id as string;
    meanwhile(() =>
      call('PATCH', `${srv.mgmt}/authenticators/${id}`, { token: root, body: { password: 'reset-by-admin' } }),
    );
    const r = await call('PATCH', `${srv.client}${SELF}/${id}`, {
      token: me.token,
      body: { currentPassword: 'racer-b-pass', password: 'chosen-by-me' },
    });
    expectError(r, 401, 'UNAUTHORIZED');
    expect(await canLogin('racer-b', 'reset-by-admin')).toBe(true);
    expect(await canLogin('racer-b', 'chosen-by-me')).toBe(false);
  });
});
