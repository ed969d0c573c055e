import { describe, expect, it } from 'vitest';
import { generateKeyPair, randomSerial, x509 } from '../../src/pki/crypto.js';
import { commonNameOf } from '../../src/pki/fingerprint.js';

async function withSubject(subject: string): Promise<Uint8Array> {
  const keys = await generateKeyPair();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: subject,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 86_400_000),
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
  });
  return new Uint8Array(cert.rawData);
}

describe("commonNameOf (Go's pkix.Name.CommonName)", () => {
  it('reads the last CN, unescaped, a multi-valued RDN included; "" without one', async () => {
    expect(commonNameOf(await withSubject('CN=only'))).toBe('only');
    expect(commonNameOf(await withSubject('CN=first, CN=second'))).toBe('second');
    expect(commonNameOf(await withSubject('CN=a+O=b'))).toBe('a');
    expect(commonNameOf(await withSubject('CN=with\\, comma'))).toBe('with, comma');
    expect(commonNameOf(await withSubject('O=no common name'))).toBe('');
    expect(commonNameOf(new Uint8Array([1, 2, 3]))).toBe('');
  });
});
