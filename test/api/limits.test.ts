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
