/**
 * `POST /sessions` asked several times at once by one API session for one service and type, on one node: one
 * session, every answer naming it (OpenZiti answers an API session's existing session rather than a second one).
 * The writes are held a moment, so that the requests overlap as they would on a loaded node.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminApi, openEdgeRouter } from '../support/admin-api.js';
import { userWith } from '../support/api.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let admin: string;
const { create } = adminApi(
  () => srv,
  () => admin,
);

beforeAll(async () => {
  srv = await startServer();
  admin = await login(srv.base);
});
afterAll(() => srv.stop());

describe('session creates racing on one node', () => {
  it('make one session; every answer names it', async () => {
    const user = await userWith(srv.base, admin, 'once-u', { roleAttributes: ['once-u'] });
    const serviceId = await create('/services', {
      name: 'once-s',
      encryptionRequired: true,
      roleAttributes: ['once-s'],
    });
    await create('/service-policies', {
      name: 'once-p',
      type: 'Dial',
      semantic: 'AnyOf',
      identityRoles: ['#once-u'],
      serviceRoles: ['#once-s'],
    });
    await openEdgeRouter(create, 'once');
    // each session create's write held 100 ms: every request of the burst is handled while the first is in flight
    const svc = srv.ctl.svc;
    const write = svc.write.bind(svc);
    svc.write = async (cmd) => {
      if (cmd.op === 'create' && cmd.entity === 'sessions') await new Promise((r) => setTimeout(r, 100));
      return write(cmd);
    };
    const burst = await Promise.all(
      Array.from({ length: 8 }, () =>
        call('POST', `${srv.client}/sessions`, { token: user.token, body: { serviceId, type: 'Dial' } }),
      ),
    );
    for (const r of burst) expect(r.status, r.text).toBe(201);
    const ids = new Set(burst.map((r) => r.body.data.id as string));
    expect(ids.size).toBe(1);
    const listed = await call('GET', `${srv.client}/sessions`, { token: user.token });
    expect(listed.body.data.map((s: { id: string }) => s.id)).toEqual([...ids]);
  });
});
