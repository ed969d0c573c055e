import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { generateKeyPair, parseCertificates, x509 } from '../../src/pki/crypto.js';
import {
  type CaMaterial,
  createIntermediateCa,
  createRootCa,
  issueServerCert,
  type KeyAndCert,
  MAX_CHAIN_CANDIDATES,
  MAX_CHAIN_DEPTH,
  PkiError,
  parseSinglePem,
  pkcs7CaCerts,
  verifyChain,
} from '../../src/pki/index.js';
import { pemBlocks } from '../../src/pki/pem.js';
import { openssl, Scratch } from './helpers.js';

const DAY_MS = 86_400_000;

describe('verifyChain', () => {
  let root: CaMaterial;
  let signing: CaMaterial;
  let leaf: KeyAndCert;
  beforeAll(async () => {
    root = await createRootCa({ commonName: 'V Root' });
    signing = await createIntermediateCa(root, { commonName: 'V Signing' });
    leaf = await issueServerCert(signing, { commonName: 'leaf', validity_days: 10 });
  });

  it('accepts a chain to a given root, PEM or DER, and returns it leaf first', async () => {
    const r = await verifyChain(leaf.certPem, [signing.certPem], [root.certPem]);
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.chain.map((c) => c.subject)).toEqual(['CN=leaf', 'CN=V Signing', 'CN=V Root']);
    const der = new Uint8Array(new x509.X509Certificate(leaf.certPem).rawData);
    expect((await verifyChain(der, [`${signing.certPem}\n${root.certPem}`], [root.certPem])).ok).toBe(true);
    // The root itself is trusted as is.
    expect((await verifyChain(root.certPem, [], [root.certPem])).ok).toBe(true);
  });

  it('respects notBefore and notAfter of every certificate in the chain', async () => {
    const leafCert = new x509.X509Certificate(leaf.certPem);
    const check = (at: Date) => verifyChain(leaf.certPem, [signing.certPem], [root.certPem], { at });
    expect((await check(new Date(leafCert.notAfter.getTime() - 1000))).ok).toBe(true);
    expect(await check(new Date(leafCert.notAfter.getTime() + 1000))).toMatchObject({ ok: false, code: 'EXPIRED' });
    expect(await check(new Date(Date.now() + 11 * DAY_MS))).toMatchObject({ ok: false, code: 'EXPIRED' });
    // before the CAs' notBefore (and so the leaf's) a CA is not valid yet
    const caStart = Math.min(
      ...[root.certPem, signing.certPem].map((p) => new x509.X509Certificate(p).notBefore.getTime()),
    );
    expect(await check(new Date(caStart - 1000))).toMatchObject({
      ok: false,
      code: 'ISSUER_NOT_VALID',
    });
    // a leaf made a day later, checked just before its notBefore: only the leaf is not valid yet
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + DAY_MS });
    const future = await issueServerCert(signing, { commonName: 'future', validity_days: 10 }).finally(() =>
      vi.useRealTimers(),
    );
    const futureStart = new x509.X509Certificate(future.certPem).notBefore.getTime();
    expect(
      await verifyChain(future.certPem, [signing.certPem], [root.certPem], { at: new Date(futureStart - 1000) }),
    ).toMatchObject({ ok: false, code: 'NOT_YET_VALID' });
    // An intermediate that expires before the leaf is checked too, and is not the leaf's EXPIRED (which an auth
    // policy's allowExpiredCerts waives): a CA out of its validity is ISSUER_NOT_VALID, whatever the leaf's state.
    const shortCa = await createIntermediateCa(root, { commonName: 'Short', validity_days: 1 });
    const later = new Date(Date.now() + 2 * DAY_MS);
    const l2 = await issueServerCert(shortCa, { commonName: 'l2', validity_days: 1 });
    expect(await verifyChain(l2.certPem, [shortCa.certPem], [root.certPem], { at: later })).toMatchObject({
      code: 'ISSUER_NOT_VALID',
    });
    const l3 = await issueServerCert(shortCa, { commonName: 'l3', validity_days: 10 });
    expect(await verifyChain(l3.certPem, [shortCa.certPem], [root.certPem], { at: later })).toMatchObject({
      code: 'ISSUER_NOT_VALID',
    });
    // the anchor too
    const shortRoot = await createRootCa({ commonName: 'Short Root', validity_days: 1 });
    const l4 = await issueServerCert(shortRoot, { commonName: 'l4', validity_days: 10 });
    expect(await verifyChain(l4.certPem, [], [shortRoot.certPem], { at: later })).toMatchObject({
      code: 'ISSUER_NOT_VALID',
    });
    expect((await verifyChain(l4.certPem, [], [shortRoot.certPem])).ok).toBe(true);
  });

  it('a CA renewed with the same name and key beside its expired copy: the valid one is taken, in either order', async () => {
    const keys = await generateKeyPair();
    const DAY = 86_400_000;
    const root = (from_days: number, to_days: number, serial: string) =>
      x509.X509CertificateGenerator.createSelfSigned({
        serialNumber: serial,
        name: 'CN=Renewed Root',
        notBefore: new Date(Date.now() + from_days * DAY),
        notAfter: new Date(Date.now() + to_days * DAY),
        keys,
        signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
        extensions: [
          new x509.BasicConstraintsExtension(true, undefined, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true),
        ],
      });
    const expired = await root(-60, -1, '01');
    const renewed = await root(-1, 60, '02');
    const leaf = await x509.X509CertificateGenerator.create({
      serialNumber: '03',
      subject: 'CN=renewed-leaf',
      issuer: 'CN=Renewed Root',
      notBefore: new Date(Date.now() - DAY),
      notAfter: new Date(Date.now() + 10 * DAY),
      publicKey: (await generateKeyPair()).publicKey,
      signingKey: keys.privateKey,
      signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    });
    const pems = [expired.toString('pem'), renewed.toString('pem')];
    expect((await verifyChain(leaf.toString('pem'), [], pems)).ok).toBe(true);
    expect((await verifyChain(leaf.toString('pem'), [], [...pems].reverse())).ok).toBe(true);
    expect(await verifyChain(leaf.toString('pem'), [], [pems[0]!])).toMatchObject({ code: 'ISSUER_NOT_VALID' });
  });

  it('answers EXPIRED or NOT_YET_VALID only for a chain that otherwise verifies: a forgery is refused for what it is', async () => {
    const sign = { name: 'ECDSA', hash: 'SHA-256' };
    const keys = await generateKeyPair();
    // a leaf naming this root as issuer, signed by another key, valid only long ago (or only in the future)
    const forged = (notBefore: Date, notAfter: Date) =>
      x509.X509CertificateGenerator.create({
        subject: 'CN=forged',
        issuer: new x509.X509Certificate(root.certPem).subject,
        notBefore,
        notAfter,
        publicKey: keys.publicKey,
        signingKey: keys.privateKey,
        signingAlgorithm: sign,
      });
    const past = await forged(new Date(Date.now() - 3 * DAY_MS), new Date(Date.now() - 2 * DAY_MS));
    const future = await forged(new Date(Date.now() + 2 * DAY_MS), new Date(Date.now() + 3 * DAY_MS));
    expect(await verifyChain(past, [], [root.certPem])).toMatchObject({ code: 'BAD_SIGNATURE' });
    expect(await verifyChain(future, [], [root.certPem])).toMatchObject({ code: 'BAD_SIGNATURE' });
    // of no known issuer at all
    const stray = await x509.X509CertificateGenerator.createSelfSigned({
      name: 'CN=stray',
      notBefore: new Date(Date.now() - 3 * DAY_MS),
      notAfter: new Date(Date.now() - 2 * DAY_MS),
      keys,
      signingAlgorithm: sign,
    });
    expect(await verifyChain(stray, [], [root.certPem])).toMatchObject({ code: 'UNKNOWN_ISSUER' });
    // an expired leaf of the right CA is EXPIRED (callers may accept that), through a sound path only
    const later = new Date(Date.now() + 11 * DAY_MS);
    expect(await verifyChain(leaf.certPem, [signing.certPem], [root.certPem], { at: later })).toMatchObject({
      code: 'EXPIRED',
    });
    expect(await verifyChain(leaf.certPem, [], [root.certPem], { at: later })).toMatchObject({
      code: 'UNKNOWN_ISSUER',
    });
  });

  it('refuses certificates of another CA, forged issuers, non-CA issuers and too-deep paths', async () => {
    const other = await createRootCa({ commonName: 'Other Root' });
    expect(await verifyChain(leaf.certPem, [signing.certPem], [other.certPem])).toMatchObject({
      code: 'UNKNOWN_ISSUER',
    });
    expect(await verifyChain(leaf.certPem, [], [root.certPem])).toMatchObject({ code: 'UNKNOWN_ISSUER' });
    // Same name, different key.
    const twin = await createRootCa({ commonName: 'V Root' });
    expect(await verifyChain(leaf.certPem, [signing.certPem], [twin.certPem])).toMatchObject({
      code: 'BAD_SIGNATURE',
    });
    // A leaf used as a CA.
    const fakeCa: CaMaterial = { certPem: leaf.certPem, keyPem: leaf.keyPem, chainPem: leaf.chainPem };
    const underLeaf = await issueServerCert(fakeCa, { commonName: 'victim' });
    expect(await verifyChain(underLeaf.certPem, [leaf.certPem, signing.certPem], [root.certPem])).toMatchObject({
      code: 'NOT_A_CA',
    });
    // An intermediate below the pathLen-0 signing CA.
    const sub = await createIntermediateCa(signing, { commonName: 'Sub' });
    const deep = await issueServerCert(sub, { commonName: 'deep' });
    expect(await verifyChain(deep.certPem, [sub.certPem, signing.certPem], [root.certPem])).toMatchObject({
      code: 'PATH_LENGTH_EXCEEDED',
    });
  });

  it('checks the purpose and answers MALFORMED for input that does not parse', async () => {
    expect(await verifyChain(leaf.certPem, [signing.certPem], [root.certPem], { purpose: 'client' })).toMatchObject({
      code: 'WRONG_USAGE',
    });
    expect((await verifyChain(leaf.certPem, [signing.certPem], [root.certPem], { purpose: 'server' })).ok).toBe(true);
    expect(await verifyChain('garbage', [], [root.certPem])).toMatchObject({ code: 'MALFORMED' });
    expect(await verifyChain(new Uint8Array([1, 2, 3]), [], [root.certPem])).toMatchObject({ code: 'MALFORMED' });
    expect(await verifyChain(leaf.certPem, ['nothing here'], [root.certPem])).toMatchObject({ code: 'MALFORMED' });
    const broken = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----';
    expect(await verifyChain(leaf.certPem, [broken], [root.certPem])).toMatchObject({ code: 'MALFORMED' });
  });

  it('bounds the chain depth and the candidate certificates', async () => {
    // A chain of CAs without path length constraints, deeper than MAX_CHAIN_DEPTH.
    const sign = { name: 'ECDSA', hash: 'SHA-256' };
    let keys = await generateKeyPair();
    const caExt = () => [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true),
    ];
    const top = await x509.X509CertificateGenerator.createSelfSigned({
      name: 'CN=L0',
      keys,
      signingAlgorithm: sign,
      extensions: caExt(),
    });
    const chain = [top];
    for (let i = 1; i <= MAX_CHAIN_DEPTH; i++) {
      const next = await generateKeyPair();
      chain.push(
        await x509.X509CertificateGenerator.create({
          subject: `CN=L${i}`,
          issuer: chain[i - 1]!.subject,
          publicKey: next.publicKey,
          signingKey: keys.privateKey,
          signingAlgorithm: sign,
          extensions: caExt(),
        }),
      );
      keys = next;
    }
    const pems = chain.map((c) => c.toString('pem'));
    const leafAt = (depth: number) => verifyChain(pems[depth]!, pems.slice(1, depth), [pems[0]!]);
    expect((await leafAt(MAX_CHAIN_DEPTH - 1)).ok).toBe(true); // MAX_CHAIN_DEPTH certificates
    expect(await leafAt(MAX_CHAIN_DEPTH)).toMatchObject({ code: 'CHAIN_TOO_LONG' });
    const many = Array.from({ length: MAX_CHAIN_CANDIDATES }, () => signing.certPem);
    expect(await verifyChain(leaf.certPem, many, [root.certPem])).toMatchObject({ code: 'CHAIN_TOO_LONG' });
    expect((await verifyChain(leaf.certPem, many.slice(1), [root.certPem])).ok).toBe(true);
  });

  it('verifies RSA chains made by openssl', async () => {
    const s = new Scratch();
    try {
      const run = (args: string[]) => expect(openssl(args).status).toBe(0);
      run([
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        s.path('ca.key'),
        '-subj',
        '/CN=RSA Root',
        '-days',
        '2',
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-addext',
        'keyUsage=critical,keyCertSign',
        '-out',
        s.path('ca.pem'),
      ]);
      run([
        'req',
        '-new',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        s.path('l.key'),
        '-subj',
        '/CN=rsa-leaf',
        '-out',
        s.path('l.csr'),
      ]);
      run([
        'x509',
        '-req',
        '-in',
        s.path('l.csr'),
        '-CA',
        s.path('ca.pem'),
        '-CAkey',
        s.path('ca.key'),
        '-days',
        '1',
        '-out',
        s.path('l.pem'),
      ]);
      expect((await verifyChain(s.read('l.pem'), [], [s.read('ca.pem')])).ok).toBe(true);
      expect(await verifyChain(s.read('l.pem'), [], [root.certPem])).toMatchObject({ code: 'UNKNOWN_ISSUER' });
    } finally {
      s.remove();
    }
  });
});

