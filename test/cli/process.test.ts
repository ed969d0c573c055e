/**
 * The `keel` command as an operator runs it: first start initialises and prints the login, a second start reuses
 * the data, SIGTERM stops cleanly, and `kill -9` loses no acknowledged write.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../support/server.js';
import { trustCa } from '../support/tls-call.js';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'keel.js');

/** A TLS handshake with the listener of `base`: whether its certificate verified against `ca`, and its issuer CN. */
function tlsHandshake(base: string, ca: string | undefined): Promise<{ authorized: boolean; issuer: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: hostname, port: Number(port), ca, rejectUnauthorized: false }, () => {
      const issuer = String(socket.getPeerCertificate().issuer?.CN ?? '');
      resolve({ authorized: socket.authorized, issuer });
      socket.end();
    });
    socket.on('error', reject);
  });
}

interface Running {
  child: ChildProcess;
  base: string;
  stdout: string;
  exited: Promise<{ code: number | null; signal: string | null }>;
}

/** Controllers started and not yet seen to exit: a failing test leaves none running (see afterEach). */
const live = new Set<Running>();

async function startKeel(
  dataDir: string,
  extraArgs: string[] = [],
  env: Record<string, string> = {},
): Promise<Running> {
  const child = spawn(process.execPath, [BIN, 'run', '--data-dir', dataDir, '--listen', '127.0.0.1:0', ...extraArgs], {
    env: { ...process.env, KEEL_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const running: Running = { child, base: '', stdout: '', exited };
  live.add(running);
  void exited.then(() => live.delete(running));
  const base = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`keel did not start: ${stdout}\n${stderr}`)), 20_000);
    child.stdout!.on('data', (d) => {
      stdout += d;
      const m = /Management API:\s+(https?:\/\/[^\s]+)\/edge\/management\/v1/.exec(stdout);
      if (m) {
        clearTimeout(timer);
        // HTTPS by default: call() trusts the root the API certificate chains to from now on
        if (m[1]!.startsWith('https:')) trustCa(readFileSync(join(dataDir, 'pki', 'ca.cert.pem'), 'utf8'));
        resolve(m[1]!);
      }
    });
    void exited.then(() => reject(new Error(`keel exited early: ${stdout}\n${stderr}`)));
  });
  running.base = base;
  running.stdout = stdout;
  return running;
}

async function loginAs(base: string, password: string): Promise<string> {
  const r = await call('POST', `${base}/edge/management/v1/authenticate?method=password`, {
    body: { username: 'admin', password },
  });
  expect(r.status).toBe(200);
  return r.headers.get('zt-session')!;
}

