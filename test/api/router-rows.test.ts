/**
 * Edge routers stored before every router had a router row (an old data directory) get theirs when the controller
 * starts: the shared fields, unenrolled, through one logged command that apply decides from the state it meets
 * (src/model/router-rows.ts). An edge router whose name another router holds keeps none and is logged as an error;
 * a second start changes nothing.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { call, login, startServer, type TestServer } from '../support/server.js';

const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers.splice(0)) await s.stop();
});

describe('edge routers stored before router rows', () => {
  it('get their router row at startup, once; a router name already taken leaves one without and is logged', async () => {
    const first = await startServer();
    const admin = await login(first.base);
    const transit = await call('POST', `${first.mgmt}/transit-routers`, { token: admin, body: { name: 'taken' } });
    expect(transit.status, transit.text).toBe(201);
    // the old shape: an edge-routers row alone, as stored before router rows existed
    const at = new Date().toISOString();
    const old = (id: string, name: string) => ({
      op: 'create' as const,
      entity: 'edge-routers' as const,
      id,
      at,
      data: {
        name,
        roleAttributes: ['old'],
        cost: 7,
        noTraversal: true,
        disabled: false,
        isTunnelerEnabled: false,
        appData: {},
        tags: { era: 'old' },
      },
    });
    await first.ctl.svc.write({ op: 'batch', ops: [old('old-er-1', 'old one'), old('old-er-2', 'taken')] });
    expect(first.ctl.svc.get('transit-routers', 'old-er-1')).toBeUndefined();
    await first.stop({ keepData: true });

    const logged: [string, string, unknown][] = [];
    const second = await startServer({
      dataDir: first.dataDir,
      log: (level, msg, fields) => logged.push([level, msg, fields]),
    });
    servers.push(second);
    const token = await login(second.base);
    const router = await call('GET', `${second.mgmt}/routers/old-er-1`, { token });
    expect(router.status, router.text).toBe(200);
    expect(router.body.data).toMatchObject({
      name: 'old one',
      cost: 7,
      noTraversal: true,
      disabled: false,
      isVerified: false,
      fingerprint: '',
      tags: { era: 'old' },
    });
    const edge = (await call('GET', `${second.mgmt}/edge-routers/old-er-1`, { token })).body.data;
    expect(edge).toMatchObject({ name: 'old one', roleAttributes: ['old'], isVerified: false });
    // re-enroll gives it its enrollment JWT
    expect((await call('POST', `${second.mgmt}/edge-routers/old-er-1/re-enroll`, { token })).status).toBe(200);
    const enrolled = (await call('GET', `${second.mgmt}/edge-routers/old-er-1`, { token })).body.data;
    expect(typeof enrolled.enrollmentJwt).toBe('string');
    // the name clash: no row, an error in the log naming the router
    expect((await call('GET', `${second.mgmt}/routers/old-er-2`, { token })).status).toBe(404);
    const errors = logged.filter(([level]) => level === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]![2]).toEqual({ ids: ['old-er-2'] });
    const rowAfterFirst = second.ctl.svc.get('transit-routers', 'old-er-1');
    await second.stop({ keepData: true });
    servers.splice(0);

    const third = await startServer({ dataDir: first.dataDir });
    servers.push(third);
    expect(third.ctl.svc.get('transit-routers', 'old-er-1')?.updatedAt).toBe(rowAfterFirst?.updatedAt);
    expect(third.ctl.svc.get('transit-routers', 'old-er-2')).toBeUndefined();
  });
});
