/** Chain verification: a leaf up through given intermediates to one of the given roots, at a given time. */
import { parseCertificate, parseCertificates, x509 } from './crypto.js';
import type { ChainErrorCode } from './errors.js';

/** Bound on the certificates of one chain (leaf included). */
export const MAX_CHAIN_DEPTH = 8;
/** Bound on the candidate certificates (intermediates + roots) one verification considers. */
export const MAX_CHAIN_CANDIDATES = 1000;

export type ChainResult =
  | { ok: true /** leaf first, the matched root last */; chain: x509.X509Certificate[] }
  | { ok: false; code: ChainErrorCode; message: string };

export interface VerifyOptions {
  /** The time the chain must be valid at (default now). */
  at?: Date;
  /** Require the leaf's extended key usage (if it has one) to allow this TLS role. */
  purpose?: 'client' | 'server';
}

type CertInput = string | Uint8Array | x509.X509Certificate;

function fail(code: ChainErrorCode, message: string): ChainResult {
  return { ok: false, code, message };
}

function toCerts(inputs: CertInput[]): x509.X509Certificate[] | null {
  const out: x509.X509Certificate[] = [];
  for (const i of inputs) {
    if (i instanceof x509.X509Certificate) out.push(i);
    else if (typeof i === 'string') {
      const certs = parseCertificates(i);
      if (certs.length === 0) return null;
      out.push(...certs);
    } else {
      const c = parseCertificate(i);
      if (!c) return null;
      out.push(c);
    }
  }
  return out;
}

function same(a: x509.X509Certificate, b: x509.X509Certificate): boolean {
  return Buffer.from(a.rawData).equals(Buffer.from(b.rawData));
}

function isCa(cert: x509.X509Certificate): boolean {
  const bc = cert.getExtension(x509.BasicConstraintsExtension);
  if (!bc?.ca) return false;
  const ku = cert.getExtension(x509.KeyUsagesExtension);
  return !ku || (ku.usages & x509.KeyUsageFlags.keyCertSign) !== 0;
}

function allowsPurpose(cert: x509.X509Certificate, purpose: 'client' | 'server'): boolean {
  const eku = cert.getExtension(x509.ExtendedKeyUsageExtension);
  if (!eku) return true;
  const want = purpose === 'client' ? x509.ExtendedKeyUsage.clientAuth : x509.ExtendedKeyUsage.serverAuth;
  return eku.usages.includes(want) || eku.usages.includes('2.5.29.37.0'); // anyExtendedKeyUsage
}

function validAt(cert: x509.X509Certificate, at: Date): boolean {
  return cert.notBefore <= at && at <= cert.notAfter;
}

async function signedBy(cert: x509.X509Certificate, issuer: x509.X509Certificate): Promise<boolean> {
  try {
    return await cert.verify({ publicKey: issuer, signatureOnly: true });
  } catch {
    return false;
  }
}

/**
 * Verifies that `leaf` chains to one of `roots` through `intermediates` (PEM texts may hold several certificates),
 * every certificate valid at `at`, every issuer a CA (keyCertSign) within its path length. Never throws on bad input.
 * EXPIRED / NOT_YET_VALID are answered only when the path is otherwise sound (names, signatures, CA flags, path
 * lengths, usage): any other failure wins over them.
 */
export async function verifyChain(
  leaf: CertInput,
  intermediates: CertInput[],
  roots: CertInput[],
  opts: VerifyOptions = {},
): Promise<ChainResult> {
  let leafCert: x509.X509Certificate | null;
  let pool: x509.X509Certificate[] | null;
  let anchors: x509.X509Certificate[] | null;
  try {
    leafCert = leaf instanceof x509.X509Certificate ? leaf : parseCertificate(leaf);
    pool = toCerts(intermediates);
    anchors = toCerts(roots);
  } catch {
    return fail('MALFORMED', 'a certificate does not parse');
  }
  if (!leafCert || !pool || !anchors) return fail('MALFORMED', 'a certificate does not parse');
  if (pool.length + anchors.length > MAX_CHAIN_CANDIDATES) {
    return fail('CHAIN_TOO_LONG', `more than ${MAX_CHAIN_CANDIDATES} candidate certificates`);
  }
  const at = opts.at ?? new Date();
  if (opts.purpose && !allowsPurpose(leafCert, opts.purpose)) {
    return fail('WRONG_USAGE', `the certificate is not for TLS ${opts.purpose} use`);
  }
  const chain = [leafCert];
  let cur = leafCert;
  // A validity failure is answered only for a chain that otherwise verifies: callers that accept an expired
  // certificate (an auth policy's allowExpiredCerts) rely on EXPIRED meaning "the leaf is old, but signed by a
  // trusted CA that is itself valid". A CA of the path out of its validity (an intermediate or the anchor) is
  // ISSUER_NOT_VALID, which nothing waives: Go's x509.Verify (OpenZiti) checks every certificate of the chain.
  let leafOutOfTime: ChainResult | null = null;
  let issuerOutOfTime: ChainResult | null = null;
  for (let depth = 0; depth < MAX_CHAIN_DEPTH; depth++) {
    if (depth === 0) {
      if (at < cur.notBefore) {
        leafOutOfTime = fail('NOT_YET_VALID', `'${cur.subject}' is not valid before ${cur.notBefore.toISOString()}`);
      } else if (at > cur.notAfter) {
        leafOutOfTime = fail('EXPIRED', `'${cur.subject}' expired at ${cur.notAfter.toISOString()}`);
      }
    } else if (!validAt(cur, at)) {
      issuerOutOfTime ??= fail(
        'ISSUER_NOT_VALID',
        `the CA '${cur.subject}' is valid only from ${cur.notBefore.toISOString()} to ${cur.notAfter.toISOString()}`,
      );
    }
    const c = cur;
    if (anchors.some((r) => same(r, c))) return issuerOutOfTime ?? leafOutOfTime ?? { ok: true, chain };
    // Those valid at `at` first: a CA renewed with the same name and key may sit beside its expired copy, and the
    // first one that signed is taken (Go's x509.Verify tries every candidate; OpenZiti accepts such a chain).
    const named = [...anchors, ...pool]
      .filter((x) => !same(x, c) && x.subject === c.issuer)
      .sort((a, b) => Number(validAt(b, at)) - Number(validAt(a, at)));
    if (named.length === 0) return fail('UNKNOWN_ISSUER', `no trusted issuer '${c.issuer}' for '${c.subject}'`);
    let issuer: x509.X509Certificate | null = null;
    for (const candidate of named) {
      if (await signedBy(c, candidate)) {
        issuer = candidate;
        break;
      }
    }
    if (!issuer) return fail('BAD_SIGNATURE', `'${c.subject}' is not signed by any '${c.issuer}'`);
    if (!isCa(issuer)) return fail('NOT_A_CA', `'${issuer.subject}' is not a certificate authority`);
    const pathLength = issuer.getExtension(x509.BasicConstraintsExtension)?.pathLength;
    const casBelow = chain.length - 1; // CA certificates between this issuer and the leaf
    if (pathLength !== undefined && casBelow > pathLength) {
      return fail('PATH_LENGTH_EXCEEDED', `'${issuer.subject}' allows ${pathLength} CAs below it, found ${casBelow}`);
    }
    chain.push(issuer);
    cur = issuer;
  }
  return fail('CHAIN_TOO_LONG', `no root within ${MAX_CHAIN_DEPTH} certificates`);
}