describe('keel run', () => {
  let dir: string;
  beforeAll(() => {
    // the CLI runs the compiled code: make sure it is current (incremental, a no-op when nothing changed)
    execFileSync(process.execPath, [join(import.meta.dirname, '..', '..', 'scripts', 'build.mjs')], {
      stdio: 'inherit',
    });
    expect(existsSync(join(import.meta.dirname, '..', '..', 'dist', 'src', 'cli', 'main.js'))).toBe(true);
    dir = mkdtempSync(join(tmpdir(), 'keel-cli-'));
  }, 120_000);
  // the `finally` of every test: whatever it started and did not stop (it failed half-way) is stopped here
  afterEach(async () => {
    const left = [...live];
    for (const r of left) r.child.kill('SIGKILL');
    await Promise.all(left.map((r) => r.exited));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('first start generates and prints the admin password; a second start reuses the data; SIGTERM exits 0', async () => {
    const data = join(dir, 'a');
    const first = await startKeel(data);
    const m = /Admin password:\s+(\S+)\s+\(generated/.exec(first.stdout);
    expect(m).not.toBeNull();
    const password = m![1]!;
    expect(password.length).toBeGreaterThanOrEqual(20);
    expect(first.stdout).toContain('Admin username:  admin');
    // HTTPS by default, with a certificate chaining to the root whose path it printed
    expect(first.base.startsWith('https://127.0.0.1:')).toBe(true);
    const caFile = /CA certificate:\s+(\S+)/.exec(first.stdout)![1]!;
    expect(caFile).toBe(join(data, 'pki', 'ca.cert.pem'));
    expect(first.stdout).toContain(`${first.base}/.well-known/est/cacerts`);
    const handshake = await tlsHandshake(first.base, readFileSync(caFile, 'utf8'));
    expect(handshake.authorized).toBe(true);
    expect(handshake.issuer).toBe('Keel Signing CA');
    // a client that does not trust the root refuses the certificate
    expect((await tlsHandshake(first.base, undefined)).authorized).toBe(false);
    const token = await loginAs(first.base, password);
    const created = await call('POST', `${first.base}/edge/management/v1/identities`, {
      token,
      body: { name: 'survivor', type: 'User', isAdmin: false },
    });
    expect(created.status).toBe(201);
    first.child.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: 0, signal: null });

    const second = await startKeel(data, ['--admin-password', 'ignored-on-restart']);
    expect(second.stdout).not.toContain('generated');
    const token2 = await loginAs(second.base, password);
    const again = await call('GET', `${second.base}/edge/management/v1/identities/${created.body.data.id}`, {
      token: token2,
    });
    expect(again.body.data.name).toBe('survivor');
    second.child.kill('SIGTERM');
    expect((await second.exited).code).toBe(0);
  });

  it('persists session activity on SIGTERM', async () => {
    const data = join(dir, 'd');
    const first = await startKeel(data, ['--admin-password', 'activity-pass']);
    const token = await loginAs(first.base, 'activity-pass');
    const me = await call('GET', `${first.base}/edge/client/v1/current-api-session`, { token });
    await new Promise((r) => setTimeout(r, 1200));
    await call('GET', `${first.base}/edge/client/v1/current-identity`, { token });
    const lastRequest = Date.now();
    first.child.kill('SIGTERM');
    await first.exited;
    const second = await startKeel(data);
    const t2 = await loginAs(second.base, 'activity-pass');
    const row = await call('GET', `${second.base}/edge/management/v1/api-sessions/${me.body.data.id}`, { token: t2 });
    const last = Date.parse(row.body.data.lastActivityAt);
    expect(last).toBeGreaterThan(Date.parse(me.body.data.createdAt) + 1000);
    expect(last).toBeLessThanOrEqual(lastRequest);
    second.child.kill('SIGTERM');
    await second.exited;
  });

  it('rejects bad operator input with a clear message', async () => {
    for (const [args, message] of [
      [['--advertise', 'ctrl.example.com:1280'], 'invalid --advertise'],
      [['--session-timeout', '0s'], '--session-timeout must be at least 10s'],
      [['--listen', 'nowhere'], 'invalid --listen'],
      [['--engine', 'apache'], 'invalid --engine'],
      [['--insecure-http', '--listen', '0.0.0.0:0'], '--insecure-http is refused'],
      [['--insecure-http', '--listen', '10.1.2.3:0'], '--insecure-http is refused'],
      [['--engine', 'uws'], '--engine uws serves plain HTTP only'],
      [['--tls', '--insecure-http'], '--tls and --insecure-http exclude each other'],
    ] as const) {
      const child = spawn(process.execPath, [BIN, 'run', '--data-dir', join(dir, 'bad'), ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr!.on('data', (d) => (stderr += d));
      const code = await new Promise((r) => child.on('exit', r));
      expect(code).toBe(1);
      expect(stderr).toContain(message);
    }
  });

  it('--insecure-http serves plain HTTP on loopback, on either engine', async () => {
    for (const engine of ['uws', 'node']) {
      const r = await startKeel(join(dir, `plain-${engine}`), ['--insecure-http', '--engine', engine]);
      expect(r.base.startsWith('http://127.0.0.1:')).toBe(true);
      expect(r.stdout).toContain('Plain HTTP (--insecure-http)');
      expect(r.stdout).not.toContain('CA certificate:');
      expect((await call('GET', `${r.base}/version`)).status).toBe(200);
      r.child.kill('SIGTERM');
      expect((await r.exited).code).toBe(0);
    }
  });

  it('takes the admin password from KEEL_ADMIN_PASSWORD', async () => {
    const r = await startKeel(join(dir, 'b'), [], { KEEL_ADMIN_PASSWORD: 'from-the-env' });
    await loginAs(r.base, 'from-the-env');
    r.child.kill('SIGTERM');
    await r.exited;
  });

  it('kill -9 in the middle of a write storm loses no acknowledged write', async () => {
    const data = join(dir, 'c');
    const first = await startKeel(data, ['--admin-password', 'durable-pass']);
    const token = await loginAs(first.base, 'durable-pass');
    const acked: string[] = [];
    let stop = false;
    const writer = async (w: number) => {
      for (let i = 0; !stop; i++) {
        try {
          const r = await call('POST', `${first.base}/edge/management/v1/identities`, {
            token,
            body: { name: `w${w}-${i}`, type: 'User', isAdmin: false },
          });
          if (r.status === 201) acked.push(r.body.data.id);
        } catch {
          return; // the connection died with the process
        }
      }
    };
    const writers = Array.from({ length: 8 }, (_, w) => writer(w));
    await new Promise((r) => setTimeout(r, 700));
    first.child.kill('SIGKILL');
    stop = true;
    await Promise.all(writers);
    await first.exited;
    expect(acked.length).toBeGreaterThan(20);

    const second = await startKeel(data);
    const t2 = await loginAs(second.base, 'durable-pass');
    const listed = await call(
      'GET',
      `${second.base}/edge/management/v1/identities?limit=-1&filter=${encodeURIComponent('name contains "w"')}`,
      { token: t2 },
    );
    const present = new Set(listed.body.data.map((x: any) => x.id));
    const lost = acked.filter((id) => !present.has(id));
    expect(lost).toEqual([]);
    second.child.kill('SIGTERM');
    await second.exited;
  });
});
