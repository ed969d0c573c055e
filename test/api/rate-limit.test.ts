/**
 * The auth rate limiter under a flood of bad logins: the excess gets 429 SERVER_TOO_MANY_REQUESTS at once (no
 * request is left to time out) and an admin still logs in promptly through the admin lane.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conformant } from '../support/conformance.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let token: string;

beforeAll(async () => {
  srv = await startServer();
  token = await login(srv.base);
  const r = await call('POST', `${srv.mgmt}/identities`, {
    token,
    body: { name: 'victim', type: 'User', isAdmin: false },
  });
  const a = await call('POST', `${srv.mgmt}/authenticators`, {
    token,
    body: { method: 'updb', identityId: r.body.data.id, username: 'victim', password: 'victim-password' },
  });
  expect(a.status, a.text).toBe(201);
});
afterAll(() => srv.stop());

/** Concurrent clients logging in with bad passwords, each as fast as it is answered. */
const FLOODERS = 32;
/**
 * An admin login during the flood must finish within this: 0.16–0.6 s measured at load 7–13 on 2 cores, 0.08–0.26 s
 * at load 4. The former FIFO gate (4 in flight, 64 waiting, no admin lane) took 1.5–3.5 s at load 7–13, over the
 * bound, but 0.35–0.92 s at load 4, under it: on a quiet machine that gate is caught by the missing 429s below.
 */
const ADMIN_BOUND_MS = 1_200;
/**
 * No flood request may come near the 10 s request timeout (503 TIMEOUT): the excess is refused at once, not queued
 * until it times out (slowest measured: 1.2–3.7 s, mostly the test's own event loop under the flood).
 */
const FLOOD_REQUEST_BOUND_MS = 8_000;

describe('auth rate limiter', () => {
  it('under a flood of bad logins the excess gets 429 and the admin gets in promptly', async () => {
    const statuses = new Map<number, number>();
    let slowest_ms = 0;
    let stop = false;
    const flooder = async (n: number) => {
      for (let i = 0; !stop && i < 10_000; i++) {
        const started = performance.now();
        const r = await conformant('client', 'POST', '/authenticate', srv.base, {
          query: 'method=password',
          body: { username: n % 2 === 0 ? 'victim' : `nobody-${n}`, password: `wrong-${i}` },
        });
        slowest_ms = Math.max(slowest_ms, performance.now() - started);
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        if (r.status === 429) {
          expect(r.body.error.code).toBe('SERVER_TOO_MANY_REQUESTS');
          expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        }
      }
    };
    const flood = Array.from({ length: FLOODERS }, (_, n) => flooder(n));
    await new Promise((r) => setTimeout(r, 1_000)); // let the queue fill
    const admin_ms: number[] = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      const t = await login(srv.base);
      admin_ms.push(performance.now() - started);
      expect(t).toMatch(/^[0-9a-f-]{36}$/);
    }
    stop = true;
    await Promise.all(flood);
    const summary = `admin logins ${admin_ms.map((x) => x.toFixed(0)).join(', ')} ms; flood ${JSON.stringify([...statuses])}, slowest ${slowest_ms.toFixed(0)} ms`;
    console.log(summary);
    expect([...statuses.keys()].sort(), summary).toEqual([401, 429]);
    expect(Math.max(...admin_ms), summary).toBeLessThan(ADMIN_BOUND_MS);
    expect(slowest_ms, summary).toBeLessThan(FLOOD_REQUEST_BOUND_MS);
  });
});
