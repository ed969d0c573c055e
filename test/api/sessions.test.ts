import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeClusterView } from '../support/cluster-view.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

describe('API session expiry and activity', () => {
  let srv: TestServer;
  let now = Date.parse('2026-06-01T00:00:00Z');
  const clock = { now: () => now };

  beforeAll(async () => {
    srv = await startServer({
      clock,
      sessionTimeout_ms: 60_000,
      sessionFlush_ms: 3_600_000,
      sessionSweep_ms: 3_600_000,
    });
  });
  afterAll(() => srv.stop());

  it('a session expires after the idle timeout; activity extends it', async () => {
    const token = await login(srv.base);
    const first = await call('GET', `${srv.client}/current-api-session`, { token });
    expect(first.body.data.expirationSeconds).toBe(60);
    now += 45_000;
    const second = await call('GET', `${srv.client}/current-api-session`, { token });
    expect(second.status).toBe(200);
    now += 45_000; // 90 s after login but 45 s after the last request
    expect((await call('GET', `${srv.client}/current-identity`, { token })).status).toBe(200);
    now += 61_000;
    const expired = await call('GET', `${srv.client}/current-identity`, { token });
    expect(expired.status).toBe(401);
    expect(expired.headers.get('www-authenticate')).toContain('error="invalid"');
  });

  it('activity is persisted in batches and the sweeper deletes expired sessions', async () => {
    const admin = await login(srv.base);
    const other = await login(srv.base);
    now += 30_000;
    await call('GET', `${srv.client}/current-identity`, { token: admin });
    await srv.ctl.svc.sessions.flush();
    const rows = [...srv.ctl.svc.store.collection('api-sessions').scan()];
    const adminRow = rows.find((r) => r.token === admin)!;
    expect(Date.parse(adminRow.lastActivityAt as string)).toBe(now);
    now += 40_000; // `other` idle 70 s, `admin` idle 40 s
    const deleted = await srv.ctl.svc.sessions.sweep();
    expect(deleted).toBeGreaterThanOrEqual(1);
    const left = [...srv.ctl.svc.store.collection('api-sessions').scan()].map((r) => r.token);
    expect(left).toContain(admin);
    expect(left).not.toContain(other);
  });
});

describe('session activity flushing', () => {
  it('an idle flush does not wedge later flushes (activity keeps being persisted)', async () => {
    const srv = await startServer({ sessionFlush_ms: 3_600_000, sessionSweep_ms: 3_600_000 });
    try {
      const token = await login(srv.base);
      await srv.ctl.svc.sessions.flush(); // the login's own touch
      await srv.ctl.svc.sessions.flush(); // nothing to write
      await new Promise((r) => setTimeout(r, 20));
      const touched = Date.now(); // the GET's touch is no earlier (an ordering, not a bound a slow machine can miss)
      await call('GET', `${srv.client}/current-identity`, { token });
      await srv.ctl.svc.sessions.flush();
      const row = [...srv.ctl.svc.store.collection('api-sessions').scan()].find((r) => r.token === token)!;
      const persisted = Date.parse(row.lastActivityAt as string);
      expect(persisted).toBeGreaterThanOrEqual(touched);
      expect(persisted).toBeGreaterThan(Date.parse(row.createdAt));
    } finally {
      await srv.stop();
    }
  });

  it('stop() writes pending activity', async () => {
    const srv = await startServer({ sessionFlush_ms: 3_600_000, sessionSweep_ms: 3_600_000 });
    const token = await login(srv.base);
    await srv.ctl.svc.sessions.flush();
    await new Promise((r) => setTimeout(r, 20));
    await call('GET', `${srv.client}/current-identity`, { token });
    const last = Date.now();
    await srv.stop({ keepData: true });
    const again = await startServer({ dataDir: srv.dataDir });
    try {
      const row = [...again.ctl.svc.store.collection('api-sessions').scan()].find((r) => r.token === token)!;
      expect(Math.abs(Date.parse(row.lastActivityAt as string) - last)).toBeLessThan(500);
      expect(Date.parse(row.lastActivityAt as string)).toBeGreaterThan(Date.parse(row.createdAt));
    } finally {
      await again.stop();
    }
  });

  it('removed sessions are forgotten (no leak in the activity map)', async () => {
    const srv = await startServer({ sessionFlush_ms: 3_600_000, sessionSweep_ms: 3_600_000 });
    try {
      const admin = await login(srv.base);
      const other = await login(srv.base);
      await call('GET', `${srv.client}/current-identity`, { token: other });
      const sessions = srv.ctl.svc.sessions as unknown as { activity: Map<string, number> };
      const id = (await call('GET', `${srv.client}/current-api-session`, { token: other })).body.data.id;
      expect(sessions.activity.has(id)).toBe(true);
      await call('DELETE', `${srv.mgmt}/api-sessions/${id}`, { token: admin });
      expect(sessions.activity.has(id)).toBe(false);
      expect(sessions.activity.size).toBe(1); // the admin's own session
    } finally {
      await srv.stop();
    }
  });
});