describe('pkcs7CaCerts', () => {
  const s = new Scratch();
  afterAll(() => s.remove());

  it('is a PKCS#7 certs-only bundle in base64 lines that openssl parses', async () => {
    const root = await createRootCa({ commonName: 'P7 Root' });
    const signing = await createIntermediateCa(root, { commonName: 'P7 Signing' });
    const body = pkcs7CaCerts([root.certPem, signing.certPem]);
    const lines = body.split('\n');
    expect(lines.pop()).toBe('');
    expect(lines.length).toBeGreaterThan(2);
    for (const line of lines.slice(0, -1)) expect(line).toMatch(/^[A-Za-z0-9+/]{64}$/);
    expect(lines.at(-1)!).toMatch(/^[A-Za-z0-9+/=]{1,64}$/);
    s.write('bundle.p7', Buffer.from(body, 'base64'));
    const r = openssl(['pkcs7', '-inform', 'DER', '-in', s.path('bundle.p7'), '-print_certs']);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('subject=CN = P7 Root');
    expect(r.stdout).toContain('subject=CN = P7 Signing');
    expect(r.stdout.match(/BEGIN CERTIFICATE/g)).toHaveLength(2);
    // openssl's PEM form of the same bytes (what `base64 -d | openssl pkcs7 -inform DER` sees) round-trips.
    const pem = `-----BEGIN PKCS7-----\n${body}-----END PKCS7-----\n`;
    expect(openssl(['pkcs7', '-print_certs', '-noout'], pem).status).toBe(0);
  });

  it('refuses an empty or malformed certificate list', () => {
    expect(() => pkcs7CaCerts([])).toThrow(PkiError);
    expect(() => pkcs7CaCerts(['-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----'])).toThrow(
      expect.objectContaining({ code: 'CERT_MALFORMED' }),
    );
  });
});

