/**
 * Lockout (auth policy `maxAttempts` / `lockoutDurationMinutes`) and identity disable/enable, step by step on the
 * controller's injectable clock.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_AUTH_POLICY } from '../../src/model/auth-policy.js';
import { manualClock } from '../support/clock.js';
import { conformant, ownOperations } from '../support/conformance.js';
import { call, login, type Res, startServer, type TestServer } from '../support/server.js';

const clock = manualClock();
let srv: TestServer;
let token: string;
const M = 'management' as const;
const MINUTE = 60_000;

beforeAll(async () => {
  srv = await startServer({
    clock,
    sessionTimeout_ms: 365 * 24 * 60 * MINUTE * 2,
    // the tests count the store's writes: no background session-activity flush or sweep may land among them
    sessionFlush_ms: 3_600_000,
    sessionSweep_ms: 3_600_000,
  });
  token = await login(srv.base);
});
afterAll(async () => {
  const { served, missing } = ownOperations('test/api/lockout.test.ts', srv.ctl.ops);
  await srv.stop();
  expect(served.length).toBe(2);
  expect(missing).toEqual([]);
});

function expectError(res: Res, status: number, code: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.body.error.code).toBe(code);
}

async function createPolicy(name: string, maxAttempts: number, lockoutDurationMinutes: number): Promise<string> {
  const body = structuredClone(DEFAULT_AUTH_POLICY);
  body.name = name;
  body.primary.updb = { ...body.primary.updb, maxAttempts, lockoutDurationMinutes };
  const r = await call('POST', `${srv.mgmt}/auth-policies`, { token, body });
  expect(r.status, r.text).toBe(201);
  return r.body.data.id;
}

async function createUser(name: string, authPolicyId: string): Promise<string> {
  const r = await call('POST', `${srv.mgmt}/identities`, {
    token,
    body: { name, type: 'User', isAdmin: false, authPolicyId },
  });
  expect(r.status, r.text).toBe(201);
  const a = await call('POST', `${srv.mgmt}/authenticators`, {
    token,
    body: { method: 'updb', identityId: r.body.data.id, username: name, password: `${name}-pw` },
  });
  expect(a.status, a.text).toBe(201);
  return r.body.data.id;
}

function attempt(name: string, password = `${name}-pw`): Promise<Res> {
  return call('POST', `${srv.client}/authenticate?method=password`, { body: { username: name, password } });
}

async function identity(id: string): Promise<any> {
  const r = await call('GET', `${srv.mgmt}/identities/${id}`, { token });
  expect(r.status, r.text).toBe(200);
  return r.body.data;
}

describe('lockout', () => {
  it('maxAttempts failures disable the identity for lockoutDurationMinutes; a success resets the count', async () => {
    const policy = await createPolicy('lock-3', 3, 10);
    const id = await createUser('locky', policy);
    const session = (await attempt('locky')).headers.get('zt-session')!;
    // two failures, then a success: the counter starts again
    for (let i = 0; i < 2; i++) expectError(await attempt('locky', 'wrong-password'), 401, 'INVALID_AUTH');
    expect((await attempt('locky')).status).toBe(200);
    for (let i = 0; i < 2; i++) expectError(await attempt('locky', 'wrong-password'), 401, 'INVALID_AUTH');
    expect((await identity(id)).disabled).toBe(false);
    // the third failure in a row locks it out and ends its sessions
    expectError(await attempt('locky', 'wrong-password'), 401, 'INVALID_AUTH');
    const d = await identity(id);
    expect(d.disabled).toBe(true);
    expect(d.disabledAt).toBe(new Date(clock.now()).toISOString());
    expect(d.disabledUntil).toBe(new Date(clock.now() + 10 * MINUTE).toISOString());
    expectError(await call('GET', `${srv.client}/current-identity`, { token: session }), 401, 'UNAUTHORIZED');
    expectError(await attempt('locky'), 401, 'INVALID_AUTH');
    // failures while locked out do not extend it
    expectError(await attempt('locky', 'wrong-password'), 401, 'INVALID_AUTH');
    clock.advance(10 * MINUTE - 1000);
    expectError(await attempt('locky'), 401, 'INVALID_AUTH');
    clock.advance(2000);
    expect((await identity(id)).disabled).toBe(false);
    expect((await attempt('locky')).status).toBe(200);
    // the counter was reset by the lockout: two failures do not lock again
    for (let i = 0; i < 2; i++) expectError(await attempt('locky', 'wrong-password'), 401, 'INVALID_AUTH');
    expect((await attempt('locky')).status).toBe(200);
  });

  it('lockoutDurationMinutes 0 locks out until an admin enables the identity', async () => {
    const policy = await createPolicy('lock-forever', 2, 0);
    const id = await createUser('forever', policy);
    for (let i = 0; i < 2; i++) expectError(await attempt('forever', 'wrong-password'), 401, 'INVALID_AUTH');
    const d = await identity(id);
    expect(d.disabled).toBe(true);
    expect(d.disabledUntil).toBeNull();
    clock.advance(365 * 24 * 60 * MINUTE);
    token = await login(srv.base);
    expectError(await attempt('forever'), 401, 'INVALID_AUTH');
    const en = await conformant(M, 'POST', '/identities/{id}/enable', srv.base, { token, params: { id } });
    expect(en.status, en.text).toBe(200);
    expect((await identity(id)).disabled).toBe(false);
    expect((await attempt('forever')).status).toBe(200);
  });

  it('the default admin is never locked out, even under a locking policy', async () => {
    const policy = await createPolicy('lock-admin', 2, 0);
    const me = (await call('GET', `${srv.mgmt}/current-identity`, { token })).body.data;
    const moved = await call('PATCH', `${srv.mgmt}/identities/${me.id}`, { token, body: { authPolicyId: policy } });
    expect(moved.status, moved.text).toBe(200);
    for (let i = 0; i < 3; i++) expectError(await attempt('admin', 'wrong-password'), 401, 'INVALID_AUTH');
    expect((await identity(me.id)).disabled).toBe(false);
    token = await login(srv.base);
    await call('PATCH', `${srv.mgmt}/identities/${me.id}`, { token, body: { authPolicyId: 'default' } });
  });

  it('wrong current passwords of a password change count with wrong logins; a right one resets the count', async () => {
    const policy = await createPolicy('lock-change', 3, 10);
    const id = await createUser('changer', policy);
    const session = (await attempt('changer')).headers.get('zt-session')!;
    const own = await call('GET', `${srv.client}/current-identity/authenticators`, { token: session });
    const path = `${srv.client}/current-identity/authenticators/${own.body.data[0].id}`;
    const change = (method: 'PUT' | 'PATCH', currentPassword: string, password = 'changer-pw') =>
      call(method, path, { token: session, body: { currentPassword, password, username: 'changer' } });
    // two wrong ones (PUT and PATCH alike) count as two failed logins
    expectError(await change('PUT', 'wrong-password'), 401, 'UNAUTHORIZED');
    expectError(await change('PATCH', 'wrong-password'), 401, 'UNAUTHORIZED');
    expect(srv.ctl.svc.get('identities', id)!.failedLoginAttempts).toBe(2);
    // a change proving the current password resets the count, as a successful login does
    expect((await change('PATCH', 'changer-pw', 'changer-pw2')).status).toBe(200);
    expect(srv.ctl.svc.get('identities', id)!.failedLoginAttempts).toBe(0);
    // two wrong changes and a wrong login: the third failure in a row locks the identity out, ending its sessions
    for (let i = 0; i < 2; i++) expectError(await change('PATCH', 'changer-pw'), 401, 'UNAUTHORIZED');
    expect((await identity(id)).disabled).toBe(false);
    expectError(await attempt('changer', 'wrong-password'), 401, 'INVALID_AUTH');
    expect((await identity(id)).disabled).toBe(true);
    expectError(await call('GET', `${srv.client}/current-identity`, { token: session }), 401, 'UNAUTHORIZED');
    expectError(await attempt('changer', 'changer-pw2'), 401, 'INVALID_AUTH');
    clock.advance(10 * MINUTE + 1000);
    expect((await attempt('changer', 'changer-pw2')).status).toBe(200);
  });

  it('with maxAttempts 0 a failed login writes nothing', async () => {
    await createUser('nolock', 'default');
    const before = srv.ctl.svc.store.appliedIndex;
    for (let i = 0; i < 5; i++) expectError(await attempt('nolock', 'wrong-password'), 401, 'INVALID_AUTH');
    expect(srv.ctl.svc.store.appliedIndex).toBe(before);
    // under a locking policy each failure is one write
    const policy = await createPolicy('lock-100', 100, 1);
    const id = await createUser('counted', policy);
    const start = srv.ctl.svc.store.appliedIndex;
    for (let i = 0; i < 3; i++) expectError(await attempt('counted', 'wrong-password'), 401, 'INVALID_AUTH');
    expect(srv.ctl.svc.store.appliedIndex).toBe(start + 3);
    expect(srv.ctl.svc.get('identities', id)!.failedLoginAttempts).toBe(3);
    expect((await attempt('counted')).status).toBe(200);
    expect(srv.ctl.svc.get('identities', id)!.failedLoginAttempts).toBe(0);
  });
});

describe('identity disable / enable', () => {
  it('disable ends the sessions and refuses logins; indefinitely with 0, until enabled', async () => {
    const id = await createUser('disably', 'default');
    const session = (await attempt('disably')).headers.get('zt-session')!;
    const r = await conformant(M, 'POST', '/identities/{id}/disable', srv.base, {
      token,
      params: { id },
      body: { durationMinutes: 0 },
    });
    expect(r.status, r.text).toBe(200);
    expectError(await call('GET', `${srv.client}/current-api-session`, { token: session }), 401, 'UNAUTHORIZED');
    expectError(await attempt('disably'), 401, 'INVALID_AUTH');
    const d = await identity(id);
    expect(d).toMatchObject({ disabled: true, disabledUntil: null, hasApiSession: false });
    const list = await call('GET', `${srv.mgmt}/identities?filter=isDisabled%3Dtrue`, { token });
    expect(list.body.data.map((i: any) => i.id)).toContain(id);
    clock.advance(100 * 24 * 60 * MINUTE);
    token = await login(srv.base);
    expectError(await attempt('disably'), 401, 'INVALID_AUTH');
    const en = await conformant(M, 'POST', '/identities/{id}/enable', srv.base, { token, params: { id } });
    expect(en.status).toBe(200);
    expect((await attempt('disably')).status).toBe(200);
  });

  it('a session that outlived a disable (a login racing with it) is refused', async () => {
    const id = await createUser('racer', 'default');
    const session = (await attempt('racer')).headers.get('zt-session')!;
    // the disable as a login racing with it would leave things: disabled, with a session
    await srv.ctl.svc.write({
      op: 'update',
      entity: 'identities',
      id,
      set: { disabledAt: new Date(clock.now()).toISOString(), disabledUntil: null },
      at: new Date(clock.now()).toISOString(),
      system: true,
    });
    expectError(await call('GET', `${srv.client}/current-api-session`, { token: session }), 401, 'UNAUTHORIZED');
    await conformant(M, 'POST', '/identities/{id}/enable', srv.base, { token, params: { id } });
    expect((await call('GET', `${srv.client}/current-api-session`, { token: session })).status).toBe(200);
  });

  it('a disable with a duration lapses by itself at disabledUntil', async () => {
    const id = await createUser('lapsing', 'default');
    await conformant(M, 'POST', '/identities/{id}/disable', srv.base, {
      token,
      params: { id },
      body: { durationMinutes: 5 },
    });
    expect((await identity(id)).disabledUntil).toBe(new Date(clock.now() + 5 * MINUTE).toISOString());
    clock.advance(4 * MINUTE);
    expectError(await attempt('lapsing'), 401, 'INVALID_AUTH');
    clock.advance(MINUTE + 1);
    expect((await identity(id)).disabled).toBe(false);
    expect((await attempt('lapsing')).status).toBe(200);
  });

  it('errors: bad duration, unknown identity, the default admin, non-admins', async () => {
    const id = await createUser('disable-errors', 'default');
    for (const body of [{ durationMinutes: -1 }, {}, { durationMinutes: 'x' }, { durationMinutes: 1e9 }]) {
      const r = await conformant(M, 'POST', '/identities/{id}/disable', srv.base, { token, params: { id }, body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.code).toBe('COULD_NOT_VALIDATE');
    }
    const missing = await conformant(M, 'POST', '/identities/{id}/disable', srv.base, {
      token,
      params: { id: 'nope' },
      body: { durationMinutes: 1 },
    });
    expectError(missing, 404, 'NOT_FOUND');
    expectError(
      await conformant(M, 'POST', '/identities/{id}/enable', srv.base, { token, params: { id: 'nope' } }),
      404,
      'NOT_FOUND',
    );
    const admin = (await call('GET', `${srv.mgmt}/current-identity`, { token })).body.data.id;
    const self = await call('POST', `${srv.mgmt}/identities/${admin}/disable`, { token, body: { durationMinutes: 0 } });
    expectError(self, 400, 'ENTITY_CAN_NOT_BE_UPDATED');
    const userToken = (await attempt('disable-errors')).headers.get('zt-session')!;
    const denied = await conformant(M, 'POST', '/identities/{id}/disable', srv.base, {
      token: userToken,
      params: { id },
      body: { durationMinutes: 1 },
    });
    expectError(denied, 401, 'UNAUTHORIZED');
  });
});
