/** What a controller process takes from its PKI directory at start (docs/pki.md). */
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { type CaMaterial, isDnsName, issueHostCert } from './ca.js';
import { MAX_HOSTS } from './cluster.js';
import { parseCertificates, x509 } from './crypto.js';
import { PkiError } from './errors.js';
import { exists, readPki, writeFiles } from './files.js';
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

/** An API certificate is issued anew at start when it expires within this time (and the signing CA is here). */
export const API_CERT_RENEW_BEFORE_MS = 30 * 24 * 60 * 60 * 1000;

/**
 * The API listener's TLS material in `dir`: loaded if present and still fit, otherwise issued by the signing CA
 * (created first when `dir` has no PKI yet) with serverAuth and SANs for `hosts`. A certificate on disk is issued
 * anew when it lacks a SAN for one of `hosts` (the listen or advertised address changed) or expires within
 * API_CERT_RENEW_BEFORE_MS, provided this directory holds the signing CA; without it (a join bundle issued without
 * the signing CA) the certificate put there is used as it is, and its absence is MISSING_FILE.
 */
export async function ensureApiTls(
  dir: string,
  opts: { hosts: string[]; validity_days?: number; now_ms?: number },
): Promise<ApiTls> {
  const present = await exists(join(dir, PKI_FILES.apiCert));
  if (!present || ((await apiCertStale(dir, opts.hosts, opts.now_ms ?? Date.now())) && (await hasSigningCa(dir)))) {
    if (opts.hosts.length === 0 || opts.hosts.length > MAX_HOSTS) {
      throw new PkiError('INVALID_ARGUMENT', `the API certificate needs 1..${MAX_HOSTS} hosts`);
    }
    const signing = await ensureClusterCa(dir);
    if (!signing) {
      throw new PkiError(
        'MISSING_FILE',
        `${join(dir, PKI_FILES.signingKey)} is missing: no CA to sign this node's API certificate with (a join ` +
          `bundle without the signing CA): put api.key.pem/api.cert.pem issued for it there, or give it the ` +
          `cluster's signing CA (docs/pki.md)`,
      );
    }
    const api = await issueHostCert(signing, opts.hosts, opts.validity_days);
    await writeFiles(dir, leafFiles(PKI_FILES.apiKey, PKI_FILES.apiCert, api), { exclusive: false });
  }
  const { key, cert, ca } = await loadLeaf(dir, PKI_FILES.apiKey, PKI_FILES.apiCert);
  return { key, cert, ca };
}

async function hasSigningCa(dir: string): Promise<boolean> {
  return (await exists(join(dir, PKI_FILES.signingKey))) && (await exists(join(dir, PKI_FILES.signingCert)));
}

/** Whether the API certificate on disk misses a SAN for one of `hosts`, expires soon, or does not parse. */
async function apiCertStale(dir: string, hosts: string[], now_ms: number): Promise<boolean> {
  const leaf = parseCertificates(await readPki(dir, PKI_FILES.apiCert))[0];
  if (!leaf) return true;
  if (leaf.notAfter.getTime() - now_ms < API_CERT_RENEW_BEFORE_MS) return true;
  const names = certHostNames(leaf);
  return hosts.some((h) => !coversHost(names, normalHost(h)));
}

/** Whether SAN names cover a host: the name itself, or a wildcard for its first label (DNS names only). */
function coversHost(names: Set<string>, host: string): boolean {
  if (names.has(host)) return true;
  const dot = host.indexOf('.');
  return isIP(host) === 0 && dot > 0 && names.has(`*${host.slice(dot)}`);
}

/** The DNS names (lower case) and IP addresses (canonical text) of a certificate's SANs. */
export function certHostNames(cert: x509.X509Certificate): Set<string> {
  const out = new Set<string>();
  const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
  for (const n of san?.names.items ?? []) {
    if (n.type === 'dns' || n.type === 'ip') out.add(normalHost(n.value));
  }
  return out;
}

function normalHost(h: string): string {
  if (isIP(h) === 6) return new URL(`http://[${h}]/`).hostname.slice(1, -1);
  return h.toLowerCase();
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

/**
 * Whether a listen host accepts loopback connections only: `localhost`, 127.0.0.0/8, `::1` (or an IPv4-mapped
 * 127.x). Plain HTTP (`keel run --insecure-http`) is allowed on such a listener only.
 */
export function isLoopbackHost(host: string): boolean {
  if (host.toLowerCase() === 'localhost') return true;
  const kind = isIP(host);
  if (kind === 4) return host.startsWith('127.');
  if (kind !== 6) return false;
  const h = normalHost(host);
  return h === '::1' || /^::ffff:127\./.test(h) || /^::ffff:7f[0-9a-f]{2}:/.test(h);
}
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
