/**
 * Third-party CAs: CRUD, verification with a certificate whose CN is the verification token, the CA's enrollment
 * JWT, `ottca` enrollments tied to the CA (deleted with it), and certificate login through a verified CA with
 * `isAuthEnabled`. Every response goes through the spec check.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeJwt, importJWK, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_MERGE_ATTEMPTS } from '../../src/api/entity.js';
import type { OpDef } from '../../src/api/op.js';
import { formatIdentityName } from '../../src/auth/ca-enrollment.js';
import { type CryptoKeyPair, exportKeyPem, generateKeyPair, randomSerial, x509 } from '../../src/pki/crypto.js';
import { opensslCa, opensslFingerprint, opensslIssue, Scratch } from '../pki/helpers.js';
import { interceptNextWrite } from '../support/api.js';
import { fakeClusterView, fakeMember } from '../support/cluster-view.js';
import { uncoveredInOwnFile } from '../support/conformance.js';
import { call, login, startServer, type TestServer } from '../support/server.js';
import { SPEC_AVAILABLE } from '../support/spec.js';
import { tlsCall } from '../support/tls-call.js';

const s = new Scratch();
const opsServed: OpDef<unknown>[] = [];
afterAll(() => {
  s.remove();
  const missing = uncoveredInOwnFile('test/api/cas.test.ts', opsServed);
  if (SPEC_AVAILABLE) expect(missing).toEqual([]);
});

let seq = 0;
const makeCa = (name: string) => opensslCa(s, name);
const issue = (ca: string, name: string, cn: string) => opensslIssue(s, ca, name, cn);

const caBody = (name: string, certPem: string, extra: object = {}) => ({
  name,
  certPem,
  isAutoCaEnrollmentEnabled: false,
  isOttCaEnrollmentEnabled: true,
  isAuthEnabled: true,
  identityRoles: [],
  ...extra,
});

describe('CAs (management API)', () => {
  let srv: TestServer;
  let admin: string;
  beforeAll(async () => {
    srv = await startServer();
    admin = await login(srv.base);
    opsServed.push(...srv.ctl.ops);
  });
  afterAll(() => srv.stop());

  const mgmt = (method: string, path: string, body?: unknown) =>
    call(method, `${srv.mgmt}${path}`, { token: admin, body });
  const verify = (id: string, pem: string, type = 'text/plain') =>
    call('POST', `${srv.mgmt}/cas/${id}/verify`, { token: admin, raw: pem, headers: { 'content-type': type } });
  const code = (r: { status: number; body: any }) => [r.status, r.body?.error?.code];

  it('create, detail, list, update, patch, delete; bad certificates refused', async () => {
    const pem = makeCa(`ca-${++seq}`);
    const r = await mgmt('POST', '/cas', caBody('first', pem, { identityRoles: ['staff'], tags: { a: 'b' } }));
    expect(r.status).toBe(201);
    const id = r.body.data.id;
    const d = (await mgmt('GET', `/cas/${id}`)).body.data;
    expect(d).toMatchObject({
      name: 'first',
      isVerified: false,
      isAuthEnabled: true,
      isOttCaEnrollmentEnabled: true,
      isAutoCaEnrollmentEnabled: false,
      identityRoles: ['staff'],
      identityNameFormat: '[caName]-[commonName]',
      fingerprint: opensslFingerprint(s, pem),
      tags: { a: 'b' },
    });
    expect(d.verificationToken).toMatch(/^[0-9a-f-]{36}$/);
    expect(d.certPem).toContain('-----BEGIN CERTIFICATE-----');
    const listed = await call('GET', `${srv.mgmt}/cas?filter=${encodeURIComponent('name="first"')}`, { token: admin });
    expect(listed.body.data.map((c: { id: string }) => c.id)).toEqual([id]);
    const put = await mgmt('PUT', `/cas/${id}`, {
      name: 'renamed',
      isAutoCaEnrollmentEnabled: true,
      isOttCaEnrollmentEnabled: false,
      isAuthEnabled: false,
      identityRoles: [],
      identityNameFormat: '[commonName]',
      externalIdClaim: {
        location: 'COMMON_NAME',
        matcher: 'ALL',
        matcherCriteria: '',
        parser: 'NONE',
        parserCriteria: '',
        index: 0,
      },
    });
    expect(put.status).toBe(200);
    const patched = await mgmt('PATCH', `/cas/${id}`, { isAuthEnabled: true });
    expect(patched.status).toBe(200);
    const after = (await mgmt('GET', `/cas/${id}`)).body.data;
    expect(after).toMatchObject({
      name: 'renamed',
      isAuthEnabled: true,
      isOttCaEnrollmentEnabled: false,
      identityNameFormat: '[commonName]',
      externalIdClaim: { location: 'COMMON_NAME', matcher: 'ALL' },
      fingerprint: d.fingerprint,
    });
    // refusals: not a CA, not a certificate, the same certificate again, a taken name
    const leaf = issue(`ca-${seq}`, 'leaf', 'leaf');
    expect(code(await mgmt('POST', '/cas', caBody('leaf', leaf)))).toEqual([400, 'CERTIFICATE_IS_NOT_CA']);
    expect(code(await mgmt('POST', '/cas', caBody('junk', 'junk')))).toEqual([400, 'INVALID_CERT_PEM']);
    expect(code(await mgmt('POST', '/cas', caBody('two', pem + pem)))).toEqual([400, 'INVALID_CERT_PEM']);
    // a key no certificate could be verified against (Go's x509 does not parse secp256k1 either); Ed25519 is one
    const k1 = opensslCa(s, `ca-${++seq}`, ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:secp256k1', '-nodes']);
    const refusedKey = await mgmt('POST', '/cas', caBody('secp256k1', k1));
    expect([...code(refusedKey), refusedKey.body.error.cause.field]).toEqual([400, 'INVALID_CERT_PEM', 'certPem']);
    const ed = await mgmt(
      'POST',
      '/cas',
      caBody('ed25519', opensslCa(s, `ca-${++seq}`, ['-newkey', 'ed25519', '-nodes'])),
    );
    expect(ed.status, ed.text).toBe(201);
    const again = await mgmt('POST', '/cas', caBody('again', pem));
    expect([...code(again), again.body.error.cause.field]).toEqual([400, 'COULD_NOT_VALIDATE', 'fingerprint']);
    const name = await mgmt('POST', '/cas', caBody('renamed', makeCa(`ca-${++seq}`)));
    expect([...code(name), name.body.error.cause.field]).toEqual([400, 'COULD_NOT_VALIDATE', 'name']);
    expect((await mgmt('DELETE', `/cas/${id}`)).status).toBe(200);
    expect(code(await mgmt('GET', `/cas/${id}`))).toEqual([404, 'NOT_FOUND']);
  });

  it('a PATCH of externalIdClaim merges into the claim as it is where the write applies: a change in between is kept', async () => {
    const meanwhile = interceptNextWrite(srv.ctl.svc);
    const claim = { location: 'COMMON_NAME', matcher: 'ALL', matcherCriteria: '', parser: 'NONE', parserCriteria: '' };
    const name = `ca-${++seq}`;
    const made = await mgmt('POST', '/cas', caBody(name, makeCa(name), { externalIdClaim: { ...claim, index: 0 } }));
    expect(made.status).toBe(201);
    const id = made.body.data.id;
    // another write (another member's, say) changes the claim after the handler read the CA, before its write
    // applies; `at` a second on, so that the change is not stamped with the CA's own millisecond
    let changes = 0;
    const change = () => {
      changes++;
      const set = { externalIdClaim: { ...claim, index: 0, matcher: 'PREFIX', matcherCriteria: `p${changes}-` } };
      const at = new Date(Date.now() + 1000 * changes).toISOString();
      return srv.ctl.svc.write({ op: 'update', entity: 'cas', id, set, at });
    };
    meanwhile(change);
    expect((await mgmt('PATCH', `/cas/${id}`, { externalIdClaim: { index: 2 } })).status).toBe(200);
    expect(changes).toBe(1);
    const claimNow = async () => (await mgmt('GET', `/cas/${id}`)).body.data.externalIdClaim;
    expect(await claimNow()).toEqual({ ...claim, matcher: 'PREFIX', matcherCriteria: 'p1-', index: 2 });

    // a CA that changes before every attempt: after MAX_MERGE_ATTEMPTS the PATCH is refused and writes nothing
    const again = (n: number) => async () => {
      await change();
      if (n > 1) meanwhile(again(n - 1));
    };
    meanwhile(again(MAX_MERGE_ATTEMPTS));
    const refused = await mgmt('PATCH', `/cas/${id}`, { externalIdClaim: { index: 5 } });
    expect([...code(refused), refused.body.error.cause?.field]).toEqual([400, 'COULD_NOT_VALIDATE', 'externalIdClaim']);
    expect(changes).toBe(1 + MAX_MERGE_ATTEMPTS);
    expect(await claimNow()).toEqual({ ...claim, index: 0, matcher: 'PREFIX', matcherCriteria: `p${changes}-` });
    // fields other than the claim are written as given, merging nothing: no condition, no retry
    meanwhile(change);
    expect((await mgmt('PATCH', `/cas/${id}`, { isAuthEnabled: false })).status).toBe(200);
    expect((await mgmt('GET', `/cas/${id}`)).body.data).toMatchObject({ isAuthEnabled: false });
  });

  it('verify: a certificate of the CA whose CN is the token; 409 once verified; every wrong proof refused', async () => {
    const name = `ca-${++seq}`;
    const pem = makeCa(name);
    const id = (await mgmt('POST', '/cas', caBody(name, pem))).body.data.id;
    const token = (await mgmt('GET', `/cas/${id}`)).body.data.verificationToken;
    expect(code(await verify(id, 'not a certificate'))).toEqual([400, 'COULD_NOT_PARSE_PEM_BLOCK']);
    expect(code(await verify(id, issue(name, 'wrong-cn', 'someone')))).toEqual([400, 'INVALID_COMMON_NAME']);
    const other = `ca-${++seq}`;
    makeCa(other);
    expect(code(await verify(id, issue(other, 'wrong-ca', token)))).toEqual([400, 'CERT_FAILED_VALIDATION']);
    expect(code(await verify(id, issue(name, 'json', token), 'application/json'))).toEqual([415, 'UNSUPPORTED_MEDIA']);
    expect((await mgmt('GET', `/cas/${id}`)).body.data.isVerified).toBe(false);
    const ok = await verify(id, issue(name, 'proof', token));
    expect([ok.status, ok.body]).toEqual([200, { data: {}, meta: {} }]);
    const d = (await mgmt('GET', `/cas/${id}`)).body.data;
    expect(d.isVerified).toBe(true);
    expect(d.verificationToken).toBeUndefined();
    expect(code(await verify(id, issue(name, 'proof2', token)))).toEqual([409, 'CA_ALREADY_VERIFIED']);
    expect(code(await verify('nope', issue(name, 'proof3', token)))).toEqual([404, 'NOT_FOUND']);
  });

  it('GET /cas/{id}/jwt: the CA enrollment JWT, signed with the enrollment key', async () => {
    const name = `ca-${++seq}`;
    const id = (await mgmt('POST', '/cas', caBody(name, makeCa(name)))).body.data.id;
    const r = await call('GET', `${srv.mgmt}/cas/${id}/jwt`, { token: admin });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/jwt');
    const keys = (await call('GET', `${srv.client}/enroll/jwks`)).body.keys;
    const header = JSON.parse(Buffer.from(r.text.split('.')[0]!, 'base64url').toString());
    const key = keys.find((k: { kid: string }) => k.kid === header.kid);
    const { payload } = await jwtVerify(r.text, await importJWK(key, 'ES256'));
    expect(payload).toMatchObject({ em: 'ca', sub: id, iss: srv.base, ctrls: [srv.base] });
    expect(payload.exp).toBeUndefined();
    // signed on each request: in a cluster it names the members live then, this one first
    srv.ctl.svc.cluster = fakeClusterView('n2', () => [
      fakeMember('n1', true, ['https://n1.example:1280']),
      fakeMember('n2', true, [srv.base]),
      fakeMember('n3', false, ['https://n3.example:1280']),
    ]);
    try {
      const clustered = await call('GET', `${srv.mgmt}/cas/${id}/jwt`, { token: admin });
      expect(decodeJwt(clustered.text).ctrls).toEqual([srv.base, 'https://n1.example:1280']);
    } finally {
      srv.ctl.svc.cluster = null;
    }
    expect(code(await call('GET', `${srv.mgmt}/cas/nope/jwt`, { token: admin }))).toEqual([404, 'NOT_FOUND']);
  });

  it('ottca enrollments need a verified CA that allows them, and are deleted with the CA', async () => {
    const name = `ca-${++seq}`;
    const id = (await mgmt('POST', '/cas', caBody(name, makeCa(name)))).body.data.id;
    const identity = (enrollment?: object) =>
      mgmt('POST', '/identities', { name: `ottca-${++seq}`, type: 'Device', isAdmin: false, enrollment });
    const unverified = await identity({ ottca: id });
    expect([...code(unverified), unverified.body.error.cause.field]).toEqual([
      400,
      'COULD_NOT_VALIDATE',
      'enrollment.ottca',
    ]);
    const token = (await mgmt('GET', `/cas/${id}`)).body.data.verificationToken;
    expect((await verify(id, issue(name, 'proof', token))).status).toBe(200);
    const created = await identity({ ottca: id });
    expect(created.status).toBe(201);
    const detail = (await mgmt('GET', `/identities/${created.body.data.id}`)).body.data;
    expect(detail.enrollment.ottca).toMatchObject({ caId: id, ca: { id, name } });
    const plain = (await identity()).body.data.id;
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const e = await mgmt('POST', '/enrollments', { method: 'ottca', identityId: plain, caId: id, expiresAt });
    expect(e.status).toBe(201);
    expect((await mgmt('GET', `/enrollments/${e.body.data.id}`)).body.data.caId).toBe(id);
    // a CA that does not allow ottca enrollment
    expect((await mgmt('PATCH', `/cas/${id}`, { isOttCaEnrollmentEnabled: false })).status).toBe(200);
    const refused = await mgmt('POST', '/enrollments', {
      method: 'ottca',
      identityId: (await identity()).body.data.id,
      caId: id,
      expiresAt,
    });
    expect([...code(refused), refused.body.error.cause.field]).toEqual([400, 'COULD_NOT_VALIDATE', 'caId']);
    // deleting the CA deletes its outstanding enrollments
    expect((await mgmt('DELETE', `/cas/${id}`)).status).toBe(200);
    expect(code(await mgmt('GET', `/enrollments/${e.body.data.id}`))).toEqual([404, 'NOT_FOUND']);
    expect((await mgmt('GET', `/identities/${created.body.data.id}`)).body.data.enrollment).toEqual({});
  });
});

/** A certificate valid from `from_days` to `to_days` (from now), self-signed or signed by `issuer`; PEM and key. */
async function dated(
  cn: string,
  opts: {
    ca: boolean;
    from_days: number;
    to_days: number;
    issuer?: { cert: x509.X509Certificate; keys: CryptoKeyPair };
  },
) {
  const keys = await generateKeyPair();
  const now = Date.now();
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(opts.ca, undefined, true),
    new x509.KeyUsagesExtension(
      opts.ca ? x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign : x509.KeyUsageFlags.digitalSignature,
      true,
    ),
  ];
  if (!opts.ca) extensions.push(new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]));
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: `CN=${cn}`,
    issuer: opts.issuer ? opts.issuer.cert.subject : `CN=${cn}`,
    notBefore: new Date(now + opts.from_days * 86_400_000),
    notAfter: new Date(now + opts.to_days * 86_400_000),
    publicKey: keys.publicKey,
    signingKey: (opts.issuer?.keys ?? keys).privateKey,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions,
  });
  return { cert, keys, pem: cert.toString('pem'), keyPem: await exportKeyPem(keys.privateKey) };
}

