/** Test helpers of the PKI suites: openssl in a scratch directory, typed refusals, HTTPS GET. */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PkiError, type PkiErrorCode } from '../../src/pki/index.js';

export const OPENSSL = '/usr/bin/openssl';

export class Scratch {
  readonly dir = mkdtempSync(join(tmpdir(), 'keel-pki-'));
  path(name: string): string {
    return join(this.dir, name);
  }
  write(name: string, content: string | Buffer): string {
    const p = this.path(name);
    writeFileSync(p, content);
    return p;
  }
  read(name: string): string {
    return readFileSync(this.path(name), 'utf8');
  }
  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Runs openssl; returns its exit status and output (never throws on a non-zero exit). */
export function openssl(args: string[], input?: string | Buffer): { status: number; stdout: string; stderr: string } {
  const r = spawnSync(OPENSSL, args, { input, encoding: 'utf8', timeout: 20_000 });
  return { status: r.status ?? -1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

/** openssl extensions of a CA certificate. */
export const CA_EXTENSIONS = [
  '-addext',
  'basicConstraints=critical,CA:TRUE',
  '-addext',
  'keyUsage=critical,keyCertSign,cRLSign',
];

/**
 * A self-signed certificate made by openssl with a new EC key (30 days): writes `<keyOut>` and `<certOut>` and
 * returns their PEM texts. `extra` adds e.g. CA_EXTENSIONS.
 */
export function opensslSelfSigned(
  keyOut: string,
  certOut: string,
  subj: string,
  extra: string[] = [],
  curve = 'P-256',
): { cert: string; key: string } {
  const r = openssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    `ec_paramgen_curve:${curve}`,
    '-nodes',
    '-keyout',
    keyOut,
    '-subj',
    subj,
    '-days',
    '30',
    ...extra,
    '-out',
    certOut,
  ]);
  if (r.status !== 0) throw new Error(`openssl req -x509 failed: ${r.stderr}`);
  return { cert: readFileSync(certOut, 'utf8'), key: readFileSync(keyOut, 'utf8') };
}

/** A CSR made by openssl with a new key: `key` is an openssl -newkey spec (ec, rsa:2048, ed25519 …). */
export function opensslCsr(s: Scratch, name: string, key: string, subj: string, extra: string[] = []): string {
  const keyArgs =
    key === 'ec'
      ? ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256']
      : key === 'ed25519'
        ? ['-newkey', 'ed25519']
        : ['-newkey', key];
  execFileSync(
    OPENSSL,
    [
      'req',
      '-new',
      ...keyArgs,
      '-nodes',
      '-keyout',
      s.path(`${name}.key`),
      '-subj',
      subj,
      '-out',
      s.path(`${name}.csr`),
      ...extra,
    ],
    { stdio: 'pipe', timeout: 60_000 },
  );
  return s.read(`${name}.csr`);
}

/** The code of the PkiError a promise rejects with (fails the test when it resolves or throws something else). */
export async function refusal(p: Promise<unknown>): Promise<PkiErrorCode> {
  try {
    await p;
  } catch (err) {
    if (err instanceof PkiError) return err.code;
    throw err;
  }
  throw new Error('expected a PkiError');
}

/** One HTTPS GET trusting `ca`: status, content type and body. */
export function httpsGet(url: string, ca: string): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { ca, agent: false, timeout: 10_000 }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

const P256 = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

/** Runs openssl and throws with its stderr when it fails. */
function mustOpenssl(args: string[], input?: string): string {
  const r = openssl(args, input);
  if (r.status !== 0) throw new Error(`openssl ${args[0]} failed: ${r.stderr}`);
  return r.stdout;
}

/** A self-signed CA made by openssl in `s`: `<name>.key`, `<name>.pem`; returns the certificate PEM. */
export function opensslCa(s: Scratch, name: string, key: string[] = P256): string {
  const out = ['-keyout', s.path(`${name}.key`), '-out', s.path(`${name}.pem`)];
  const ext = ['-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'];
  mustOpenssl(['req', '-x509', ...key, '-days', '30', '-subj', `/CN=${name}`, ...out, ...ext]);
  return s.read(`${name}.pem`);
}

/** A clientAuth leaf for `cn` signed by the CA `ca` (from opensslCa), with a new key `<name>.key`; returns its PEM. */
export function opensslIssue(s: Scratch, ca: string, name: string, cn: string): string {
  const csr = mustOpenssl(['req', '-new', ...P256, '-keyout', s.path(`${name}.key`), '-subj', `/CN=${cn}`]);
  s.write(`${name}.ext`, 'extendedKeyUsage=clientAuth\n');
  const signer = ['-CA', s.path(`${ca}.pem`), '-CAkey', s.path(`${ca}.key`), '-CAcreateserial'];
  return mustOpenssl(['x509', '-req', '-days', '1', ...signer, '-extfile', s.path(`${name}.ext`)], csr);
}

/** openssl's SHA-1 fingerprint of a PEM certificate, as OpenZiti writes it (lower-case hex, no colons). */
export function opensslFingerprint(s: Scratch, pem: string): string {
  s.write('fingerprint.pem', pem);
  const out = mustOpenssl(['x509', '-noout', '-fingerprint', '-sha1', '-in', s.path('fingerprint.pem')]);
  return out
    .slice(out.indexOf('=') + 1)
    .trim()
    .replaceAll(':', '')
    .toLowerCase();
}
