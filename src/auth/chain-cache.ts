/**
 * Chain verification for certificate logins, without redoing the same work on every login: the trust anchors are
 * parsed once per PEM text, and a chain that verified is remembered (by the SHA-1 fingerprints of the leaf, the
 * intermediates the client sent and the anchors it was checked against) with the window in which every certificate
 * of it is valid. A later login with the same certificates and anchors inside that window needs no parsing and no
 * signature check; outside it, or with another anchor set (a CA added, removed, no longer auth-enabled), the chain
 * is verified again. Certificates are immutable, so the remembered answer cannot go stale otherwise.
 */

import { assert } from '../../storage/types.js';
import type { x509 } from '../pki/crypto.js';
import { parseCertificate } from '../pki/crypto.js';
import { fingerprintOfDer } from '../pki/fingerprint.js';
import { type ChainResult, verifyChain } from '../pki/index.js';

/** Bounds on what is remembered (oldest first out). */
export const MAX_CACHED_ANCHORS = 1024;
export const MAX_CACHED_CHAINS = 10_000;

interface Anchor {
  cert: x509.X509Certificate;
  fingerprint: string;
}

const anchors = new Map<string, Anchor | null>();
const chains = new Map<string, { notBefore_ms: number; notAfter_ms: number }>();

function remember<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  if (map.size >= max) map.delete(map.keys().next().value as K);
  map.set(key, value);
  assert(map.size <= max, 'cache over its bound');
}

/** A trust anchor parsed once per PEM text (null when it does not parse). */
function anchorOf(pem: string): Anchor | null {
  let a = anchors.get(pem);
  if (a === undefined) {
    const cert = parseCertificate(pem);
    a = cert ? { cert, fingerprint: fingerprintOfDer(Buffer.from(cert.rawData)) } : null;
    remember(anchors, pem, a, MAX_CACHED_ANCHORS);
  }
  return a;
}

/** Forgets every remembered chain and anchor (tests). */
export function clearChainCache(): void {
  anchors.clear();
  chains.clear();
}

/**
 * A TLS client's certificate chain as presented (`leaf` first, then what else the client `sent`), with the
 * fingerprints every certificate login looks it up and remembers it by, computed once per request.
 */
export interface ClientChain {
  leaf: Buffer;
  sent: Buffer[];
  /** The leaf's fingerprint: what cert authenticators and ephemeral session certificates are found by. */
  fingerprint: string;
  /** The leaf's and the sent certificates' fingerprints: what a verified chain is remembered by. */
  chainKey: string;
}

/** The chain of a request's client certificates (`HttpRequest.peerCertificates`); null without any. */
export function clientChainOf(certs: readonly Buffer[] | undefined): ClientChain | null {
  const [leaf, ...sent] = certs ?? [];
  if (!leaf) return null;
  const fingerprint = fingerprintOfDer(leaf);
  return { leaf, sent, fingerprint, chainKey: [fingerprint, ...sent.map(fingerprintOfDer)].join(',') };
}

/**
 * verifyChain for a TLS client's chain against `trusted` PEM anchors at `at`, with the leaf allowed for client
 * use. Failures are never remembered.
 */
export async function verifyClientChain(chain: ClientChain, trusted: string[], at: Date): Promise<ChainResult> {
  const roots = trusted.map(anchorOf).filter((a): a is Anchor => a !== null);
  const key = [chain.chainKey, '|', ...roots.map((r) => r.fingerprint)].join(',');
  const hit = chains.get(key);
  const t = at.getTime();
  if (hit && hit.notBefore_ms <= t && t <= hit.notAfter_ms) return { ok: true, chain: [] };
  const result = await verifyChain(
    chain.leaf,
    chain.sent,
    roots.map((r) => r.cert),
    { at, purpose: 'client' },
  );
  if (result.ok) {
    const notBefore_ms = Math.max(...result.chain.map((c) => c.notBefore.getTime()));
    const notAfter_ms = Math.min(...result.chain.map((c) => c.notAfter.getTime()));
    remember(chains, key, { notBefore_ms, notAfter_ms }, MAX_CACHED_CHAINS);
  }
  return result;
}
