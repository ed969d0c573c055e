/** Runs the compiled `keel` command as an operator would, for process tests (test/cli). */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { trustCa } from './tls-call.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'keel.js');
const START_TIMEOUT_MS = 20_000;

/** Compiles the project incrementally (a no-op when nothing changed): the CLI runs dist/. */
export function buildKeel(): void {
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { stdio: 'inherit' });
}

export interface KeelProcess {
  child: ChildProcess;
  /** `https://127.0.0.1:<port>` (http with --insecure-http) once it listens. */
  base: string;
  /** The root CA certificate the API certificate chains to (trusted by `call()` from then on); null for HTTP. */
  ca: string | null;
  /** Everything written to stderr so far (the JSON log lines). */
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `keel run` on an ephemeral port and resolves once it prints its Management API address. */
export function runKeel(dataDir: string, args: string[] = [], env: Record<string, string> = {}): Promise<KeelProcess> {
  const child = spawn(process.execPath, [BIN, 'run', '--data-dir', dataDir, '--listen', '127.0.0.1:0', ...args], {
    env: { ...process.env, KEEL_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = { stdout: '', stderr: '' };
  child.stdout!.on('data', (d) => (out.stdout += d));
  child.stderr!.on('data', (d) => (out.stderr += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return new Promise((resolve, reject) => {
    const fail = (why: string) => reject(new Error(`keel ${why}:\n${out.stdout}\n${out.stderr}`));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail('did not start');
    }, START_TIMEOUT_MS);
    const onData = () => {
      const m = /Management API:\s+(https?:\/\/\S+)\/edge\/management\/v1/.exec(out.stdout);
      if (!m) return;
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      const base = m[1]!;
      const ca = base.startsWith('https:') ? readFileSync(join(dataDir, 'pki', 'ca.cert.pem'), 'utf8') : null;
      if (ca !== null) trustCa(ca);
      resolve({ child, base, ca, stderr: () => out.stderr, exited });
    };
    child.stdout!.on('data', onData);
    void exited.then(() => {
      clearTimeout(timer);
      fail('exited before it listened');
    });
  });
}