describe('PEM scanning', () => {
  it('finds the blocks of a label in order; a BEGIN without its END, or an empty block, is none', async () => {
    const root = await createRootCa({ commonName: 'PEM Root' });
    const other = await createRootCa({ commonName: 'PEM Other' });
    const key = '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n';
    const text = `junk\n${root.certPem}${key}${other.certPem}-----BEGIN CERTIFICATE-----\nAAAA\n`;
    expect(pemBlocks(text, 'CERTIFICATE')).toEqual([root.certPem.trim(), other.certPem.trim()]);
    expect(pemBlocks(text, 'PRIVATE KEY')).toEqual([key.trim()]);
    expect(pemBlocks('-----BEGIN CERTIFICATE----------END CERTIFICATE-----', 'CERTIFICATE')).toEqual([]);
    expect(parseSinglePem(root.certPem)?.subject).toBe('CN=PEM Root');
    expect(parseSinglePem(`${root.certPem}${other.certPem}`)).toBeNull();
  });

  it('is linear: a megabyte of BEGIN lines without an END is refused at once (a regex took tens of seconds)', () => {
    const flood = '-----BEGIN CERTIFICATE-----\n'.repeat((1024 * 1024) / 28);
    const started = Date.now();
    // what POST /cas and POST /authenticators parse a certPem of up to the body limit with
    expect(parseSinglePem(flood)).toBeNull();
    // linear: a few milliseconds; the quadratic scan needed about 16 s for this text on an idle machine
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(pemBlocks(flood, 'CERTIFICATE')).toEqual([]);
    expect(parseCertificates(flood)).toEqual([]);
  });
});
