/**
 * Rules a handler checks on local state are checked again inside apply (storage `Expect`): here the state changes
 * between the handler's check and the apply of its command, as it can on a cluster member whose view lags the log.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { interceptNextWrite } from '../support/api.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let token: string;
/** Runs the function given once, after the next handler has done its checks and before its command is applied. */
let meanwhile: (f: () => Promise<unknown>) => void;

beforeAll(async () => {
  srv = await startServer();
  token = await login(srv.base);
  meanwhile = interceptNextWrite(srv.ctl.svc);
});
afterAll(() => srv?.stop());

const at = () => new Date().toISOString();
const setAdmin = (id: string, isAdmin: boolean) => () =>
  srv.ctl.svc.write({ op: 'update', entity: 'identities', id, set: { isAdmin }, at: at() });

async function identity(name: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await call('POST', `${srv.mgmt}/identities`, {
    token,
    body: { name, type: 'User', isAdmin: false, ...extra },
  });
  expect(r.status).toBe(201);
  return r.body.data.id;
}

async function userWith(name: string, extra: Record<string, unknown>): Promise<{ t: string; id: string }> {
  const id = await identity(name, extra);
  const a = await call('POST', `${srv.mgmt}/authenticators`, {
    token,
    body: { method: 'updb', identityId: id, username: name, password: `${name}-pass` },
  });
  expect(a.status).toBe(201);
  return { t: await login(srv.base, name, `${name}-pass`), id };
}

describe('preconditions re-checked inside apply', () => {
  it('a non-admin may not update or delete an identity that became an admin after the check', async () => {
    const { t } = await userWith('helpdesk1', { permissions: ['identity'] });
    const target = await identity('target1');
    meanwhile(setAdmin(target, true));
    const r = await call('PATCH', `${srv.mgmt}/identities/${target}`, { token: t, body: { name: 'renamed' } });
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe('UNAUTHORIZED');
    expect((await call('GET', `${srv.mgmt}/identities/${target}`, { token })).body.data.name).toBe('target1');

    const target2 = await identity('target2');
    meanwhile(setAdmin(target2, true));
    const d = await call('DELETE', `${srv.mgmt}/identities/${target2}`, { token: t });
    expect(d.status).toBe(401);
    expect((await call('GET', `${srv.mgmt}/identities/${target2}`, { token })).status).toBe(200);
  });

  it('a non-admin may not delete an authenticator whose identity became an admin after the check', async () => {
    const { t } = await userWith('helpdesk2', { permissions: ['identity'] });
    const owner = await userWith('owner2', {});
    const auths = await call('GET', `${srv.mgmt}/identities/${owner.id}/authenticators`, { token });
    const authId = auths.body.data[0].id;
    meanwhile(setAdmin(owner.id, true));
    const d = await call('DELETE', `${srv.mgmt}/authenticators/${authId}`, { token: t });
    expect(d.status).toBe(401);
    expect((await call('GET', `${srv.mgmt}/authenticators/${authId}`, { token })).status).toBe(200);
  });

  it('a non-admin may not remove the MFA of an identity that became an admin after the check', async () => {
    const { t } = await userWith('helpdesk3', { permissions: ['identity'] });
    const target = await identity('mfa-target');
    await srv.ctl.svc.write({
      op: 'create',
      entity: 'mfas',
      id: 'mfa-of-target',
      at: at(),
      system: true,
      data: { identityId: target, isVerified: true, secret: 'JBSWY3DPEHPK3PXP', recoveryCodes: [] },
    });
    meanwhile(setAdmin(target, true));
    const d = await call('DELETE', `${srv.mgmt}/identities/${target}/mfa`, { token: t });
    expect(d.status).toBe(401);
    expect(d.body.error.code).toBe('UNAUTHORIZED');
    expect(srv.ctl.svc.get('mfas', 'mfa-of-target')).toBeDefined();
  });

  it('only admins make admins: an admin demoted after the check cannot grant admin', async () => {
    const a2 = await userWith('admin2', { isAdmin: true });
    const y = await identity('would-be-admin');
    meanwhile(setAdmin(a2.id, false));
    const r = await call('PATCH', `${srv.mgmt}/identities/${y}`, { token: a2.t, body: { isAdmin: true } });
    expect(r.status).toBe(401);
    expect((await call('GET', `${srv.mgmt}/identities/${y}`, { token })).body.data.isAdmin).toBe(false);
  });

  it('an updb enrollment whose username was taken after the check fails on enrollment.updb, creating nothing', async () => {
    const holder = await identity('holder');
    meanwhile(() =>
      srv.ctl.svc.write({
        op: 'create',
        entity: 'authenticators',
        id: 'raced-auth',
        at: at(),
        data: {
          method: 'updb',
          identityId: holder,
          username: 'raced-name',
          password: 'x',
          methodKey: `${holder}:updb`,
        },
      }),
    );
    const r = await call('POST', `${srv.mgmt}/identities`, {
      token,
      body: { name: 'enrollee', type: 'User', isAdmin: false, enrollment: { updb: 'raced-name' } },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('COULD_NOT_VALIDATE');
    expect(r.body.error.cause.field).toBe('enrollment.updb');
    const list = await call('GET', `${srv.mgmt}/identities?filter=${encodeURIComponent('name = "enrollee"')}`, {
      token,
    });
    expect(list.body.data).toEqual([]);
  });
});
