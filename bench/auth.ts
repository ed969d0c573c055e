/**
 * `npm run bench -- auth [--quick]`: password logins per second through Keel (HTTP, argon2id behind the auth rate
 * limiter, a synced session write per success) beside the raw argon2id verify rate on the same machine in the same
 * run (as many verifies at once as there are cores, in this process, nothing else running); then certificate
 * logins per second (`POST /authenticate?method=cert`, each on a new mutual-TLS connection: handshake, chain check,
 * a synced session write) beside the raw mutual-TLS handshake rate of a bare node:tls server asking for a client
 * certificate (bench/http/tls-child.ts), in the same run.
 *
 * Keel runs in a child process (bench/http/keel-child.ts, synced writes; `--tls` for the cert logins); the logins
 * are sent from here by `CLIENTS` concurrent clients, as a non-admin user (the admin lane admits one check at a
 * time by design).
 */
import { request as httpsRequest } from 'node:https';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import argon2 from 'argon2';
import { exportKeyPem, generateKeyPair, x509 } from '../src/pki/crypto.js';
import { type Child, spawnChild, stopChild } from './child.js';

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

const HTTP_DIR = join(import.meta.dirname, 'http');
const keel = await spawnChild('keel-child.js', [], HTTP_DIR);
let passwordRatio = 0;
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
  passwordRatio = good.perSecond / raw.perSecond;
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

/** One HTTPS request with a client key and certificate on a new connection (no keep-alive): status and headers. */
function httpsCall(
  url: string,
  o: { key?: string; cert?: string; body: unknown; token?: string },
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (o.token) headers['zt-session'] = o.token;
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      { method: 'POST', headers, key: o.key, cert: o.cert, rejectUnauthorized: false, agent: false },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(o.body));
  });
}

/** A new P-256 key (PEM) and a CSR for it. */
async function keyAndCsr(): Promise<{ keyPem: string; csrPem: string }> {
  const keys = await generateKeyPair();
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: 'CN=bench-cert-user',
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
  });
  return { keyPem: await exportKeyPem(keys.privateKey), csrPem: csr.toString('pem') };
}

/** An identity enrolled by OTT on the Keel child: its key and certificate chain. */
async function enrolledIdentity(child: Child): Promise<{ key: string; cert: string }> {
  const base = `https://127.0.0.1:${child.port}/edge`;
  const adminLogin = await httpsCall(`${base}/management/v1/authenticate?method=password`, {
    body: { username: 'admin', password: 'bench-password' },
  });
  const token = adminLogin.headers['zt-session'] as string;
  const body = { name: 'bench-cert-user', type: 'User', isAdmin: false, enrollment: { ott: true } };
  const created = JSON.parse((await httpsCall(`${base}/management/v1/identities`, { body, token })).text);
  const detail = await fetchJson(`${base}/management/v1/identities/${created.data.id}`, token);
  const { keyPem, csrPem } = await keyAndCsr();
  const enrolled = await httpsCall(`${base}/client/v1/enroll/ott`, {
    body: { token: detail.data.enrollment.ott.token, clientCsr: csrPem },
  });
  return { key: keyPem, cert: JSON.parse(enrolled.text).data.cert };
}

function fetchJson(url: string, token: string): Promise<any> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      { headers: { 'zt-session': token }, rejectUnauthorized: false, agent: false },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve(JSON.parse(text)));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** One mutual-TLS handshake to `port` with a client certificate; the connection is closed once it is up. */
function handshake(port: number, key: string, cert: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, key, cert, rejectUnauthorized: false }, () => {
      socket.destroy();
      resolve('ok');
    });
    socket.on('error', (err) => resolve(err.name));
  });
}

const keelTls = await spawnChild('keel-child.js', ['--tls'], HTTP_DIR);
try {
  const me = await enrolledIdentity(keelTls);
  const bare = await spawnChild('tls-child.js', [], HTTP_DIR);
  let handshakes: Awaited<ReturnType<typeof rate>>;
  try {
    handshakes = await rate(CLIENTS, SECONDS, () => handshake(bare.port, me.key, me.cert));
  } finally {
    await stopChild(bare);
  }
  console.log(
    `raw mutual-TLS handshakes (${CLIENTS} clients): ${handshakes.perSecond.toFixed(1)}/s; outcomes ${JSON.stringify([...handshakes.outcomes])}`,
  );
  const url = `https://127.0.0.1:${keelTls.port}/edge/client/v1/authenticate?method=cert`;
  const certLogins = await rate(CLIENTS, SECONDS, async () =>
    String((await httpsCall(url, { key: me.key, cert: me.cert, body: {} })).status),
  );
  console.log(
    `cert logins (${CLIENTS} clients, a new TLS connection each): ${certLogins.perSecond.toFixed(1)}/s = ${(certLogins.perSecond / handshakes.perSecond).toFixed(2)}× raw handshakes; statuses ${JSON.stringify([...certLogins.outcomes])}`,
  );
  console.log(
    `summary: password logins ${passwordRatio.toFixed(2)}× raw argon2id; cert logins ${(certLogins.perSecond / handshakes.perSecond).toFixed(2)}× raw TLS handshakes`,
  );
} finally {
  await stopChild(keelTls);
}
