/**
 * Auth policies: CRUD through the conformance helper (responses validated against OpenZiti's schemas), the
 * default policy's rules, PATCH merging, bounds, primary methods allowed, password rules.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_AUTH_POLICY, isPrimaryAllowed } from '../../src/model/auth-policy.js';
import { interceptNextWrite } from '../support/api.js';
import { conformant, ownOperations } from '../support/conformance.js';
import { call, login, type Res, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let token: string;
const M = 'management' as const;

beforeAll(async () => {
  srv = await startServer();
  token = await login(srv.base);
});
afterAll(async () => {
  const { served, missing } = ownOperations('test/api/auth-policies.test.ts', srv.ctl.ops);
  await srv.stop();
  expect(served.length).toBe(6);
  expect(missing).toEqual([]);
});

function expectError(res: Res, status: number, code: string, field?: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.body.error.code).toBe(code);
  if (field !== undefined) expect(res.body.error.cause.field).toBe(field);
}

type Policy = typeof DEFAULT_AUTH_POLICY;
function policy(name: string, updb: Partial<Policy['primary']['updb']> = {}, extra: Partial<Policy> = {}): Policy {
  const p = structuredClone(DEFAULT_AUTH_POLICY);
  return { ...p, name, primary: { ...p.primary, updb: { ...p.primary.updb, ...updb } }, ...extra };
}

async function createPolicy(body: unknown): Promise<string> {
  const r = await conformant(M, 'POST', '/auth-policies', srv.base, { token, body });
  expect(r.status, r.text).toBe(201);
  return r.body.data.id;
}

async function detail(id: string): Promise<any> {
  const r = await conformant(M, 'GET', '/auth-policies/{id}', srv.base, { token, params: { id } });
  expect(r.status, r.text).toBe(200);
  return r.body.data;
}

async function createUser(name: string, authPolicyId: string, password?: string): Promise<string> {
  const r = await call('POST', `${srv.mgmt}/identities`, {
    token,
    body: { name, type: 'User', isAdmin: false, authPolicyId },
  });
  expect(r.status, r.text).toBe(201);
  const id = r.body.data.id;
  if (password) {
    const a = await call('POST', `${srv.mgmt}/authenticators`, {
      token,
      body: { method: 'updb', identityId: id, username: name, password },
    });
    expect(a.status, a.text).toBe(201);
  }
  return id;
}

describe('auth policies', () => {
  it('CRUD: create, detail, list, update, patch (merging nested objects), delete', async () => {
    const id = await createPolicy({ ...policy('strict', { maxAttempts: 3 }), tags: { team: 'a' } });
    const d = await detail(id);
    expect(d.name).toBe('strict');
    expect(d.tags).toEqual({ team: 'a' });
    expect(d.primary.updb.maxAttempts).toBe(3);
    expect(d.primary.extJwt.allowedSigners).toEqual([]);
    const list = await conformant(M, 'GET', '/auth-policies', srv.base, { token, query: 'filter=name%3D%22strict%22' });
    expect(list.body.data.map((p: any) => p.id)).toEqual([id]);

    const put = await conformant(M, 'PUT', '/auth-policies/{id}', srv.base, {
      token,
      params: { id },
      body: policy('stricter', { minPasswordLength: 12, lockoutDurationMinutes: 5 }),
    });
    expect(put.status, put.text).toBe(200);
    const afterPut = await detail(id);
    expect(afterPut.name).toBe('stricter');
    expect(afterPut.tags).toEqual({}); // PUT replaces tags too
    expect(afterPut.primary.updb.minPasswordLength).toBe(12);
    expect(afterPut.primary.updb.maxAttempts).toBe(0);

    const patch = await conformant(M, 'PATCH', '/auth-policies/{id}', srv.base, {
      token,
      params: { id },
      body: {
        primary: { updb: { maxAttempts: 7, requireMixedCase: null }, cert: null },
        secondary: { requireTotp: true },
      },
    });
    expect(patch.status, patch.text).toBe(200);
    const afterPatch = await detail(id);
    expect(afterPatch.name).toBe('stricter');
    expect(afterPatch.primary.updb).toEqual({ ...afterPut.primary.updb, maxAttempts: 7 });
    expect(afterPatch.primary.cert).toEqual(afterPut.primary.cert);
    expect(afterPatch.secondary).toEqual({ requireTotp: true, requireExtJwtSigner: null });

    const del = await conformant(M, 'DELETE', '/auth-policies/{id}', srv.base, { token, params: { id } });
    expect(del.status).toBe(200);
    const gone = await conformant(M, 'GET', '/auth-policies/{id}', srv.base, { token, params: { id } });
    expectError(gone, 404, 'NOT_FOUND');
  });

  it('PATCHes of different nested values racing both take effect (merged where they apply)', async () => {
    const id = await createPolicy(policy('raced'));
    const meanwhile = interceptNextWrite(srv.ctl.svc);
    // the second PATCH passes its checks and is applied first: the first one's view of the policy is stale by then
    let second: Res | undefined;
    meanwhile(async () => {
      second = await call('PATCH', `${srv.mgmt}/auth-policies/${id}`, {
        token,
        body: { secondary: { requireTotp: true }, primary: { updb: { lockoutDurationMinutes: 9 } } },
      });
    });
    const first = await call('PATCH', `${srv.mgmt}/auth-policies/${id}`, {
      token,
      body: { name: 'raced-renamed', primary: { updb: { maxAttempts: 3 }, cert: { allowExpiredCerts: false } } },
    });
    expect(second?.status, second?.text).toBe(200);
    expect(first.status, first.text).toBe(200);
    const d = await detail(id);
    expect(d.name).toBe('raced-renamed');
    expect(d.secondary).toEqual({ requireTotp: true, requireExtJwtSigner: null });
    expect(d.primary.updb).toEqual({ ...DEFAULT_AUTH_POLICY.primary.updb, maxAttempts: 3, lockoutDurationMinutes: 9 });
    expect(d.primary.cert).toEqual({ allowed: true, allowExpiredCerts: false });
    // keys the policy does not declare are ignored, prototype names too
    const odd = await call('PATCH', `${srv.mgmt}/auth-policies/${id}`, {
      token,
      raw: '{"primary":{"updb":{"__proto__":{"allowed":false},"constructor":1}},"secondary":{"__proto__":{"x":1}}}',
      headers: { 'content-type': 'application/json' },
    });
    expect(odd.status, odd.text).toBe(200);
    expect(await detail(id)).toMatchObject({ primary: d.primary, secondary: d.secondary });
  });

  it('the default policy cannot be deleted; a policy in use gives 409 until its identities move', async () => {
    const def = await conformant(M, 'DELETE', '/auth-policies/{id}', srv.base, { token, params: { id: 'default' } });
    expectError(def, 400, 'ENTITY_CAN_NOT_BE_DELETED');
    expect((await detail('default')).name).toBe('Default');

    const id = await createPolicy(policy('in-use'));
    const user = await createUser('policy-user', id);
    const used = await conformant(M, 'DELETE', '/auth-policies/{id}', srv.base, { token, params: { id } });
    expectError(used, 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY');
    const moved = await call('PATCH', `${srv.mgmt}/identities/${user}`, { token, body: { authPolicyId: 'default' } });
    expect(moved.status, moved.text).toBe(200);
    const del = await conformant(M, 'DELETE', '/auth-policies/{id}', srv.base, { token, params: { id } });
    expect(del.status, del.text).toBe(200);
  });

  it('refuses bad bodies with the failing field', async () => {
    const cases: [unknown, string][] = [
      [policy('short', { minPasswordLength: 4 }), 'primary.updb.minPasswordLength'],
      [policy('long', { minPasswordLength: 101 }), 'primary.updb.minPasswordLength'],
      [policy('neg', { maxAttempts: -1 }), 'primary.updb.maxAttempts'],
      [policy('negl', { lockoutDurationMinutes: -5 }), 'primary.updb.lockoutDurationMinutes'],
      [{ ...policy('nosecondary'), secondary: undefined }, 'secondary'],
      [
        { name: 'x', primary: { cert: {}, updb: {}, extJwt: {} }, secondary: { requireTotp: false } },
        'primary.cert.allowed',
      ],
    ];
    for (const [body, field] of cases) {
      const r = await conformant(M, 'POST', '/auth-policies', srv.base, { token, body });
      expectError(r, 400, 'COULD_NOT_VALIDATE', field);
    }
    const signers = structuredClone(policy('signers'));
    (signers.primary.extJwt as { allowedSigners: string[] | null }).allowedSigners = ['nope'];
    const r = await conformant(M, 'POST', '/auth-policies', srv.base, { token, body: signers });
    expectError(r, 400, 'COULD_NOT_VALIDATE', 'primary.extJwt.allowedSigners');

    const id = await createPolicy(policy('patch-bounds'));
    const bad = await conformant(M, 'PATCH', '/auth-policies/{id}', srv.base, {
      token,
      params: { id },
      body: { primary: { updb: { minPasswordLength: 2 } } },
    });
    expectError(bad, 400, 'COULD_NOT_VALIDATE', 'primary.updb.minPasswordLength');
    expect((await detail(id)).primary.updb.minPasswordLength).toBe(5);
    const dup = await conformant(M, 'POST', '/auth-policies', srv.base, { token, body: policy('patch-bounds') });
    expectError(dup, 400, 'COULD_NOT_VALIDATE', 'name');
  });

  it('needs the auth-policy permission', async () => {
    const user = await createUser('plain-user', 'default', 'plain-password');
    const userToken = await login(srv.base, 'plain-user', 'plain-password');
    const r = await conformant(M, 'POST', '/auth-policies', srv.base, { token: userToken, body: policy('nope') });
    expectError(r, 401, 'UNAUTHORIZED');
    const grant = await call('PATCH', `${srv.mgmt}/identities/${user}`, {
      token,
      body: { permissions: ['auth-policy'] },
    });
    expect(grant.status, grant.text).toBe(200);
    const ok = await conformant(M, 'POST', '/auth-policies', srv.base, { token: userToken, body: policy('granted') });
    expect(ok.status, ok.text).toBe(201);
  });

  it('primary.updb.allowed: false refuses password logins of its identities', async () => {
    const id = await createPolicy(policy('no-updb', { allowed: false }));
    await createUser('no-updb-user', id, 'no-updb-password');
    const r = await call('POST', `${srv.mgmt}/authenticate?method=password`, {
      body: { username: 'no-updb-user', password: 'no-updb-password' },
    });
    expectError(r, 401, 'INVALID_AUTH');
    await call('PATCH', `${srv.mgmt}/auth-policies/${id}`, { token, body: { primary: { updb: { allowed: true } } } });
    expect(await login(srv.base, 'no-updb-user', 'no-updb-password')).toBeTruthy();
  });

  it('password rules: length, mixed case, digits, special characters on create and update', async () => {
    const id = await createPolicy(
      policy('rules', {
        minPasswordLength: 8,
        requireMixedCase: true,
        requireNumberChar: true,
        requireSpecialChar: true,
      }),
    );
    const user = await createUser('rules-user', id);
    const tries: [string, string][] = [
      ['Ab1!xyz', 'at least 8'],
      ['abcdefg1!', 'upper and lower'],
      ['Abcdefgh!', 'number'],
      ['Abcdefgh1', 'special'],
    ];
    for (const [password, reason] of tries) {
      const r = await call('POST', `${srv.mgmt}/authenticators`, {
        token,
        body: { method: 'updb', identityId: user, username: 'rules-user', password },
      });
      expectError(r, 400, 'COULD_NOT_VALIDATE', 'password');
      expect(r.body.error.cause.reason).toContain(reason);
      expect(r.text).not.toContain(password);
    }
    const okr = await call('POST', `${srv.mgmt}/authenticators`, {
      token,
      body: { method: 'updb', identityId: user, username: 'rules-user', password: 'Abcdefg1!' },
    });
    expect(okr.status, okr.text).toBe(201);
    const upd = await call('PATCH', `${srv.mgmt}/authenticators/${okr.body.data.id}`, {
      token,
      body: { password: 'weakpassword' },
    });
    expectError(upd, 400, 'COULD_NOT_VALIDATE', 'password');
  });

  it('isPrimaryAllowed: per method, and ext-jwt per signer when the policy lists signers', () => {
    const row = (primary: unknown) => ({ id: 'p', primary }) as never;
    const p = structuredClone(DEFAULT_AUTH_POLICY.primary);
    expect(['updb', 'cert', 'extJwt'].map((m) => isPrimaryAllowed(row(p), m as 'updb'))).toEqual([true, true, true]);
    p.cert.allowed = false;
    expect(isPrimaryAllowed(row(p), 'cert')).toBe(false);
    expect(isPrimaryAllowed(undefined, 'updb')).toBe(false);
    (p.extJwt as { allowedSigners: string[] | null }).allowedSigners = ['s1'];
    expect(isPrimaryAllowed(row(p), 'extJwt', 's1')).toBe(true);
    expect(isPrimaryAllowed(row(p), 'extJwt', 's2')).toBe(false);
    expect(isPrimaryAllowed(row(p), 'extJwt')).toBe(false);
  });
});
