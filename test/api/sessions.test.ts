import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
