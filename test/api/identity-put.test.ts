/**
 * PUT /identities/{id} is for admins only (OpenZiti's identity_router.go: "non-admins may not use the PUT method,
 * use PATCH instead"), although the operation is filed under `identity.update`: a caller holding that permission
 * reaches it and is refused once its body is valid and the row found, with nothing written. The fast check of the
 * rule (`operations.update.adminsOnly`); test/api/authz.test.ts walks it with every other access rule.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, userWith } from '../support/api.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let admin: string;
let target: string;

beforeAll(async () => {
  srv = await startServer();
  admin = await login(srv.base);
  const created = await call('POST', `${srv.mgmt}/identities`, {
    token: admin,
    body: { name: 'put-target', type: 'User', isAdmin: false },
  });
  expect(created.status, created.text).toBe(201);
  target = created.body.data.id;
});
afterAll(async () => {
  await srv?.stop();
});

const putBody = (name: string) => ({ name, type: 'User', isAdmin: false });

async function nameOf(id: string): Promise<string> {
  const r = await call('GET', `${srv.mgmt}/identities/${id}`, { token: admin });
  expect(r.status, r.text).toBe(200);
  return r.body.data.name;
}

describe('PUT /identities/{id} for admins only', () => {
  it('refuses a non-admin holding identity or identity.update with 401, leaving the row; PATCH serves it', async () => {
    for (const permission of ['identity', 'identity.update']) {
      const user = await userWith(srv.base, admin, `put-${permission}`, { permissions: [permission] });
      const url = `${srv.mgmt}/identities/${target}`;
      const put = await call('PUT', url, { token: user.token, body: putBody(`renamed-by-${permission}`) });
      expectError(put, 401, 'UNAUTHORIZED');
      expect(await nameOf(target)).toBe('put-target');
      // the refusal comes after the body check and the lookup, as OpenZiti's handler runs
      expectError(await call('PUT', url, { token: user.token, body: {} }), 400, 'COULD_NOT_VALIDATE');
      const missing = `${srv.mgmt}/identities/no-such-identity`;
      expectError(await call('PUT', missing, { token: user.token, body: putBody('x') }), 404, 'NOT_FOUND');
      // the permission does reach identity updates: the same caller may PATCH
      const patch = await call('PATCH', url, { token: user.token, body: { name: `patched-by-${permission}` } });
      expect(patch.status, patch.text).toBe(200);
      expect(await nameOf(target)).toBe(`patched-by-${permission}`);
      const back = await call('PATCH', url, { token: admin, body: { name: 'put-target' } });
      expect(back.status, back.text).toBe(200);
    }
  });

  it('serves an admin', async () => {
    const put = await call('PUT', `${srv.mgmt}/identities/${target}`, { token: admin, body: putBody('put-by-admin') });
    expect(put.status, put.text).toBe(200);
    expect(await nameOf(target)).toBe('put-by-admin');
  });
});
