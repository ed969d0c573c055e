import { describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, call, startServer } from '../support/server.js';

describe.each(['uws', 'node'] as const)('connection limit on the %s engine', (engine) => {
  it('requests beyond --max-connections are refused with 429, the rest succeed', async () => {
    const srv = await startServer({ engine, maxConnections: 2 });
    try {
      // password logins take a while (argon2), so they overlap
      const results = await Promise.all(
        Array.from({ length: 12 }, () =>
          call('POST', `${srv.mgmt}/authenticate?method=password`, {
            body: { username: 'admin', password: ADMIN_PASSWORD },
          }),
        ),
      );
      const statuses = results.map((r) => r.status);
      expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(1);
      const refused = results.filter((r) => r.status === 429);
      expect(refused.length).toBeGreaterThanOrEqual(1);
      expect(refused[0]!.body.error.code).toBe('SERVER_TOO_MANY_REQUESTS');
      expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
    } finally {
      await srv.stop();
    }
  });
});

describe('durability setting', () => {
  it('the operator path (default options) acknowledges a write only after a synced batch', async () => {
    const { Controller } = await import('../../src/controller.js');
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dataDir = mkdtempSync(join(tmpdir(), 'keel-sync-'));
    const ctl = await Controller.start({ dataDir, host: '127.0.0.1', port: 0, adminPassword: ADMIN_PASSWORD });
    try {
      expect(ctl.durableWrites).toBe(true);
      const seen: boolean[] = [];
      const store = ctl.svc.store;
      const orig = store.applyGroup.bind(store);
      store.applyGroup = (cmds, opts) => {
        seen.push(opts.sync);
        return orig(cmds, opts);
      };
      const r = await call('POST', `${ctl.baseUrl}/edge/management/v1/authenticate?method=password`, {
        body: { username: 'admin', password: ADMIN_PASSWORD },
      });
      expect(r.status).toBe(200);
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.every((x) => x === true)).toBe(true);
    } finally {
      await ctl.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
