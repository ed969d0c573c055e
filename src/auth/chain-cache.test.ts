/** The remembered chain verification of certificate logins answers as verifyChain would, within bounds. */
import { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { type CaMaterial, createIntermediateCa, createRootCa, issueServerCert } from '../pki/index.js';
import { clearChainCache, clientChainOf, verifyClientChain as verifyChainOf } from './chain-cache.js';

/** verifyClientChain of the chain `leaf` then `sent`. */
const verifyClientChain = (leaf: Buffer, sent: Buffer[], trusted: string[], at: Date) =>
  verifyChainOf(clientChainOf([leaf, ...sent])!, trusted, at);

describe('verifyClientChain', () => {
  let root: CaMaterial;
  let signing: CaMaterial;
  let other: CaMaterial;
  let leaf: Buffer;
  let notAfter_ms: number;
  beforeAll(async () => {
    root = await createRootCa({ commonName: 'cache-root' });
    signing = await createIntermediateCa(root, { commonName: 'cache-signing' });
    other = await createRootCa({ commonName: 'cache-other' });
    const issued = await issueServerCert(signing, { commonName: 'cache-leaf', usage: 'client', validity_days: 2 });
    const cert = new X509Certificate(issued.certPem);
    leaf = cert.raw;
    notAfter_ms = Date.parse(cert.validTo);
  });

  it('answers a remembered chain only for the same anchors and inside its validity window', async () => {
    clearChainCache();
    const now = new Date();
    expect((await verifyClientChain(leaf, [], [root.certPem, signing.certPem], now)).ok).toBe(true);
    expect((await verifyClientChain(leaf, [], [root.certPem, signing.certPem], now)).ok).toBe(true);
    // another anchor set is checked afresh: the remembered answer was for other anchors
    const foreign = await verifyClientChain(leaf, [], [other.certPem], now);
    expect(foreign.ok ? 'ok' : foreign.code).toBe('UNKNOWN_ISSUER');
    // past the leaf's notAfter the chain is verified again, and fails
    const later = await verifyClientChain(leaf, [], [root.certPem, signing.certPem], new Date(notAfter_ms + 1000));
    expect(later.ok ? 'ok' : later.code).toBe('EXPIRED');
    // the client's intermediate is part of what is remembered
    const withSent = await verifyClientChain(
      leaf,
      [Buffer.from(new X509Certificate(signing.certPem).raw)],
      [root.certPem],
      now,
    );
    expect(withSent.ok).toBe(true);
    const withoutSent = await verifyClientChain(leaf, [], [root.certPem], now);
    expect(withoutSent.ok ? 'ok' : withoutSent.code).toBe('UNKNOWN_ISSUER');
  });
});
