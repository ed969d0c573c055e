/** The operator's view: `keel pki` and `keel run --tls` as processes (the compiled CLI). */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildKeel, runKeel } from '../support/keel-process.js';
import { tempDirs } from '../support/temp-dir.js';
import { CA_EXTENSIONS, httpsGet, openssl, opensslSelfSigned } from './helpers.js';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'keel.js');

function keel(args: string[]): { status: number; stdout: string; stderr: string } {
  try {
    const stdout = execFileSync(process.execPath, [BIN, ...args], { encoding: 'utf8', stdio: 'pipe', timeout: 30_000 });
    return { status: 0, stdout, stderr: '' };
  } catch (err) {
    const e = err as { status: number; stdout: string; stderr: string };
    return { status: e.status, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('keel pki and keel run --tls (processes)', () => {
  const tmp = tempDirs('keel-pki-proc-');
  beforeAll(() => buildKeel(), 120_000);

  it('pki init, then run --tls on the same data directory: one CA, HTTPS trusted through it', async () => {
    const data = tmp();
    const pki = join(data, 'pki');
    const init = keel(['pki', 'init', '--dir', pki, '--node-id', 'ctrl1', '--host', '127.0.0.1']);
    expect(init.status).toBe(0);
    expect(init.stdout).toContain('node id:      ctrl1');
    const root = readFileSync(join(pki, 'ca.cert.pem'), 'utf8');
    const bundle = join(tmp(), 'b');
    const issued = keel([
      'pki',
      'issue-node',
      '--ca-dir',
      pki,
      '--node-id',
      'ctrl2',
      '--host',
      '10.0.0.2',
      '--out',
      bundle,
    ]);
    expect(issued.status).toBe(0);
    expect(
      openssl([
        'verify',
        '-CAfile',
        join(bundle, 'ca.cert.pem'),
        '-untrusted',
        join(bundle, 'node.cert.pem'),
        join(bundle, 'node.cert.pem'),
      ]).stdout,
    ).toContain(': OK');
    expect(keel(['pki', 'issue-node', '--ca-dir', pki, '--node-id', 'ctrl2', '--out', bundle])).toMatchObject({
      status: 1,
    });

    const proc = await runKeel(data, ['--tls', '--admin-password', 'tls-admin-pass']);
    try {
      expect(proc.base.startsWith('https://127.0.0.1:')).toBe(true);
      expect((await httpsGet(`${proc.base}/version`, root)).status).toBe(200);
      const cacerts = await httpsGet(`${proc.base}/.well-known/est/cacerts`, root);
      expect(cacerts.status).toBe(200);
      const printed = openssl(
        ['pkcs7', '-inform', 'DER', '-print_certs', '-noout'],
        Buffer.from(cacerts.body, 'base64'),
      );
      expect(printed.stdout).toContain('subject=CN = Keel Root CA');
      // The controller kept the CA `keel pki init` made: its root is the one the bundle trusts.
      expect(readFileSync(join(pki, 'ca.cert.pem'), 'utf8')).toBe(root);
    } finally {
      proc.child.kill('SIGTERM');
      expect((await proc.exited).code).toBe(0);
    }
  });

  it('keel run --root-ca-cert/--root-ca-key: HTTPS under the operator root; a mismatched pair is refused', async () => {
    const dir = tmp();
    opensslSelfSigned(join(dir, 'root.key'), join(dir, 'root.pem'), '/CN=Operator Root', CA_EXTENSIONS);
    const data = join(dir, 'data');
    const args = ['--root-ca-cert', join(dir, 'root.pem'), '--root-ca-key', join(dir, 'root.key')];
    const proc = await runKeel(data, args);
    try {
      const root = readFileSync(join(dir, 'root.pem'), 'utf8');
      expect((await httpsGet(`${proc.base}/version`, root)).status).toBe(200);
    } finally {
      proc.child.kill('SIGTERM');
      expect((await proc.exited).code).toBe(0);
    }
    const wrongKey = keel([
      'run',
      '--data-dir',
      join(dir, 'd2'),
      '--listen',
      '127.0.0.1:0',
      '--root-ca-cert',
      join(dir, 'root.pem'),
      '--root-ca-key',
      join(data, 'pki', 'api.key.pem'),
    ]);
    expect(wrongKey.status).toBe(1);
    expect(wrongKey.stderr).toContain('KEY_MISMATCH');
    expect(keel(['run', '--data-dir', join(dir, 'd3'), '--root-ca-cert', join(dir, 'root.pem')]).stderr).toContain(
      '--root-ca-cert and --root-ca-key go together',
    );
  });
});
