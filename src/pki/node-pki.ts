/** What a controller process takes from its PKI directory at start (docs/pki.md). */
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { type CaMaterial, isDnsName, issueServerCert } from './ca.js';
import { MAX_HOSTS } from './cluster.js';
import { PkiError } from './errors.js';
import { exists, writeFiles } from './files.js';
import { pkcs7CaCerts } from './pkcs7.js';
import { caCertificates, ensureClusterCa, leafFiles, loadLeaf, loadSigningCa, PKI_FILES } from './pki-dir.js';

/** What node:https needs for the API listener. */
export interface ApiTls {
  key: string;
  /** The API certificate followed by the signing intermediate. */
  cert: string;
  /** The root CA certificate. */
  ca: string;
}

/**
 * The API listener's TLS material in `dir`: loaded if present, otherwise issued by the signing CA (created first
 * when `dir` has no PKI yet) with serverAuth and SANs for `hosts`. A node whose PKI came from a join bundle has no
 * signing CA: it gets MISSING_FILE unless api.key.pem/api.cert.pem were put there.
 */
export async function ensureApiTls(dir: string, opts: { hosts: string[]; validity_days?: number }): Promise<ApiTls> {
  if (!(await exists(join(dir, PKI_FILES.apiCert)))) {
    if (opts.hosts.length === 0 || opts.hosts.length > MAX_HOSTS) {
      throw new PkiError('INVALID_ARGUMENT', `the API certificate needs 1..${MAX_HOSTS} hosts`);
    }
    const signing = await ensureClusterCa(dir);
    if (!signing)
      throw new PkiError('MISSING_FILE', `${join(dir, PKI_FILES.signingKey)} is missing: no CA to sign with`);
    const api = await issueServerCert(signing, {
      commonName: opts.hosts[0]!.slice(0, 64),
      dnsNames: opts.hosts.filter((h) => isIP(h) === 0),
      ipAddresses: opts.hosts.filter((h) => isIP(h) !== 0),
      usage: 'server',
      validity_days: opts.validity_days,
    });
    await writeFiles(dir, leafFiles(PKI_FILES.apiKey, PKI_FILES.apiCert, api), { exclusive: false });
  }
  const { key, cert, ca } = await loadLeaf(dir, PKI_FILES.apiKey, PKI_FILES.apiCert);
  return { key, cert, ca };
}

export interface NodePki {
  dir: string;
  /** The `/.well-known/est/cacerts` body: root and signing CA, PKCS#7, base64 lines. */
  cacertsPkcs7: string;
  /** The API listener's TLS material, when API TLS is on. */
  apiTls: ApiTls | null;
  /** The CA certificates (PEM), root first then the intermediates: enrolled clients trust these. */
  caPems: string[];
  /**
   * The CA that signs identity certificates (enrollment), or null on a node set up from a join bundle, which
   * holds no CA key.
   */
  signing: CaMaterial | null;
}

/**
 * Opens the PKI directory of a controller: creates the root and signing CAs on first start (unless the directory
 * came from a join bundle), and the API certificate for `apiHosts` when API TLS is wanted (null = plain HTTP).
 */
export async function openNodePki(dir: string, opts: { apiHosts: string[] | null }): Promise<NodePki> {
  await ensureClusterCa(dir);
  const caPems = await caCertificates(dir);
  const cacertsPkcs7 = pkcs7CaCerts(caPems);
  const apiTls = opts.apiHosts ? await ensureApiTls(dir, { hosts: opts.apiHosts }) : null;
  const signing = (await exists(join(dir, PKI_FILES.signingKey))) ? await loadSigningCa(dir) : null;
  return { dir, cacertsPkcs7, apiTls, caPems, signing };
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);
const WILDCARD = new Set(['0.0.0.0', '::', '']);

/**
 * The names an API certificate should carry: the advertised URLs' hosts, the listen address (this host's name for
 * a wildcard), and localhost/127.0.0.1/::1 when the listener is reachable on loopback.
 */
export function apiCertHosts(listenHost: string, apiBaseUrls: string[]): string[] {
  const hosts: string[] = [];
  for (const u of apiBaseUrls) {
    if (URL.canParse(u)) hosts.push(new URL(u).hostname.replace(/^\[(.*)\]$/, '$1'));
  }
  if (WILDCARD.has(listenHost)) hosts.push(hostname());
  else hosts.push(listenHost);
  if (WILDCARD.has(listenHost) || LOOPBACK.has(listenHost)) hosts.push('localhost', '127.0.0.1', '::1');
  return [...new Set(hosts)].filter((h) => isIP(h) !== 0 || isDnsName(h));
}
