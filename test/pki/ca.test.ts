import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { x509 } from '../../src/pki/crypto.js';
import {
  type CaMaterial,
  createIntermediateCa,
  createRootCa,
  issuePeerCert,
  issueServerCert,
  MAX_CSR_SIZE_BYTES,
  parseCsr,
  peerNodeId,
  signCsr,
  verifyChain,
} from '../../src/pki/index.js';
import { openssl, opensslCsr, refusal, Scratch } from './helpers.js';

function text(s: Scratch, pem: string): string {
  const r = openssl(['x509', '-noout', '-text', '-in', s.write(`t${Math.random()}.pem`, pem)]);
  expect(r.status).toBe(0);
  return r.stdout;
}

describe('CAs and issued certificates', () => {
  const s = new Scratch();
  let root: CaMaterial;
  let signing: CaMaterial;
  beforeAll(async () => {
    root = await createRootCa({ commonName: 'Test Root CA' });
    signing = await createIntermediateCa(root, { commonName: 'Test Signing CA' });
    s.write('root.pem', root.certPem);
    s.write('signing.pem', signing.certPem);
  });
  afterAll(() => s.remove());

  it('makes a self-signed root and a pathLen-0 intermediate that openssl accepts as CAs', () => {
    const r = text(s, root.certPem);
    expect(r).toMatch(/Basic Constraints: critical\s+CA:TRUE\n/);
    expect(r).toMatch(/Key Usage: critical\s+Certificate Sign, CRL Sign/);
    expect(r).toContain('Issuer: CN = Test Root CA');
    expect(r).toContain('ASN1 OID: prime256v1');
    const i = text(s, signing.certPem);
    expect(i).toMatch(/CA:TRUE, pathlen:0/);
    expect(signing.chainPem).toEqual([root.certPem]);
    const v = openssl(['verify', '-CAfile', s.path('root.pem'), s.path('signing.pem')]);
    expect(v.stdout).toContain(': OK');
  });

  it('issues server and peer certificates that openssl verifies for their purpose', async () => {
    const server = await issueServerCert(signing, {
      commonName: 'api',
      dnsNames: ['ctrl.example.com'],
      ipAddresses: ['127.0.0.1', '::1'],
    });
    const peer = await issuePeerCert(signing, { nodeId: 'n1', hosts: [] });
    expect(server.chainPem).toEqual([signing.certPem, root.certPem]);
    const t = text(s, server.certPem);
    expect(t).toContain('DNS:ctrl.example.com, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
    expect(t).toMatch(/CA:FALSE/);
    expect(t).toContain('TLS Web Server Authentication');
    expect(t).not.toContain('TLS Web Client Authentication');
    const base = ['verify', '-CAfile', s.path('root.pem'), '-untrusted', s.path('signing.pem')];
    expect(openssl([...base, '-purpose', 'sslserver', s.write('server.pem', server.certPem)]).status).toBe(0);
    // A server-only certificate is not a TLS client certificate.
    expect(openssl([...base, '-purpose', 'sslclient', s.path('server.pem')]).status).not.toBe(0);
    s.write('peer.pem', peer.certPem);
    expect(openssl([...base, '-purpose', 'sslclient', s.path('peer.pem')]).status).toBe(0);
    expect(openssl([...base, '-purpose', 'sslserver', s.path('peer.pem')]).status).toBe(0);
    // The private key belongs to the certificate.
    const pub1 = openssl(['pkey', '-pubout', '-in', s.write('server.key', server.keyPem)]).stdout;
    const pub2 = openssl(['x509', '-pubkey', '-noout', '-in', s.path('server.pem')]).stdout;
    expect(pub1).toBe(pub2);
    // Another CA's root does not verify it.
    const other = await createRootCa({ commonName: 'Test Root CA' });
    const v = openssl([
      'verify',
      '-CAfile',
      s.write('other.pem', other.certPem),
      '-untrusted',
      s.path('signing.pem'),
      s.path('server.pem'),
    ]);
    expect(v.status).not.toBe(0);
  });

  it('never issues past the issuer expiry and refuses bad options', async () => {
    const shortCa = await createIntermediateCa(root, { commonName: 'Short', validity_days: 2 });
    const leaf = await issueServerCert(shortCa, { commonName: 'x', validity_days: 365 });
    const caCert = new x509.X509Certificate(shortCa.certPem);
    expect(new x509.X509Certificate(leaf.certPem).notAfter.getTime()).toBe(caCert.notAfter.getTime());
    expect(await refusal(createRootCa({ commonName: '' }))).toBe('INVALID_ARGUMENT');
    expect(await refusal(createRootCa({ commonName: 'x'.repeat(65) }))).toBe('INVALID_ARGUMENT');
    expect(await refusal(createRootCa({ commonName: 'r', validity_days: 0 }))).toBe('INVALID_ARGUMENT');
    expect(await refusal(createRootCa({ commonName: 'r', validity_days: 1.5 }))).toBe('INVALID_ARGUMENT');
    expect(await refusal(issueServerCert(signing, { commonName: 'x', ipAddresses: ['1.2.3'] }))).toBe(
      'INVALID_ARGUMENT',
    );
    expect(await refusal(issueServerCert(signing, { commonName: 'x', dnsNames: ['a b'] }))).toBe('INVALID_ARGUMENT');
    expect(await refusal(issueServerCert(signing, { commonName: 'x', uris: ['not a uri'] }))).toBe('INVALID_ARGUMENT');
    // Only issuePeerCert names a controller: no other leaf can claim a node id.
    for (const uri of ['spiffe://keel/controller/n1', 'SPIFFE://keel/controller/n1']) {
      expect(await refusal(issueServerCert(signing, { commonName: 'x', uris: [uri] }))).toBe('INVALID_ARGUMENT');
    }
    const router = await issueServerCert(signing, { commonName: 'r', uris: ['spiffe://keel/router/r1'] });
    expect(peerNodeId(new x509.X509Certificate(router.certPem).rawData)).toBeNull();
    const many = Array.from({ length: 101 }, (_, i) => `h${i}.example.com`);
    expect(await refusal(issueServerCert(signing, { commonName: 'x', dnsNames: many }))).toBe('INVALID_ARGUMENT');
    // A CA whose key is not its certificate's.
    const mixed = { ...signing, keyPem: root.keyPem };
    expect(await refusal(issueServerCert(mixed, { commonName: 'x' }))).toBe('KEY_MISMATCH');
    expect(await refusal(issueServerCert({ ...signing, keyPem: 'nope' }, { commonName: 'x' }))).toBe('KEY_MALFORMED');
    expect(await refusal(issueServerCert({ ...signing, certPem: 'nope' }, { commonName: 'x' }))).toBe('CERT_MALFORMED');
  });

  describe('signing CSRs', () => {
    it('signs EC and RSA requests made by openssl; openssl verifies the result', async () => {
      for (const key of ['ec', 'rsa:2048']) {
        const csr = opensslCsr(s, `c-${key}`, key, '/CN=alice/O=Acme', [
          '-addext',
          'subjectAltName=DNS:evil.example.com,URI:spiffe://keel/controller/n1',
        ]);
        const certPem = await signCsr(signing, csr, { usage: 'client' });
        const file = s.write(`c-${key}.pem`, certPem);
        const v = openssl([
          'verify',
          '-CAfile',
          s.path('root.pem'),
          '-untrusted',
          s.path('signing.pem'),
          '-purpose',
          'sslclient',
          file,
        ]);
        expect(v.stdout).toContain(': OK');
        const t = text(s, certPem);
        expect(t).toMatch(/Subject: (O = Acme, CN = alice|CN = alice, O = Acme)/);
        expect(t).toContain('TLS Web Client Authentication');
        // Requested SANs are not copied: a CSR cannot claim a controller's identity.
        expect(t).not.toContain('Subject Alternative Name');
        expect(t).not.toContain('spiffe');
        if (key.startsWith('rsa')) expect(t).toContain('Key Encipherment');
        // The certificate carries the request's public key.
        const csrPub = openssl(['req', '-pubkey', '-noout', '-in', s.path(`c-${key}.csr`)]).stdout;
        expect(openssl(['x509', '-pubkey', '-noout', '-in', file]).stdout).toBe(csrPub);
        expect((await verifyChain(certPem, [signing.certPem], [root.certPem], { purpose: 'client' })).ok).toBe(true);
      }
    });

    it('replaces the subject with commonName and adds the given SANs', async () => {
      const csr = opensslCsr(s, 'named', 'ec', '/CN=whatever');
      const certPem = await signCsr(signing, csr, {
        usage: 'both',
        commonName: 'ident-1',
        dnsNames: ['router.example.com'],
        validity_days: 7,
      });
      const t = text(s, certPem);
      expect(t).toContain('Subject: CN = ident-1');
      expect(t).toContain('DNS:router.example.com');
      expect(t).toContain('TLS Web Server Authentication, TLS Web Client Authentication');
    });

    it('issues sub-day lifetimes (validity_ms, ephemeral certificates) within bounds', async () => {
      const csr = opensslCsr(s, 'short', 'ec', '/CN=short');
      const before = Date.now();
      const cert = new x509.X509Certificate(await signCsr(signing, csr, { usage: 'client', validity_ms: 3_600_000 }));
      expect(Math.abs(cert.notAfter.getTime() - (before + 3_600_000))).toBeLessThan(5_000);
      const sign = (ms: number) => refusal(signCsr(signing, csr, { usage: 'client', validity_ms: ms }));
      expect(await sign(59_999)).toBe('INVALID_ARGUMENT');
      expect(await sign(86_400_001)).toBe('INVALID_ARGUMENT');
      expect(await sign(1.5)).toBe('INVALID_ARGUMENT');
    });

    it('refuses malformed and unacceptable requests with typed errors', async () => {
      const good = opensslCsr(s, 'good', 'ec', '/CN=good');
      const sign = (pem: string) => refusal(signCsr(signing, pem, { usage: 'client' }));
      expect(await sign('')).toBe('CSR_MALFORMED');
      expect(await sign('hello')).toBe('CSR_MALFORMED');
      expect(await sign(root.certPem)).toBe('CSR_MALFORMED');
      expect(await sign(`${good}${good}`)).toBe('CSR_MALFORMED');
      expect(await sign('-----BEGIN CERTIFICATE REQUEST-----\nAAAA!!\n-----END CERTIFICATE REQUEST-----')).toBe(
        'CSR_MALFORMED',
      );
      expect(await sign('-----BEGIN CERTIFICATE REQUEST-----\nMIIBIjAN\n-----END CERTIFICATE REQUEST-----')).toBe(
        'CSR_MALFORMED',
      );
      expect(await sign(`${good}\n${' '.repeat(MAX_CSR_SIZE_BYTES)}`)).toBe('CSR_TOO_LARGE');
      expect(await refusal(parseCsr(42 as unknown as string))).toBe('CSR_MALFORMED');

      // A flipped bit in the signature.
      expect(openssl(['req', '-outform', 'DER', '-in', s.path('good.csr'), '-out', s.path('good.der')]).status).toBe(0);
      const bytes = readFileSync(s.path('good.der'));
      bytes[bytes.length - 1]! ^= 0x01;
      const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${bytes.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
      expect(await sign(tampered)).toBe('CSR_BAD_SIGNATURE');
      // Bytes after the request's DER (Go's x509.ParseCertificateRequest: "trailing data"), or a DER cut short.
      const whole = readFileSync(s.path('good.der'));
      const pemOf = (der: Buffer) =>
        `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
      expect((await parseCsr(pemOf(whole))).subject).toBe('CN=good');
      expect(await sign(pemOf(Buffer.concat([whole, Buffer.from([0x05, 0x00])])))).toBe('CSR_MALFORMED');
      expect(await sign(pemOf(whole.subarray(0, whole.length - 1)))).toBe('CSR_MALFORMED');

      // The request asks to be a CA.
      const ca = opensslCsr(s, 'ca', 'ec', '/CN=sub-ca', ['-addext', 'basicConstraints=critical,CA:TRUE']);
      expect(await sign(ca)).toBe('CSR_CA_REQUESTED');
      const notCa = opensslCsr(s, 'notca', 'ec', '/CN=leaf', ['-addext', 'basicConstraints=CA:FALSE']);
      expect(typeof (await signCsr(signing, notCa, { usage: 'client' }))).toBe('string');

      // Key types and sizes.
      expect(await sign(opensslCsr(s, 'small', 'rsa:1024', '/CN=small'))).toBe('CSR_KEY_TOO_SMALL');
      expect(await sign(opensslCsr(s, 'ed', 'ed25519', '/CN=ed'))).toBe('CSR_UNSUPPORTED_KEY');
      const k1 = openssl(['ecparam', '-name', 'secp256k1', '-genkey', '-noout', '-out', s.path('k1.key')]);
      expect(k1.status).toBe(0);
      const k1csr = openssl(['req', '-new', '-key', s.path('k1.key'), '-subj', '/CN=k1']);
      expect(await sign(k1csr.stdout)).toBe('CSR_UNSUPPORTED_KEY');

      // Bad options.
      expect(await refusal(signCsr(signing, good, { usage: 'nope' as 'client' }))).toBe('INVALID_ARGUMENT');
      expect(await refusal(signCsr(signing, good, { usage: 'client', commonName: '' }))).toBe('INVALID_ARGUMENT');
    });
  });
});
