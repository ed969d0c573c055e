/**
 * `npm run bench -- auth [--quick]`: password logins per second through Keel (HTTP, argon2id behind the auth rate
 * limiter, a synced session write per success) beside the raw argon2id verify rate on the same machine in the same
 * run (as many verifies at once as there are cores, in this process, nothing else running).
 *
 * Keel runs in a child process (bench/http/keel-child.ts, synced writes); the logins are sent from here by
 * `CLIENTS` concurrent clients, as a non-admin user (the admin lane admits one check at a time by design).
 */
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import argon2 from 'argon2';
import { spawnChild, stopChild } from './child.js';

const quick = process.argv.includes('--quick');
const SECONDS = quick ? 3 : 10;
const CLIENTS = 8;
const USER = 'bench-user';
const PASSWORD = 'bench-user-password';
const OPTIONS = { type: argon2.argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

/** Runs `op` from `n` concurrent loops for `seconds`; returns completed operations per second and their outcomes. */
async function rate(
  n: number,
  seconds: number,
  op: () => Promise<string>,
): Promise<{ perSecond: number; outcomes: Map<string, number> }> {
  const outcomes = new Map<string, number>();
  const end = performance.now() + seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (performance.now() < end) {
        const outcome = await op();
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
        done++;
      }
    }),
  );
  return { perSecond: done / seconds, outcomes };
}

async function post(url: string, body: unknown, token?: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { 'zt-session': token } : {}) },
    body: JSON.stringify(body),
  });
}

const cores = availableParallelism();
const hash = await argon2.hash(PASSWORD, OPTIONS);
const raw = await rate(cores, SECONDS, async () => String(await argon2.verify(hash, PASSWORD)));
console.log(`raw argon2id verify (${cores} at once): ${raw.perSecond.toFixed(1)}/s`);

const keel = await spawnChild('keel-child.js', [], join(import.meta.dirname, 'http'));
try {
  const base = `http://127.0.0.1:${keel.port}/edge/management/v1`;
  const admin = await post(`${base}/authenticate?method=password`, { username: 'admin', password: 'bench-password' });
  const token = admin.headers.get('zt-session')!;
  const identity = (await (
    await post(`${base}/identities`, { name: USER, type: 'User', isAdmin: false }, token)
  ).json()) as { data: { id: string } };
  await post(
    `${base}/authenticators`,
    { method: 'updb', identityId: identity.data.id, username: USER, password: PASSWORD },
    token,
  );
  const login = (password: string) => async () =>
    String((await post(`${base}/authenticate?method=password`, { username: USER, password })).status);
  const good = await rate(CLIENTS, SECONDS, login(PASSWORD));
  console.log(
    `password logins (${CLIENTS} clients): ${good.perSecond.toFixed(1)}/s = ${(good.perSecond / raw.perSecond).toFixed(2)}× raw; statuses ${JSON.stringify([...good.outcomes])}`,
  );
  const bad = await rate(CLIENTS, SECONDS, login('wrong-password'));
  console.log(
    `bad password logins (${CLIENTS} clients): ${bad.perSecond.toFixed(1)}/s; statuses ${JSON.stringify([...bad.outcomes])}`,
  );
} finally {
  await stopChild(keel);
}