describe('sessions on a cluster member', () => {
  let srv: TestServer;
  let now = Date.parse('2026-06-01T00:00:00Z');
  let leader = false;
  let barrier: () => Promise<void> = async () => {};
  let barriers = 0;

  beforeAll(async () => {
    srv = await startServer({
      clock: { now: () => now },
      sessionTimeout_ms: 60_000,
      sessionFlush_ms: 10_000,
      sessionSweep_ms: 3_600_000,
    });
    // this node as a cluster member (its leadership and read barrier scripted)
    srv.ctl.svc.cluster = {
      ...fakeClusterView('n1', () => []),
      raft: { isLeader: () => leader, term: () => 1 },
      readBarrier: () => {
        barriers++;
        return barrier();
      },
    };
  });
  afterAll(async () => {
    srv.ctl.svc.cluster = null;
    await srv.stop();
  });

  it('a token this member does not know yet is confirmed with a read barrier before 401', async () => {
    const token = await login(srv.base);
    const svc = srv.ctl.svc;
    const row = [...svc.store.collection('api-sessions').scan()].find((r) => r.token === token)!;
    const { id, createdAt: _c, updatedAt: _u, ...data } = row;
    // the member has not applied the session yet; the barrier is what brings it in (as applying the log would)
    await svc.write({ op: 'delete', entity: 'api-sessions', id, at: new Date(now).toISOString() });
    barrier = async () => {
      await svc.write({ op: 'create', entity: 'api-sessions', id, data, at: new Date(now).toISOString() });
    };
    barriers = 0;
    const r = await call('GET', `${srv.client}/current-identity`, { token });
    expect(r.status).toBe(200);
    expect(barriers).toBe(1);
    // a known token needs no barrier; an unknown one still gets 401 after it
    barrier = async () => {};
    expect((await call('GET', `${srv.client}/current-identity`, { token })).status).toBe(200);
    expect(barriers).toBe(1);
    const bad = await call('GET', `${srv.client}/current-identity`, { token: `${token.slice(0, -4)}0000` });
    expect(bad.status).toBe(401);
    expect(barriers).toBe(2);
  });

  it('only the leader sweeps, and only sessions idle past the timeout plus a grace of two flush intervals', async () => {
    const token = await login(srv.base);
    const has = () => [...srv.ctl.svc.store.collection('api-sessions').scan()].some((r) => r.token === token);
    now += 65_000; // idle past the 60 s timeout, within the 20 s grace
    leader = true;
    await srv.ctl.svc.sessions.sweep();
    expect(has()).toBe(true);
    now += 20_000; // past timeout + grace
    leader = false;
    expect(await srv.ctl.svc.sessions.sweep()).toBe(0);
    expect(has()).toBe(true);
    leader = true;
    expect(await srv.ctl.svc.sessions.sweep()).toBeGreaterThanOrEqual(1);
    expect(has()).toBe(false);
  });
});
