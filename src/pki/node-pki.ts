/** What a controller process takes from its PKI directory at start (docs/pki.md). */
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { isDnsName } from './ca.js';
import { type ApiTls, caCertificates, ensureApiTls, ensureClusterCa } from './cluster.js';
import { pkcs7CaCerts } from './pkcs7.js';

export interface NodePki {
  dir: string;
  /** The `/.well-known/est/cacerts` body: root and signing CA, PKCS#7, base64 lines. */
  cacertsPkcs7: string;
  /** The API listener's TLS material, when API TLS is on. */
  apiTls: ApiTls | null;
}

/**
 * Opens the PKI directory of a controller: creates the root and signing CAs on first start (unless the directory
 * came from a join bundle), and the API certificate for `apiHosts` when API TLS is wanted (null = plain HTTP).
 */
export async function openNodePki(dir: string, opts: { apiHosts: string[] | null }): Promise<NodePki> {
  await ensureClusterCa(dir);
  const cacertsPkcs7 = pkcs7CaCerts(await caCertificates(dir));
  const apiTls = opts.apiHosts ? await ensureApiTls(dir, { hosts: opts.apiHosts }) : null;
  return { dir, cacertsPkcs7, apiTls };
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
