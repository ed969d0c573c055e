/**
 * The service policy enforcer: a session whose identity loses access to its service, of the session's type, is
 * deleted soon after the change that took the access away (OpenZiti's ServicePolicyEnforcer); sessions that keep
 * their access stay.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminApi, openEdgeRouter } from '../support/admin-api.js';
import { userWith } from '../support/api.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let admin: string;
let seq = 0;
const { mgmt, create } = adminApi(
  () => srv,
  () => admin,
);

beforeAll(async () => {
  srv = await startServer();
  admin = await login(srv.base);
  await openEdgeRouter(create, 'enf');
});
afterAll(() => srv.stop());

/** A user with attribute `attr`, a service with attribute `svcAttr`, Dial and Bind policies between them. */
async function scenario() {
  const n = ++seq;
  const user = await userWith(srv.base, admin, `enf-u${n}`, { roleAttributes: [`u${n}`] });
  const serviceId = await create('/services', {
    name: `enf-s${n}`,
    encryptionRequired: true,
    roleAttributes: [`s${n}`],
  });
  const policy = (type: string) =>
    create('/service-policies', {
      name: `enf-${type}-${n}`,
      type,
      semantic: 'AllOf',
      identityRoles: [`#u${n}`],
      serviceRoles: [`#s${n}`],
    });
  const dial = await policy('Dial');
  const bind = await policy('Bind');
  const session = async (type: string) => {
    const r = await call('POST', `${srv.client}/sessions`, { token: user.token, body: { serviceId, type } });
    expect(r.status, r.text).toBe(201);
    return r.body.data.id as string;
  };
  return { n, user, serviceId, dial, bind, dialSession: await session('Dial'), bindSession: await session('Bind') };
}

const exists = async (id: string) => (await mgmt('GET', `/sessions/${id}`)).status === 200;

describe('sessions of an identity that lost access', () => {
  it('go when the identity loses the attribute that granted them; sessions of other identities stay', async () => {
    const a = await scenario();
    const b = await scenario();
    expect((await mgmt('PATCH', `/identities/${a.user.id}`, { roleAttributes: [] })).status).toBe(200);
    await srv.ctl.enforcer.settled();
    expect(await exists(a.dialSession)).toBe(false);
    expect(await exists(a.bindSession)).toBe(false);
    expect(await exists(b.dialSession)).toBe(true);
    expect(await exists(b.bindSession)).toBe(true);
  });

  it('of one type only, when the policy of that type goes; the other type stays', async () => {
    const a = await scenario();
    expect((await mgmt('DELETE', `/service-policies/${a.bind}`)).status).toBe(200);
    await srv.ctl.enforcer.settled();
    expect(await exists(a.bindSession)).toBe(false);
    expect(await exists(a.dialSession)).toBe(true);
    // a policy changed so that it no longer selects the service
    expect((await mgmt('PATCH', `/service-policies/${a.dial}`, { serviceRoles: ['#nothing'] })).status).toBe(200);
    await srv.ctl.enforcer.settled();
    expect(await exists(a.dialSession)).toBe(false);
  });

  it('when the service loses the attribute; a change that keeps the access keeps the session', async () => {
    const a = await scenario();
    // another attribute added: still selected
    expect((await mgmt('PATCH', `/services/${a.serviceId}`, { roleAttributes: [`s${a.n}`, 'extra'] })).status).toBe(
      200,
    );
    await srv.ctl.enforcer.settled();
    expect(await exists(a.dialSession)).toBe(true);
    expect((await mgmt('PATCH', `/services/${a.serviceId}`, { roleAttributes: ['extra'] })).status).toBe(200);
    await srv.ctl.enforcer.settled();
    expect(await exists(a.dialSession)).toBe(false);
    expect(await exists(a.bindSession)).toBe(false);
  });

  it('a session made again once access is back is kept', async () => {
    const a = await scenario();
    await mgmt('PATCH', `/identities/${a.user.id}`, { roleAttributes: [] });
    await srv.ctl.enforcer.settled();
    expect(await exists(a.dialSession)).toBe(false);
    await mgmt('PATCH', `/identities/${a.user.id}`, { roleAttributes: [`u${a.n}`] });
    const again = await call('POST', `${srv.client}/sessions`, {
      token: a.user.token,
      body: { serviceId: a.serviceId, type: 'Dial' },
    });
    expect(again.status, again.text).toBe(201);
    await srv.ctl.enforcer.settled();
    expect(await exists(again.body.data.id)).toBe(true);
  });
});
