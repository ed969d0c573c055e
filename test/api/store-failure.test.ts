/**
 * The controller when its store fails a disk write (fault injected at the store's database boundary): writes get
 * 503 STORE_FAILED in OpenZiti's envelope and are never acknowledged again, reads keep working, /health-checks
 * says unhealthy and why, and the owner is told once (keel run then exits: test/cli/disk-full.test.ts).
 */
import { describe, expect, it } from 'vitest';
import type { StoreFailedError } from '../../storage/types.js';
import { call, login, startServer } from '../support/server.js';
import { enospc, FaultyDb } from '../support/store-dbs.js';

describe('a failed disk write', () => {
  it.each(['uws', 'node'] as const)(
    'stops acknowledgements, reports it in health, keeps serving reads (%s)',
    async (engine) => {
      let db: FaultyDb | null = null;
      const fatal: StoreFailedError[] = [];
      const logged: string[] = [];
      const srv = await startServer({
        engine,
        storeDb: (dir) => (db = new FaultyDb(dir)),
        onFatal: (f) => fatal.push(f),
        log: (level, msg) => logged.push(`${level}: ${msg}`),
      });
      try {
        const token = await login(srv.base);
        const healthy = await call('GET', `${srv.base}/health-checks`);
        expect(healthy.status).toBe(200);
        expect(healthy.body).toMatchObject({ data: { healthy: true, checks: [{ id: 'store.write', healthy: true }] } });
        expect(healthy.body.meta).toEqual({});

        const kept = await call('POST', `${srv.mgmt}/identities`, {
          token,
          body: { name: 'kept', type: 'User', isAdmin: false },
        });
        expect(kept.status).toBe(201);

        db!.failWrites = enospc;
        const failed = await call('POST', `${srv.mgmt}/identities`, {
          token,
          body: { name: 'lost', type: 'User', isAdmin: false },
        });
        expect(failed.status).toBe(503);
        expect(failed.body.error).toMatchObject({ code: 'STORE_FAILED' });
        expect(failed.body.error.message).toMatch(/refuses writes/);
        expect(failed.text).not.toContain('No space left'); // the disk's message goes to the log only

        // space is back: still no write is acknowledged
        db!.failWrites = null;
        const later = await call('POST', `${srv.mgmt}/identities`, {
          token,
          body: { name: 'later', type: 'User', isAdmin: false },
        });
        expect(later.status).toBe(503);
        expect(later.body.error.code).toBe('STORE_FAILED');

        const health = await call('GET', `${srv.base}/health-checks`);
        expect(health.status).toBe(503);
        expect(health.body.data.healthy).toBe(false);
        const check = health.body.data.checks[0];
        expect(check).toMatchObject({ id: 'store.write', healthy: false });
        expect(check.details).toMatch(/write failed/);
        expect(Date.parse(check.failingSince)).not.toBeNaN();

        // reads of what is durable still work (the session was already known)
        const list = await call('GET', `${srv.mgmt}/identities?filter=${encodeURIComponent('name contains "e"')}`, {
          token,
        });
        expect(list.status).toBe(200);
        expect(list.body.data.map((i: { name: string }) => i.name)).toContain('kept');
        expect(list.body.data.map((i: { name: string }) => i.name)).not.toContain('later');

        expect(fatal).toHaveLength(1);
        expect(fatal[0]!.stage).toBe('write');
        expect(logged.filter((l) => l.startsWith('fatal:'))).toHaveLength(1);
      } finally {
        await srv.stop();
      }
    },
  );

  it('a command nested too deeply to store fails alone with 400, the concurrent ones succeed', async () => {
    const srv = await startServer();
    try {
      const token = await login(srv.base);
      let deep: unknown = 1;
      for (let i = 0; i < 1_500; i++) deep = [deep];
      const creates = Array.from({ length: 20 }, (_, i) =>
        call('POST', `${srv.mgmt}/identities`, { token, body: { name: `c${i}`, type: 'User', isAdmin: false } }),
      );
      const bad = call('POST', `${srv.mgmt}/identities`, {
        token,
        body: { name: 'deep', type: 'User', isAdmin: false, tags: { deep } },
      });
      const [badRes, ...okRes] = await Promise.all([bad, ...creates]);
      expect(badRes.status).toBe(400);
      expect(badRes.body.error.code).toBe('COULD_NOT_VALIDATE');
      expect(okRes.map((r) => r.status)).toEqual(okRes.map(() => 201));
    } finally {
      await srv.stop();
    }
  });
});
