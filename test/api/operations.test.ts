/**
 * Operations of the management API beyond the entities (docs/operations.md): revocations, controller settings,
 * database snapshot and data integrity, identity tracing — step by step, with their error cases. Every call goes
 * through `conformant`/`call`, so each answer is validated against OpenZiti's spec.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REVOCATION_LIFETIME_MS } from '../../src/model/revocation.js';
import { expectError, userWith } from '../support/api.js';
import { conformant, ownOperations } from '../support/conformance.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let root: string;
const M = 'management' as const;

beforeAll(async () => {
  srv = await startServer();
  root = await login(srv.base);
});
afterAll(async () => {
  const { missing } = ownOperations('test/api/operations.test.ts', srv.ctl.ops);
  await srv.stop();
  expect(missing).toEqual([]);
});

const sessionWorks = async (token: string) =>
  (await call('GET', `${srv.client}/current-api-session`, { token })).status === 200;

describe('revocations', () => {
  const revoke = (body: unknown, token = root) => conformant(M, 'POST', '/revocations', srv.base, { token, body });

  it('IDENTITY ends the sessions the identity has, not the ones it starts afterwards', async () => {
    const u = await userWith(srv.base, root, 'revoked-user');
    const second = await login(srv.base, 'revoked-user', 'revoked-user-pass');
    const bystander = await userWith(srv.base, root, 'bystander');
    const before = Date.now();
    const r = await revoke({ id: u.id, type: 'IDENTITY', tags: { why: 'lost laptop' } });
    expect(r.status, r.text).toBe(201);
    expect(r.body.data.id).toBe(u.id);
    expect(await sessionWorks(u.token)).toBe(false);
    expect(await sessionWorks(second)).toBe(false);
    expect(await sessionWorks(bystander.token)).toBe(true);
    // a login after the revocation is a new token, valid
    expect(await sessionWorks(await login(srv.base, 'revoked-user', 'revoked-user-pass'))).toBe(true);
    const d = await conformant(M, 'GET', '/revocations/{id}', srv.base, { token: root, params: { id: u.id } });
    expect(d.status, d.text).toBe(200);
    expect(d.body.data).toMatchObject({ id: u.id, type: 'IDENTITY', tags: { why: 'lost laptop' } });
    const lifetime = Date.parse(d.body.data.expiresAt) - before;
    expect(lifetime).toBeGreaterThanOrEqual(REVOCATION_LIFETIME_MS);
    expect(lifetime).toBeLessThan(REVOCATION_LIFETIME_MS + 60_000);
    // the same id again is a conflict on `id`
    expectError(await revoke({ id: u.id, type: 'IDENTITY' }), 400, 'COULD_NOT_VALIDATE', 'id');
  });

  it('API_SESSION ends that one session', async () => {
    const u = await userWith(srv.base, root, 'session-revoked');
    const other = await login(srv.base, 'session-revoked', 'session-revoked-pass');
    const sid = (await call('GET', `${srv.client}/current-api-session`, { token: u.token })).body.data.id;
    const r = await revoke({ id: sid, type: 'API_SESSION' });
    expect(r.status, r.text).toBe(201);
    expect(await sessionWorks(u.token)).toBe(false);
    expect(await sessionWorks(other)).toBe(true);
    // a UUID is accepted (OpenZiti's OIDC session ids) even when Keel has no such session
    const uuid = '0b6a1c1e-7d0e-4a8e-9a36-6c1f1f0f7a11';
    expect((await revoke({ id: uuid, type: 'API_SESSION' })).status).toBe(201);
  });

  it('JTI is recorded (Keel issues no JWT bearer tokens it would refuse)', async () => {
    const jti = '7c1d2a52-1f0b-4b7d-8d9c-0e7f2d6b3a90';
    expect((await revoke({ id: jti, type: 'JTI' })).status).toBe(201);
    const list = await conformant(M, 'GET', '/revocations', srv.base, {
      token: root,
      query: `filter=${encodeURIComponent('type = "JTI"')}`,
    });
    expect(list.status, list.text).toBe(200);
    expect(list.body.data.map((x: { id: string }) => x.id)).toEqual([jti]);
    expect(await sessionWorks(root)).toBe(true);
  });

  it('refuses what OpenZiti refuses', async () => {
    expectError(await revoke({ id: 'no-such-identity', type: 'IDENTITY' }), 404, 'NOT_FOUND');
    expectError(await revoke({ id: 'not-a-uuid', type: 'JTI' }), 400, 'COULD_NOT_VALIDATE', 'id');
    expectError(await revoke({ id: 'not-a-session', type: 'API_SESSION' }), 400, 'COULD_NOT_VALIDATE', 'id');
    expectError(await revoke({ id: 'x', type: 'TOKEN' }), 400, 'COULD_NOT_VALIDATE');
    expectError(await revoke({ type: 'JTI' }), 400, 'COULD_NOT_VALIDATE');
    expectError(await revoke({ id: '', type: 'JTI' }), 400, 'COULD_NOT_VALIDATE');
    const plain = await userWith(srv.base, root, 'not-allowed-to-revoke');
    expectError(await revoke({ id: plain.id, type: 'IDENTITY' }, plain.token), 401, 'UNAUTHORIZED');
    expect(await sessionWorks(plain.token)).toBe(true);
    expectError(
      await conformant(M, 'GET', '/revocations/{id}', srv.base, { token: root, params: { id: 'nope' } }),
      404,
      'NOT_FOUND',
    );
  });

  it('expired revocations are removed by the next one written', async () => {
    const svc = srv.ctl.svc;
    const past = new Date(Date.now() - 1000).toISOString();
    await svc.write({
      op: 'batch',
      ops: ['old-1', 'old-2'].map((id) => ({
        op: 'create' as const,
        entity: 'revocations',
        id,
        data: { type: 'JTI', expiresAt: past },
        at: past,
      })),
    });
    expect(svc.get('revocations', 'old-1')).toBeDefined();
    expect((await revoke({ id: '5f0e0c52-3a1b-4c2d-9e8f-7a6b5c4d3e2f', type: 'JTI' })).status).toBe(201);
    expect(svc.get('revocations', 'old-1')).toBeUndefined();
    expect(svc.get('revocations', 'old-2')).toBeUndefined();
  });
});