describe('certificate login through a verified CA with isAuthEnabled (node engine, API TLS)', () => {
  let srv: TestServer;
  let ca: string;
  let admin: string;
  beforeAll(async () => {
    srv = await startServer({ engine: 'node', apiTls: true });
    ca = readFileSync(join(srv.dataDir, 'pki', 'ca.cert.pem'), 'utf8');
    const r = await tlsCall('POST', `${srv.mgmt}/authenticate?method=password`, {
      ca,
      body: { username: 'admin', password: 'admin-test-password' },
    });
    admin = r.headers['zt-session'] as string;
  });
  afterAll(() => srv.stop());

  it('a certificate of the CA registered as a cert authenticator logs in only while the CA is verified and auth-enabled', async () => {
    const mgmt = (method: string, path: string, body?: unknown) =>
      tlsCall(method, `${srv.mgmt}${path}`, { ca, token: admin, body });
    const name = `ca-${++seq}`;
    const caId = (await mgmt('POST', '/cas', caBody(name, makeCa(name)))).body.data.id;
    const identityId = (await mgmt('POST', '/identities', { name: `ext-${seq}`, type: 'Device', isAdmin: false })).body
      .data.id;
    const cert = issue(name, 'ext-leaf', 'ext-leaf');
    const key = s.read('ext-leaf.key');
    expect((await mgmt('POST', '/authenticators', { method: 'cert', identityId, certPem: cert })).status).toBe(201);
    const certLogin = () =>
      tlsCall('POST', `${srv.client}/authenticate?method=cert`, { ca, key, cert, body: {} }).then((r) => r.status);
    expect(await certLogin()).toBe(401); // not verified yet
    const token = (await mgmt('GET', `/cas/${caId}`)).body.data.verificationToken;
    const proof = issue(name, 'proof', token);
    const verified = await tlsCall('POST', `${srv.mgmt}/cas/${caId}/verify`, {
      ca,
      token: admin,
      raw: proof,
      type: 'text/plain',
    });
    expect(verified.status).toBe(200);
    expect(await certLogin()).toBe(200);
    expect((await mgmt('PATCH', `/cas/${caId}`, { isAuthEnabled: false })).status).toBe(200);
    expect(await certLogin()).toBe(401);
  });

  const mgmtTls = (method: string, path: string, body?: unknown) =>
    tlsCall(method, `${srv.mgmt}${path}`, { ca, token: admin, body });
  const verifyWith = (caId: string, pem: string) =>
    tlsCall('POST', `${srv.mgmt}/cas/${caId}/verify`, { ca, token: admin, raw: pem, type: 'text/plain' });

  it('an expired CA cannot be verified, even with a proof that is valid now', async () => {
    const root = await dated('expired-root', { ca: true, from_days: -30, to_days: -1 });
    const caId = (await mgmtTls('POST', '/cas', caBody('expired-root', root.pem))).body.data.id;
    const token = (await mgmtTls('GET', `/cas/${caId}`)).body.data.verificationToken;
    const proof = await dated(token, { ca: false, from_days: -1, to_days: 10, issuer: root });
    const r = await verifyWith(caId, proof.pem);
    expect([r.status, r.body.error?.code]).toEqual([400, 'CERT_FAILED_VALIDATION']);
  });

  it('an expired intermediate does not log in, though the default policy allows an expired leaf', async () => {
    const root = await dated('valid-root', { ca: true, from_days: -30, to_days: 30 });
    const inter = await dated('expired-inter', { ca: true, from_days: -30, to_days: -1, issuer: root });
    const leaf = await dated('inter-leaf', { ca: false, from_days: -1, to_days: 10, issuer: inter });
    const caId = (await mgmtTls('POST', '/cas', caBody('valid-root', root.pem))).body.data.id;
    const token = (await mgmtTls('GET', `/cas/${caId}`)).body.data.verificationToken;
    const proof = await dated(token, { ca: false, from_days: -1, to_days: 10, issuer: root });
    expect((await verifyWith(caId, proof.pem)).status).toBe(200);
    const identityId = (await mgmtTls('POST', '/identities', { name: 'inter-leaf', type: 'Device', isAdmin: false }))
      .body.data.id;
    const auth = await mgmtTls('POST', '/authenticators', { method: 'cert', identityId, certPem: leaf.pem });
    expect(auth.status, auth.text).toBe(201);
    const r = await tlsCall('POST', `${srv.client}/authenticate?method=cert`, {
      ca,
      key: leaf.keyPem,
      cert: `${leaf.pem}\n${inter.pem}\n`,
      body: {},
    });
    expect(r.status, r.text).toBe(401);
  });
});

describe('CA auto-enrollment identity names', () => {
  it('fills in every placeholder OpenZiti defines; other brackets stay', () => {
    const values = { caName: 'acme', caId: 'c1', commonName: 'dev-7', identityId: 'i9' };
    expect(formatIdentityName('[caName]-[commonName]', values)).toBe('acme-dev-7');
    expect(formatIdentityName('[caId]/[identityId]/[requestedName]/[other]', values)).toBe('c1/i9//[other]');
    // a CA updated with an empty format names by the default one
    expect(formatIdentityName('', values)).toBe('acme-dev-7');
  });
});
