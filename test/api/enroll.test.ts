/**
 * Enrollment end to end: an identity created with an `ott` enrollment enrolls with a CSR made by openssl (both
 * the spec's `POST /enroll/ott` and the legacy `POST /enroll?method=ott` with a PEM body), then logs in with the
 * issued certificate over mutual TLS; `updb` enrollment sets the initial password; every refusal has OpenZiti's
 * code. Every response goes through the spec check (`call()`, or `checkResponse` for the HTTPS requests).
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createLocalJWKSet, importJWK, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { OpDef } from '../../src/api/op.js';
import { loginGate } from '../../src/auth/rate-limit.js';
import { DEFAULT_AUTH_POLICY } from '../../src/model/auth-policy.js';
import { fingerprintOfDer } from '../../src/pki/fingerprint.js';
import { loadSigningCa, signCsr } from '../../src/pki/index.js';
import { openssl, opensslCa, opensslCsr, opensslFingerprint, opensslIssue, Scratch } from '../pki/helpers.js';
import { interceptNextWrite } from '../support/api.js';
import { fakeClusterView, fakeMember } from '../support/cluster-view.js';
import { uncoveredInOwnFile } from '../support/conformance.js';
import { expectOnlyService, grantDial, type Send } from '../support/grant.js';
import { whileSaturated } from '../support/saturate.js';
import { call, login, startServer, type TestServer } from '../support/server.js';
import { SPEC_AVAILABLE } from '../support/spec.js';
import { type TlsRes, tlsCall } from '../support/tls-call.js';

// counts the fingerprints computed (a cert login computes its certificate's once)
vi.mock('../../src/pki/fingerprint.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/pki/fingerprint.js')>();
  return { ...real, fingerprintOfDer: vi.fn(real.fingerprintOfDer) };
});

const s = new Scratch();
const opsServed: OpDef<unknown>[] = [];
afterAll(() => {
  s.remove();
  // every operation this file covers (COVERED_IN_OWN_FILES) had each success status checked against the spec
  const missing = uncoveredInOwnFile('test/api/enroll.test.ts', opsServed);
  if (SPEC_AVAILABLE) expect(missing).toEqual([]);
});

let seq = 0;

/** A new identity with one enrollment; returns its id and the enrollment's token and JWT. */
async function enrollee(srv: TestServer, token: string, enrollment: Record<string, unknown>) {
  const name = `enrollee-${++seq}`;
  const created = await call('POST', `${srv.mgmt}/identities`, {
    token,
    body: { name, type: 'Device', isAdmin: false, enrollment },
  });
  expect(created.status).toBe(201);
  const id = created.body.data.id as string;
  const detail = await call('GET', `${srv.mgmt}/identities/${id}`, { token });
  const [e] = Object.values(detail.body.data.enrollment) as { token: string; jwt: string }[];
  return { id, name, token: e!.token, jwt: e!.jwt };
}

async function authenticatorsOf(srv: TestServer, token: string, identityId: string) {
  return (await call('GET', `${srv.mgmt}/identities/${identityId}/authenticators`, { token })).body.data as {
    method: string;
    fingerprint?: string;
    isIssuedByNetwork: boolean;
    certPem?: string;
  }[];
}

/** A self-signed clientAuth certificate of a new key, by openssl: `<name>.key`, `<name>.pem` in the scratch dir. */
function selfSigned(name: string): void {
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', s.path(`${name}.key`)];
  const cert = ['-days', '1', '-subj', `/CN=${name}`, '-out', s.path(`${name}.pem`)];
  openssl(['req', '-x509', ...key, ...cert, '-addext', 'extendedKeyUsage=clientAuth']);
}

const csr = () => opensslCsr(s, `c${++seq}`, 'ec', '/CN=x');

describe.each(['uws', 'node'] as const)('enrollment on the %s engine', (engine) => {
  let srv: TestServer;
  let admin: string;
  let offset_ms = 0;
  beforeAll(async () => {
    srv = await startServer({ engine, clock: { now: () => Date.now() + offset_ms } });
    admin = await login(srv.base);
  });
  afterAll(async () => {
    if (opsServed.length === 0) opsServed.push(...srv.ctl.ops);
    await srv.stop();
  });

  it('ott: POST /enroll/ott signs the CSR, gives the identity a network-issued cert authenticator, uses the token up', async () => {
    const e = await enrollee(srv, admin, { ott: true });
    const r = await call('POST', `${srv.client}/enroll/ott`, { body: { token: e.token, clientCsr: csr() } });
    expect(r.status).toBe(200);
    const { cert, ca } = r.body.data;
    // the chain verifies against the CAs the answer names, and is the one the well-known bundle serves
    s.write('ca.pem', ca);
    s.write('chain.pem', cert);
    const verified = openssl(['verify', '-CAfile', s.path('ca.pem'), '-purpose', 'sslclient', s.path('chain.pem')]);
    expect(verified.stdout.trim()).toBe(`${s.path('chain.pem')}: OK`);
    expect(openssl(['x509', '-noout', '-subject', '-in', s.path('chain.pem')]).stdout.trim()).toBe(
      `subject=CN = ${e.id}`,
    );
    const [auth] = await authenticatorsOf(srv, admin, e.id);
    expect(auth).toMatchObject({ method: 'cert', isIssuedByNetwork: true });
    expect(auth!.fingerprint).toBe(opensslFingerprint(s, cert));
    const detail = await call('GET', `${srv.mgmt}/identities/${e.id}`, { token: admin });
    expect(detail.body.data.enrollment).toEqual({});
    // single use
    const again = await call('POST', `${srv.client}/enroll/ott`, { body: { token: e.token, clientCsr: csr() } });
    expect([again.status, again.body.error.code]).toEqual([400, 'INVALID_ENROLLMENT_TOKEN']);
    expect(await authenticatorsOf(srv, admin, e.id)).toHaveLength(1);
  });

  it('a token replaced (refresh) while its enrollment is checked enrolls nothing; the new one does', async () => {
    const e = await enrollee(srv, admin, { ott: true });
    const [row] = (await call('GET', `${srv.mgmt}/identities/${e.id}/enrollments`, { token: admin })).body.data;
    let fresh = '';
    interceptNextWrite(srv.ctl.svc)(async () => {
      const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
      const r = await call('POST', `${srv.mgmt}/enrollments/${row.id}/refresh`, { token: admin, body: { expiresAt } });
      expect(r.status, r.text).toBe(200);
      fresh = (await call('GET', `${srv.mgmt}/enrollments/${row.id}`, { token: admin })).body.data.token;
    });
    const stale = await call('POST', `${srv.client}/enroll/ott`, { body: { token: e.token, clientCsr: csr() } });
    expect([stale.status, stale.body.error.code, stale.body.error.cause]).toEqual([
      400,
      'INVALID_ENROLLMENT_TOKEN',
      undefined,
    ]);
    expect(stale.text).not.toContain(e.token);
    expect(stale.text).not.toContain(fresh);
    expect(await authenticatorsOf(srv, admin, e.id)).toEqual([]);
    const r = await call('POST', `${srv.client}/enroll/ott`, { body: { token: fresh, clientCsr: csr() } });
    expect(r.status, r.text).toBe(200);
  });

  it('legacy POST /enroll?method=ott: a PEM body, a PEM answer (JSON when Accept asks for it)', async () => {
    const e1 = await enrollee(srv, admin, { ott: true });
    const pem = await fetch(`${srv.client}/enroll?method=ott&token=${e1.token}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-pem-file' },
      body: csr(),
    });
    expect(pem.status).toBe(200);
    expect(pem.headers.get('content-type')).toBe('application/x-pem-file');
    const text = await pem.text();
    expect(text.startsWith('-----BEGIN CERTIFICATE-----')).toBe(true);
    const [auth] = await authenticatorsOf(srv, admin, e1.id);
    expect(auth!.fingerprint).toBe(opensslFingerprint(s, text));

    const e2 = await enrollee(srv, admin, { ott: true });
    const json = await call('POST', `${srv.client}/enroll?method=ott&token=${e2.token}`, {
      raw: csr(),
      headers: { 'content-type': 'text/plain', accept: 'application/json' },
    });
    expect(json.status).toBe(200);
    expect(json.body.data.cert).toContain('-----BEGIN CERTIFICATE-----');
    expect(json.body.data.ca).toContain('-----BEGIN CERTIFICATE-----');
  });

  it('refusals: unknown token, wrong method, malformed or missing CSR (token kept), bad media type, expiry', async () => {
    const e = await enrollee(srv, admin, { ott: true });
    const code = (r: { status: number; body: any }) => [r.status, r.body?.error?.code];
    const ott = (body: unknown) => call('POST', `${srv.client}/enroll/ott`, { body });
    expect(code(await ott({ token: '2f1b7a64-31f4-4bd0-9b5e-4c0e0f2b3a11', clientCsr: csr() }))).toEqual([
      400,
      'INVALID_ENROLLMENT_TOKEN',
    ]);
    expect(code(await ott({ token: 'x'.repeat(65), clientCsr: csr() }))).toEqual([400, 'INVALID_ENROLLMENT_TOKEN']);
    expect(code(await ott({ clientCsr: csr() }))).toEqual([400, 'INVALID_ENROLLMENT_TOKEN']);
    expect(code(await ott({ token: e.token, clientCsr: 'not a csr' }))).toEqual([400, 'COULD_NOT_PROCESS_CSR']);
    expect(code(await ott({ token: e.token }))).toEqual([400, 'MISSING_OR_INVALID_CSR']);
    expect(code(await ott({ token: e.token, clientCsr: 7 }))).toEqual([400, 'COULD_NOT_VALIDATE']);
    // a CSR asking for a CA certificate is refused too
    const caCsr = opensslCsr(s, 'ca-req', 'ec', '/CN=x', ['-addext', 'basicConstraints=critical,CA:TRUE']);
    expect(code(await ott({ token: e.token, clientCsr: caCsr }))).toEqual([400, 'COULD_NOT_PROCESS_CSR']);
    const u = await enrollee(srv, admin, { updb: `user-${++seq}` });
    expect(code(await ott({ token: u.token, clientCsr: csr() }))).toEqual([400, 'INVALID_ENROLL_METHOD']);
    const legacy = (query: string, headers: Record<string, string>, raw: string) =>
      call('POST', `${srv.client}/enroll?${query}`, { raw, headers });
    expect(code(await legacy(`method=bogus&token=${e.token}`, { 'content-type': 'text/plain' }, csr()))).toEqual([
      400,
      'INVALID_ENROLL_METHOD',
    ]);
    expect(code(await legacy(`token=${e.token}`, { 'content-type': 'text/plain' }, csr()))).toEqual([
      400,
      'INVALID_ENROLL_METHOD',
    ]);
    expect(code(await legacy(`method=ott&token=${e.token}`, { 'content-type': 'image/png' }, csr()))).toEqual([
      415,
      'UNSUPPORTED_MEDIA',
    ]);
    expect(code(await legacy(`method=ott&token=${e.token}`, { 'content-type': 'text/plain' }, ''))).toEqual([
      400,
      'MISSING_OR_INVALID_CSR',
    ]);
    // none of these used the token up
    expect(await authenticatorsOf(srv, admin, e.id)).toEqual([]);
    // past the enrollment window (180 minutes)
    offset_ms = 181 * 60 * 1000;
    try {
      expect(code(await ott({ token: e.token, clientCsr: csr() }))).toEqual([400, 'ENROLLMENT_EXPIRED']);
    } finally {
      offset_ms = 0;
    }
    expect((await ott({ token: e.token, clientCsr: csr() })).status).toBe(200);
  });

  it('409: the identity already has a cert authenticator; a node without the signing CA cannot issue', async () => {
    const e = await enrollee(srv, admin, { ott: true });
    selfSigned('other');
    const added = await call('POST', `${srv.mgmt}/authenticators`, {
      token: admin,
      body: { method: 'cert', identityId: e.id, certPem: s.read('other.pem') },
    });
    expect(added.status).toBe(201);
    const ott = () => call('POST', `${srv.client}/enroll/ott`, { body: { token: e.token, clientCsr: csr() } });
    const dup = await ott();
    expect([dup.status, dup.body.error.code]).toEqual([409, 'MAX_AUTHENTICATOR_METHODS_REACHED']);
    // nothing was half-applied: the enrollment is still there, the identity has one authenticator
    const detail = await call('GET', `${srv.mgmt}/identities/${e.id}`, { token: admin });
    expect(detail.body.data.enrollment.ott.token).toBe(e.token);
    expect(await authenticatorsOf(srv, admin, e.id)).toHaveLength(1);
    await call('DELETE', `${srv.mgmt}/authenticators/${added.body.data.id}`, { token: admin });
    // a node set up from a join bundle holds no signing CA key
    const pki = srv.ctl.svc.pki!;
    srv.ctl.svc.pki = { ...pki, signing: null };
    try {
      const refused = await ott();
      expect([refused.status, refused.body.error.code]).toEqual([409, 'INVALID_ENROLLMENT_NOT_ALLOWED']);
    } finally {
      srv.ctl.svc.pki = pki;
    }
    expect((await ott()).status).toBe(200);
  });

  it('updb: sets the initial password of the enrollment username, then password login works; single use', async () => {
    const username = `updb-user-${++seq}`;
    const e = await enrollee(srv, admin, { updb: username });
    const updb = (token: string, body: unknown) => call('POST', `${srv.client}/enroll/updb?token=${token}`, { body });
    expect((await updb(e.token, { password: 'abc' })).body.error.code).toBe('COULD_NOT_VALIDATE');
    const wrongUser = await updb(e.token, { username: 'someone-else', password: 'updb-pass-1' });
    expect([wrongUser.status, wrongUser.body.error.code, wrongUser.body.error.cause.field]).toEqual([
      400,
      'COULD_NOT_VALIDATE',
      'username',
    ]);
    const ok = await updb(e.token, { password: 'updb-pass-1' });
    expect([ok.status, ok.body]).toEqual([200, { data: {}, meta: {} }]);
    const session = await login(srv.base, username, 'updb-pass-1');
    const me = await call('GET', `${srv.client}/current-identity`, { token: session });
    expect(me.body.data.id).toBe(e.id);
    const granted = await grantDial(call, srv.mgmt, admin, `@${e.id}`);
    await expectOnlyService(call, srv.client, session, granted);
    expect((await updb(e.token, { password: 'updb-pass-2' })).body.error.code).toBe('INVALID_ENROLLMENT_TOKEN');
    // the legacy form with a JSON body
    const name2 = `updb-user-${++seq}`;
    const e2 = await enrollee(srv, admin, { updb: name2 });
    const legacy = await call('POST', `${srv.client}/enroll?method=updb&token=${e2.token}`, {
      body: { password: 'updb-pass-3' },
    });
    expect(legacy.status).toBe(200);
    expect(await login(srv.base, name2, 'updb-pass-3')).toBeTruthy();
    // an ott token is not a updb one
    const o = await enrollee(srv, admin, { ott: true });
    expect((await updb(o.token, { password: 'updb-pass-4' })).body.error.code).toBe('INVALID_ENROLL_METHOD');
  });

  it('GET /enroll/jwks: the key that signs enrollment JWTs', async () => {
    const e = await enrollee(srv, admin, { ott: true });
    const r = await call('GET', `${srv.client}/enroll/jwks`);
    expect(r.status).toBe(200);
    const header = JSON.parse(Buffer.from(e.jwt.split('.')[0]!, 'base64url').toString());
    const key = r.body.keys.find((k: { kid: string }) => k.kid === header.kid);
    expect(key).toBeDefined();
    expect(key.d).toBeUndefined(); // public only
    const { payload } = await jwtVerify(e.jwt, await importJWK(key, 'ES256'));
    expect(payload.jti).toBe(e.token);
  });
});

describe('cert authentication over mutual TLS (node engine, API TLS)', () => {
  let srv: TestServer;
  let ca: string;
  let admin: string;
  const mgmt = () => `${srv.base}/edge/management/v1`;
  const client = () => `${srv.base}/edge/client/v1`;
  const certLogin = (key?: string, cert?: string) =>
    tlsCall('POST', `${client()}/authenticate?method=cert`, { ca, key, cert, body: {} });
  const send: Send = (method, url, opts) => tlsCall(method, url, { ca, ...opts });

  let certClockOffset_ms = 0;
  beforeAll(async () => {
    srv = await startServer({ engine: 'node', apiTls: true, clock: { now: () => Date.now() + certClockOffset_ms } });
    // the trust anchor a client bootstraps (the root in /.well-known/est/cacerts)
    ca = readFileSync(join(srv.dataDir, 'pki', 'ca.cert.pem'), 'utf8');
    const r = await tlsCall('POST', `${mgmt()}/authenticate?method=password`, {
      ca,
      body: { username: 'admin', password: 'admin-test-password' },
    });
    admin = r.headers['zt-session'] as string;
  });
  afterAll(() => srv.stop());

  /** Enrolls a new ott identity over HTTPS with an openssl key; returns its id, key and certificate chain. */
  async function enrolled(): Promise<{ id: string; name: string; key: string; cert: string }> {
    const name = `mtls-${++seq}`;
    const created = await tlsCall('POST', `${mgmt()}/identities`, {
      ca,
      token: admin,
      body: { name, type: 'Device', isAdmin: false, enrollment: { ott: true } },
    });
    const id = created.body.data.id as string;
    const detail = await tlsCall('GET', `${mgmt()}/identities/${id}`, { ca, token: admin });
    const token = detail.body.data.enrollment.ott.token as string;
    const base = `k${++seq}`;
    const clientCsr = opensslCsr(s, base, 'ec', '/CN=x');
    const r = await tlsCall('POST', `${client()}/enroll/ott`, { ca, body: { token, clientCsr } });
    expect(r.status).toBe(200);
    return { id, name, key: s.read(`${base}.key`), cert: r.body.data.cert };
  }

  it('logs in with the issued certificate and reads the current identity; the session works like a password one', async () => {
    const me = await enrolled();
    const r = await certLogin(me.key, me.cert);
    expect(r.status).toBe(200);
    const session = r.headers['zt-session'] as string;
    expect(session).toBe(r.body.data.token);
    const current = await tlsCall('GET', `${client()}/current-identity`, { ca, token: session });
    expect([current.status, current.body.data.id, current.body.data.name]).toEqual([200, me.id, me.name]);
    const granted = await grantDial(send, mgmt(), admin, `@${me.id}`);
    await expectOnlyService(send, client(), session, granted);
    // the session needs no client certificate afterwards, and names the cert authenticator
    const [auth] = (await tlsCall('GET', `${mgmt()}/identities/${me.id}/authenticators`, { ca, token: admin })).body
      .data;
    const apiSession = await tlsCall('GET', `${client()}/current-api-session`, { ca, token: session });
    expect(apiSession.body.data.authenticatorId).toBe(auth.id);
    // the leaf alone (without the signing CA the chain carries) is enough: the controller knows its CAs
    const leafOnly = me.cert.slice(0, me.cert.indexOf('-----END CERTIFICATE-----') + 25);
    expect((await certLogin(me.key, leafOnly)).status).toBe(200);
  });

  it('goes through the auth rate limiter: 429 SERVER_TOO_MANY_REQUESTS with Retry-After when its lane is full', async () => {
    const me = await enrolled();
    await whileSaturated(loginGate, async () => {
      const r = await certLogin(me.key, me.cert);
      expect([r.status, r.body.error?.code], r.text).toEqual([429, 'SERVER_TOO_MANY_REQUESTS']);
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    });
    expect((await certLogin(me.key, me.cert)).status).toBe(200);
  });

  it('fingerprints the client certificate once per login (rate-limit lane, session-certificate lookup, login)', async () => {
    const me = await enrolled();
    const leaf = new X509Certificate(me.cert).raw;
    expect((await certLogin(me.key, me.cert)).status).toBe(200);
    const fingerprints = vi.mocked(fingerprintOfDer);
    fingerprints.mockClear();
    expect((await certLogin(me.key, me.cert)).status).toBe(200);
    expect(fingerprints.mock.calls.filter(([der]) => der.equals(leaf))).toHaveLength(1);
  });

  it("follows the identity's auth policy: primary.cert.allowed false refuses, allowExpiredCerts decides an expired certificate", async () => {
    const code = (r: TlsRes) => [r.status, r.body?.error?.code];
    const policyWith = async (name: string, cert: { allowed: boolean; allowExpiredCerts: boolean }) => {
      const base = structuredClone(DEFAULT_AUTH_POLICY);
      const body = { ...base, name, primary: { ...base.primary, cert } };
      const r = await tlsCall('POST', `${mgmt()}/auth-policies`, { ca, token: admin, body });
      expect(r.status, r.text).toBe(201);
      return r.body.data.id as string;
    };
    const withPolicy = async (policyId: string) => {
      const me = await enrolled();
      const r = await tlsCall('PATCH', `${mgmt()}/identities/${me.id}`, {
        ca,
        token: admin,
        body: { authPolicyId: policyId },
      });
      expect(r.status, r.text).toBe(200);
      return me;
    };
    const noCert = await withPolicy(await policyWith('cert-refused', { allowed: false, allowExpiredCerts: true }));
    const strict = await withPolicy(await policyWith('cert-unexpired', { allowed: true, allowExpiredCerts: false }));
    const lax = await withPolicy(await policyWith('cert-expired-ok', { allowed: true, allowExpiredCerts: true }));
    expect(code(await certLogin(noCert.key, noCert.cert))).toEqual([401, 'INVALID_AUTH']);
    expect((await certLogin(strict.key, strict.cert)).status).toBe(200);
    expect((await certLogin(lax.key, lax.cert)).status).toBe(200);
    // the controller's clock past the issued certificates' end (they last a year)
    certClockOffset_ms = 400 * 24 * 60 * 60 * 1000;
    try {
      expect(code(await certLogin(strict.key, strict.cert))).toEqual([401, 'INVALID_AUTH']);
      expect((await certLogin(lax.key, lax.cert)).status).toBe(200);
      expect(code(await certLogin(noCert.key, noCert.cert))).toEqual([401, 'INVALID_AUTH']);
    } finally {
      certClockOffset_ms = 0;
    }
  });

  it('refuses with 401 INVALID_AUTH: no certificate, a foreign one, one of this CA with no authenticator, a removed authenticator, a disabled identity', async () => {
    const code = (r: TlsRes) => [r.status, r.body?.error?.code];
    expect(code(await certLogin())).toEqual([401, 'INVALID_AUTH']);
    // self-signed by someone else
    selfSigned('stranger');
    expect(code(await certLogin(s.read('stranger.key'), s.read('stranger.pem')))).toEqual([401, 'INVALID_AUTH']);
    // a foreign certificate registered by an admin as a cert authenticator still does not chain to the CAs
    const stranger = await tlsCall('POST', `${mgmt()}/identities`, {
      ca,
      token: admin,
      body: { name: `stranger-${++seq}`, type: 'Device', isAdmin: false },
    });
    const registered = await tlsCall('POST', `${mgmt()}/authenticators`, {
      ca,
      token: admin,
      body: { method: 'cert', identityId: stranger.body.data.id, certPem: s.read('stranger.pem') },
    });
    expect(registered.status).toBe(201);
    expect(code(await certLogin(s.read('stranger.key'), s.read('stranger.pem')))).toEqual([401, 'INVALID_AUTH']);
    // issued by this controller's signing CA but belonging to no authenticator
    const signing = await loadSigningCa(join(srv.dataDir, 'pki'));
    const orphanCsr = opensslCsr(s, 'orphan', 'ec', '/CN=orphan');
    const orphan = await signCsr(signing, orphanCsr, { usage: 'client' });
    expect(code(await certLogin(s.read('orphan.key'), orphan))).toEqual([401, 'INVALID_AUTH']);
    // the authenticator removed
    const me = await enrolled();
    expect((await certLogin(me.key, me.cert)).status).toBe(200);
    const [auth] = (await tlsCall('GET', `${mgmt()}/identities/${me.id}/authenticators`, { ca, token: admin })).body
      .data;
    expect((await tlsCall('DELETE', `${mgmt()}/authenticators/${auth.id}`, { ca, token: admin })).status).toBe(200);
    expect(code(await certLogin(me.key, me.cert))).toEqual([401, 'INVALID_AUTH']);
    // the identity disabled
    const other = await enrolled();
    expect((await certLogin(other.key, other.cert)).status).toBe(200);
    const at = srv.ctl.svc.nowIso();
    await srv.ctl.svc.write({
      op: 'update',
      entity: 'identities',
      id: other.id,
      set: { disabledAt: at },
      at,
      system: true,
    });
    expect(code(await certLogin(other.key, other.cert))).toEqual([401, 'INVALID_AUTH']);
    // a certificate for server use only is not a client certificate
    const serverOnly = await signCsr(signing, opensslCsr(s, 'srvonly', 'ec', '/CN=s'), { usage: 'server' });
    expect(code(await certLogin(s.read('srvonly.key'), serverOnly))).toEqual([401, 'INVALID_AUTH']);
  });

  it('ottca: enrolls with a certificate of a verified CA presented over TLS; the CA deleted takes the authenticator along', async () => {
    const mg = (method: string, path: string, body?: unknown) =>
      tlsCall(method, `${mgmt()}${path}`, { ca, token: admin, body });
    const caName = `ext-ca-${++seq}`;
    const caPem = opensslCa(s, caName);
    const caBody = {
      name: caName,
      certPem: caPem,
      isAutoCaEnrollmentEnabled: false,
      isOttCaEnrollmentEnabled: true,
      isAuthEnabled: true,
      identityRoles: [],
    };
    const caId = (await mg('POST', '/cas', caBody)).body.data.id;
    const verificationToken = (await mg('GET', `/cas/${caId}`)).body.data.verificationToken;
    const proof = opensslIssue(s, caName, 'ca-proof', verificationToken);
    const verified = await tlsCall('POST', `${mgmt()}/cas/${caId}/verify`, { ca, token: admin, raw: proof });
    expect(verified.status).toBe(200);
    const identityId = (
      await mg('POST', '/identities', {
        name: `ottca-${++seq}`,
        type: 'Device',
        isAdmin: false,
        enrollment: { ottca: caId },
      })
    ).body.data.id;
    const token = (await mg('GET', `/identities/${identityId}`)).body.data.enrollment.ottca.token;
    const cert = opensslIssue(s, caName, 'ottca-leaf', 'device');
    const key = s.read('ottca-leaf.key');
    const enroll = (k?: string, c?: string) =>
      tlsCall('POST', `${client()}/enroll/ottca`, { ca, key: k, cert: c, body: { token } });
    const code = (r: TlsRes) => [r.status, r.body?.error?.code];
    // no certificate, or one of another CA (this controller's own)
    expect(code(await enroll())).toEqual([400, 'CERT_FAILED_VALIDATION']);
    const other = await enrolled();
    expect(code(await enroll(other.key, other.cert))).toEqual([400, 'CERT_FAILED_VALIDATION']);
    // a CA that stopped allowing OTT CA enrollment
    expect((await mg('PATCH', `/cas/${caId}`, { isOttCaEnrollmentEnabled: false })).status).toBe(200);
    expect(code(await enroll(key, cert))).toEqual([400, 'ENROLLMENT_CA_NOT_VALID']);
    expect((await mg('PATCH', `/cas/${caId}`, { isOttCaEnrollmentEnabled: true })).status).toBe(200);
    const ok = await enroll(key, cert);
    expect([ok.status, ok.body]).toEqual([200, { data: {}, meta: {} }]);
    expect(code(await enroll(key, cert))).toEqual([400, 'INVALID_ENROLLMENT_TOKEN']);
    // the legacy form reaches the same enrollment (used up by now)
    const legacy = await tlsCall('POST', `${client()}/enroll?method=ottca&token=${token}`, { ca, key, cert });
    expect(code(legacy)).toEqual([400, 'INVALID_ENROLLMENT_TOKEN']);
    const [auth] = (await mg('GET', `/identities/${identityId}/authenticators`)).body.data;
    expect(auth).toMatchObject({ method: 'cert', isIssuedByNetwork: false, fingerprint: opensslFingerprint(s, cert) });
    // the CA allows authentication: the enrolled certificate logs in
    const login = await certLogin(key, cert);
    expect([login.status, login.body.data.identityId]).toEqual([200, identityId]);
    const granted = await grantDial(send, mgmt(), admin, `@${identityId}`);
    await expectOnlyService(send, client(), login.headers['zt-session'] as string, granted);
    // deleting the CA removes the authenticator enrolled through it
    expect((await mg('DELETE', `/cas/${caId}`)).status).toBe(200);
    expect((await mg('GET', `/authenticators/${auth.id}`)).status).toBe(404);
    expect(code(await certLogin(key, cert))).toEqual([401, 'INVALID_AUTH']);
  });

  const mg = (method: string, path: string, body?: unknown) =>
    tlsCall(method, `${mgmt()}${path}`, { ca, token: admin, body });
  /** A CA (made by openssl, named `caName`) that auto-enrolls, not verified yet; its id. */
  async function autoEnrollingCa(caName: string, extra: Record<string, unknown>): Promise<string> {
    const caBody = {
      name: caName,
      certPem: opensslCa(s, caName),
      isAutoCaEnrollmentEnabled: true,
      isOttCaEnrollmentEnabled: false,
      isAuthEnabled: true,
      ...extra,
    };
    const created = await mg('POST', '/cas', caBody);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return created.body.data.id;
  }
  /** Verifies CA `caId` with a certificate it issued whose CN is its verification token. */
  async function verifyCa(caName: string, caId: string): Promise<void> {
    const verificationToken = (await mg('GET', `/cas/${caId}`)).body.data.verificationToken;
    const proof = opensslIssue(s, caName, `${caName}-proof`, verificationToken);
    expect((await tlsCall('POST', `${mgmt()}/cas/${caId}/verify`, { ca, token: admin, raw: proof })).status).toBe(200);
  }

  it('CA auto-enrollment: a certificate of a verified CA with auto-enrollment creates an identity that logs in with it', async () => {
    const caName = `auto-ca-${++seq}`;
    const caId = await autoEnrollingCa(caName, { identityRoles: ['auto', 'sensors'] });
    // granted by an attribute the CA gives the identities it creates
    const granted = await grantDial(send, mgmt(), admin, '#sensors');
    const cert = opensslIssue(s, caName, 'auto-1', 'sensor-1');
    const key = s.read('auto-1.key');
    const enroll = (k?: string, c?: string) => tlsCall('POST', `${client()}/enroll/ca`, { ca, key: k, cert: c });
    const code = (r: TlsRes) => [r.status, r.body?.error?.code];
    // the CA is not verified yet
    expect(code(await enroll(key, cert))).toEqual([400, 'ENROLLMENT_NO_VALID_CAS']);
    await verifyCa(caName, caId);
    expect(code(await enroll())).toEqual([400, 'CERT_FAILED_VALIDATION']);
    const ok = await enroll(key, cert);
    expect([ok.status, ok.body]).toEqual([200, { data: {}, meta: {} }]);
    const filter = encodeURIComponent(`name="${caName}-sensor-1"`);
    const [created] = (await mg('GET', `/identities?filter=${filter}`)).body.data;
    expect(created.roleAttributes).toEqual(['auto', 'sensors']);
    const [auth] = (await mg('GET', `/identities/${created.id}/authenticators`)).body.data;
    expect(auth).toMatchObject({ method: 'cert', isIssuedByNetwork: false, fingerprint: opensslFingerprint(s, cert) });
    const session = (await certLogin(key, cert)).headers['zt-session'] as string;
    const me = await tlsCall('GET', `${client()}/current-identity`, { ca, token: session });
    expect(me.body.data.name).toBe(`${caName}-sensor-1`);
    await expectOnlyService(send, client(), session, granted);
    // the same certificate again
    expect(code(await enroll(key, cert))).toEqual([409, 'CERT_IN_USE']);
    // another certificate with the same common name gets a numbered name (the legacy form here)
    const second = opensslIssue(s, caName, 'auto-2', 'sensor-1');
    const legacy = await tlsCall('POST', `${client()}/enroll?method=ca`, {
      ca,
      key: s.read('auto-2.key'),
      cert: second,
    });
    expect(legacy.status).toBe(200);
    const numbered = encodeURIComponent(`name="${caName}-sensor-1000001"`);
    expect((await mg('GET', `/identities?filter=${numbered}`)).body.data).toHaveLength(1);
    // a CA that does not auto-enroll: this controller's own certificates, or the CA with it turned off
    const signing = await loadSigningCa(join(srv.dataDir, 'pki'));
    const own = await signCsr(signing, opensslCsr(s, 'own-ca', 'ec', '/CN=own'), { usage: 'client' });
    expect(code(await enroll(s.read('own-ca.key'), own))).toEqual([400, 'ENROLLMENT_NO_VALID_CAS']);
    expect((await mg('PATCH', `/cas/${caId}`, { isAutoCaEnrollmentEnabled: false })).status).toBe(200);
    const third = opensslIssue(s, caName, 'auto-3', 'sensor-3');
    expect(code(await enroll(s.read('auto-3.key'), third))).toEqual([400, 'ENROLLMENT_NO_VALID_CAS']);
  });

  it("CA auto-enrollment: [requestedName] is the body's name (sdk-golang --idname), else the identity id", async () => {
    const caName = `named-ca-${++seq}`;
    const caId = await autoEnrollingCa(caName, { identityNameFormat: 'dev-[requestedName]', identityRoles: [] });
    await verifyCa(caName, caId);
    const named = opensslIssue(s, caName, 'named-1', 'cn-1');
    const r = await tlsCall('POST', `${client()}/enroll/ca`, {
      ca,
      key: s.read('named-1.key'),
      cert: named,
      body: { name: 'kitchen-sensor' },
    });
    expect(r.status, r.text).toBe(200);
    const byName = encodeURIComponent('name="dev-kitchen-sensor"');
    expect((await mg('GET', `/identities?filter=${byName}`)).body.data).toHaveLength(1);
    // no name asked for (the legacy form, no body): the identity's own id
    const unnamed = opensslIssue(s, caName, 'named-2', 'cn-2');
    const legacy = await tlsCall('POST', `${client()}/enroll?method=ca`, {
      ca,
      key: s.read('named-2.key'),
      cert: unnamed,
    });
    expect(legacy.status, legacy.text).toBe(200);
    const fp = opensslFingerprint(s, unnamed);
    const auth = (await mg('GET', `/authenticators?filter=${encodeURIComponent(`fingerprint="${fp}"`)}`)).body.data[0];
    const identity = (await mg('GET', `/identities/${auth.identityId}`)).body.data;
    expect(identity.name).toBe(`dev-${identity.id}`);
  });

  it('CA auto-enrollment racing: the name is chosen, and the CA checked, where the write applies', async () => {
    const caName = `raced-ca-${++seq}`;
    const caId = await autoEnrollingCa(caName, { identityRoles: [], identityNameFormat: '[caName]' });
    await verifyCa(caName, caId);
    const device = (n: number) => {
      const cert = opensslIssue(s, caName, `raced-${n}`, `device-${n}`);
      return () => tlsCall('POST', `${client()}/enroll/ca`, { ca, key: s.read(`raced-${n}.key`), cert });
    };
    // two devices whose identity names format alike enroll at once: both checked the name free, both get one
    const meanwhile = interceptNextWrite(srv.ctl.svc);
    let first: TlsRes | undefined;
    meanwhile(async () => {
      first = await device(1)();
    });
    const second = await device(2)();
    expect([first?.status, second.status]).toEqual([200, 200]);
    const names = async () =>
      (await mg('GET', `/identities?filter=${encodeURIComponent(`name contains "${caName}"`)}`)).body.data
        .map((i: { name: string }) => i.name)
        .sort();
    expect(await names()).toEqual([caName, `${caName}000001`]);
    // the CA stops auto-enrolling after a device's check: nothing is created
    interceptNextWrite(srv.ctl.svc)(() => mg('PATCH', `/cas/${caId}`, { isAutoCaEnrollmentEnabled: false }));
    const late = await device(3)();
    expect([late.status, late.body.error.code, late.body.error.cause]).toEqual([
      400,
      'ENROLLMENT_NO_VALID_CAS',
      undefined,
    ]);
    expect(await names()).toEqual([caName, `${caName}000001`]);

    // OTT CA enrollment: the CA stops allowing it after the check: refused as the check would, the token kept
    expect((await mg('PATCH', `/cas/${caId}`, { isOttCaEnrollmentEnabled: true })).status).toBe(200);
    const identityId = (
      await mg('POST', '/identities', {
        name: `raced-ottca-${++seq}`,
        type: 'Device',
        isAdmin: false,
        enrollment: { ottca: caId },
      })
    ).body.data.id;
    const token = (await mg('GET', `/identities/${identityId}`)).body.data.enrollment.ottca.token;
    const cert = opensslIssue(s, caName, 'raced-ottca', 'ottca-device');
    const enroll = () =>
      tlsCall('POST', `${client()}/enroll/ottca`, { ca, key: s.read('raced-ottca.key'), cert, body: { token } });
    interceptNextWrite(srv.ctl.svc)(() => mg('PATCH', `/cas/${caId}`, { isOttCaEnrollmentEnabled: false }));
    const refused = await enroll();
    expect([refused.status, refused.body.error.code, refused.body.error.cause]).toEqual([
      400,
      'ENROLLMENT_CA_NOT_VALID',
      undefined,
    ]);
    expect((await mg('GET', `/identities/${identityId}/authenticators`)).body.data).toEqual([]);
    expect((await mg('PATCH', `/cas/${caId}`, { isOttCaEnrollmentEnabled: true })).status).toBe(200);
    expect((await enroll()).status).toBe(200);
  });

  it('extend with a certificate replaced while the request was checked: refused, nothing pending', async () => {
    const me = await enrolled();
    const session = (await certLogin(me.key, me.cert)).headers['zt-session'] as string;
    const [auth] = (await tlsCall('GET', `${mgmt()}/identities/${me.id}/authenticators`, { ca, token: admin })).body
      .data;
    const url = (step: string) => `${client()}/current-identity/authenticators/${auth.id}/${step}`;
    const extend = (name: string, held: { key: string; cert: string }) =>
      tlsCall('POST', url('extend'), {
        ca,
        token: session,
        ...held,
        body: { clientCertCsr: opensslCsr(s, name, 'ec', '/CN=x') },
      });
    // the owner rolls its key (extend and verify) while a request showing the old certificate is checked
    const rolled = `rolled-away-${++seq}`;
    interceptNextWrite(srv.ctl.svc)(async () => {
      const extended = await extend(rolled, me);
      const clientCert = extended.body.data.clientCert;
      const verified = await tlsCall('POST', url('extend-verify'), { ca, token: session, body: { clientCert } });
      expect(verified.status, verified.text).toBe(200);
    });
    const stale = await extend(`stale-${++seq}`, me);
    expect([stale.status, stale.body.error.code]).toEqual([401, 'UNAUTHORIZED']);
    const after = (await tlsCall('GET', `${mgmt()}/authenticators/${auth.id}`, { ca, token: admin })).body.data;
    expect(srv.ctl.svc.get('authenticators', auth.id)?.unverifiedFingerprint ?? null).toBeNull();
    expect(after.fingerprint).not.toBe(opensslFingerprint(s, me.cert));
  });

  it('extend: requested by an admin (login header), a new certificate for a new key, in force once verified', async () => {
    const me = await enrolled();
    const first = await certLogin(me.key, me.cert);
    expect(first.headers['ziti-authenticator-extend-requested']).toBeUndefined();
    const [auth] = (await tlsCall('GET', `${mgmt()}/identities/${me.id}/authenticators`, { ca, token: admin })).body
      .data;
    const requested = await tlsCall('POST', `${mgmt()}/authenticators/${auth.id}/request-extend`, {
      ca,
      token: admin,
      body: { rollKeys: true },
    });
    expect(requested.status).toBe(200);
    const flagged = (await tlsCall('GET', `${mgmt()}/authenticators/${auth.id}`, { ca, token: admin })).body.data;
    expect(flagged).toMatchObject({ isExtendRequested: true, isKeyRollRequested: true });
    const login = await certLogin(me.key, me.cert);
    expect(login.headers['ziti-authenticator-extend-requested']).toBe('true');
    const session = login.headers['zt-session'] as string;
    for (const api of ['client', 'management'] as const) {
      const base = api === 'client' ? client() : mgmt();
      const extendUrl = `${base}/current-identity/authenticators/${auth.id}/extend`;
      // the request shows the certificate in force (OpenZiti): the session alone, or another certificate, is refused
      const held = { key: me.key, cert: me.cert };
      const newCsr = opensslCsr(s, `rolled-${api}`, 'ec', '/CN=x');
      const bare = await tlsCall('POST', extendUrl, { ca, token: session, body: { clientCertCsr: newCsr } });
      expect([bare.status, bare.body.error.code]).toEqual([401, 'UNAUTHORIZED']);
      const foreignCert = await enrolled();
      const wrongCert = await tlsCall('POST', extendUrl, {
        ca,
        token: session,
        key: foreignCert.key,
        cert: foreignCert.cert,
        body: { clientCertCsr: newCsr },
      });
      expect([wrongCert.status, wrongCert.body.error.code]).toEqual([401, 'UNAUTHORIZED']);
      // the certificate in force sent behind another leaf proves nothing: the handshake proves the leaf's key
      const behind = await tlsCall('POST', extendUrl, {
        ca,
        token: session,
        key: foreignCert.key,
        cert: `${foreignCert.cert.trim()}\n${me.cert.trim()}\n`,
        body: { clientCertCsr: newCsr },
      });
      expect([behind.status, behind.body.error.code]).toEqual([401, 'UNAUTHORIZED']);
      const bad = await tlsCall('POST', extendUrl, { ca, token: session, ...held, body: { clientCertCsr: 'junk' } });
      expect([bad.status, bad.body.error.code]).toEqual([400, 'COULD_NOT_PROCESS_CSR']);
      const extended = await tlsCall('POST', extendUrl, {
        ca,
        token: session,
        ...held,
        body: { clientCertCsr: newCsr },
      });
      expect(extended.status).toBe(200);
      const { clientCert } = extended.body.data;
      // until verified, the old certificate is the one in force
      expect((await certLogin(me.key, me.cert)).status).toBe(200);
      const verifyUrl = `${base}/current-identity/authenticators/${auth.id}/extend-verify`;
      const wrong = await tlsCall('POST', verifyUrl, { ca, token: session, body: { clientCert: me.cert } });
      expect([wrong.status, wrong.body.error.code]).toEqual([400, 'INVALID_CLIENT_CERT']);
      const verified = await tlsCall('POST', verifyUrl, { ca, token: session, body: { clientCert } });
      expect([verified.status, verified.body]).toEqual([200, { data: {}, meta: {} }]);
      const after = (await tlsCall('GET', `${mgmt()}/authenticators/${auth.id}`, { ca, token: admin })).body.data;
      expect(after).toMatchObject({
        isExtendRequested: false,
        isKeyRollRequested: false,
        lastExtendRolledKeys: true,
        fingerprint: opensslFingerprint(s, clientCert),
      });
      expect((await certLogin(me.key, me.cert)).status).toBe(401);
      const renewed = await certLogin(s.read(`rolled-${api}.key`), clientCert);
      expect(renewed.status).toBe(200);
      expect(renewed.headers['ziti-authenticator-extend-requested']).toBeUndefined();
      me.key = s.read(`rolled-${api}.key`);
      me.cert = clientCert;
    }
    // someone else's authenticator is not found; a password authenticator cannot be extended
    const other = await enrolled();
    const otherAuth = (await tlsCall('GET', `${mgmt()}/identities/${other.id}/authenticators`, { ca, token: admin }))
      .body.data[0];
    const foreign = await tlsCall('POST', `${client()}/current-identity/authenticators/${otherAuth.id}/extend`, {
      ca,
      token: session,
      body: { clientCertCsr: opensslCsr(s, 'foreign', 'ec', '/CN=x') },
    });
    expect([foreign.status, foreign.body.error.code]).toEqual([404, 'NOT_FOUND']);
    const adminAuth = (
      await tlsCall('GET', `${mgmt()}/authenticators?filter=${encodeURIComponent('method="updb"')}`, {
        ca,
        token: admin,
      })
    ).body.data[0];
    const refused = await tlsCall('POST', `${mgmt()}/authenticators/${adminAuth.id}/request-extend`, {
      ca,
      token: admin,
      body: { rollKeys: false },
    });
    expect([refused.status, refused.body.error.code]).toEqual([409, 'CAN_NOT_UPDATE_AUTHENTICATOR']);
  });

  it('a controller without TLS has no client certificate to check: 401 INVALID_AUTH', async () => {
    const plain = await startServer();
    try {
      const r = await call('POST', `${plain.client}/authenticate?method=cert`, { body: {} });
      expect([r.status, r.body.error.code]).toEqual([401, 'INVALID_AUTH']);
    } finally {
      await plain.stop();
    }
  });
});

describe('outstanding enrollments (management API)', () => {
  let srv: TestServer;
  let admin: string;
  let offset_ms = 0;
  const inMs = (ms: number) => new Date(Date.now() + offset_ms + ms).toISOString();
  const HOUR_MS = 3_600_000;
  beforeAll(async () => {
    srv = await startServer({ clock: { now: () => Date.now() + offset_ms } });
    admin = await login(srv.base);
  });
  afterAll(() => srv.stop());

  const identity = async () =>
    (
      await call('POST', `${srv.mgmt}/identities`, {
        token: admin,
        body: { name: `plain-${++seq}`, type: 'Device', isAdmin: false },
      })
    ).body.data.id as string;
  const create = (body: unknown) => call('POST', `${srv.mgmt}/enrollments`, { token: admin, body });
  const detail = (id: string, token = admin) => call('GET', `${srv.mgmt}/enrollments/${id}`, { token });
  const enrollOtt = (token: string) => call('POST', `${srv.client}/enroll/ott`, { body: { token, clientCsr: csr() } });
  const code = (r: { status: number; body: any }) => [r.status, r.body?.error?.code, r.body?.error?.cause?.field];

  it('create, detail, list, per identity, delete; one per method (409 ENROLLMENT_EXISTS)', async () => {
    const identityId = await identity();
    const expiresAt = inMs(HOUR_MS);
    const r = await create({ method: 'ott', identityId, expiresAt });
    expect(r.status).toBe(201);
    const d = (await detail(r.body.data.id)).body.data;
    expect(d).toMatchObject({ method: 'ott', identityId, expiresAt, identity: { id: identityId } });
    const claims = JSON.parse(Buffer.from(d.jwt.split('.')[1], 'base64url').toString());
    expect(claims).toMatchObject({ sub: identityId, jti: d.token, em: 'ott' });
    expect(claims.exp).toBe(Math.floor(Date.parse(expiresAt) / 1000));
    // the identity shows it too
    const ident = await call('GET', `${srv.mgmt}/identities/${identityId}`, { token: admin });
    expect(ident.body.data.enrollment.ott.token).toBe(d.token);
    expect(code(await create({ method: 'ott', identityId, expiresAt }))).toEqual([409, 'ENROLLMENT_EXISTS', 'method']);
    const u = await create({ method: 'updb', identityId, expiresAt, username: `mgmt-user-${++seq}` });
    expect(u.status).toBe(201);
    expect((await detail(u.body.data.id)).body.data.username).toMatch(/^mgmt-user-/);
    const listed = await call(
      'GET',
      `${srv.mgmt}/enrollments?filter=${encodeURIComponent(`identityId="${identityId}"`)}`,
      {
        token: admin,
      },
    );
    expect(listed.body.data.map((e: { method: string }) => e.method).sort()).toEqual(['ott', 'updb']);
    const own = await call('GET', `${srv.mgmt}/identities/${identityId}/enrollments`, { token: admin });
    expect(own.body.data).toHaveLength(2);
    // deleting it makes its token worthless
    expect((await call('DELETE', `${srv.mgmt}/enrollments/${r.body.data.id}`, { token: admin })).status).toBe(200);
    expect((await detail(r.body.data.id)).status).toBe(404);
    expect(code(await enrollOtt(d.token))).toEqual([400, 'INVALID_ENROLLMENT_TOKEN', undefined]);
    // and the method is free again
    expect((await create({ method: 'ott', identityId, expiresAt })).status).toBe(201);
  });

  it('refuses bad creates: past or too distant expiry, unknown identity, ottca without a CA, updb without a free username', async () => {
    const identityId = await identity();
    expect(code(await create({ method: 'ott', identityId, expiresAt: inMs(-1000) }))).toEqual([
      400,
      'COULD_NOT_VALIDATE',
      'expiresAt',
    ]);
    expect(code(await create({ method: 'ott', identityId, expiresAt: inMs(367 * 24 * HOUR_MS) }))).toEqual([
      400,
      'COULD_NOT_VALIDATE',
      'expiresAt',
    ]);
    expect(code(await create({ method: 'ott', identityId: 'nope', expiresAt: inMs(HOUR_MS) }))).toEqual([
      400,
      'COULD_NOT_VALIDATE',
      'identityId',
    ]);
    expect(code(await create({ method: 'ottca', identityId, caId: 'x', expiresAt: inMs(HOUR_MS) }))).toEqual([
      400,
      'COULD_NOT_VALIDATE',
      'caId',
    ]);
    expect(code(await create({ method: 'bogus', identityId, expiresAt: inMs(HOUR_MS) }))[0]).toBe(400);
    expect(code(await create({ method: 'updb', identityId, expiresAt: inMs(HOUR_MS) }))).toEqual([
      400,
      'COULD_NOT_VALIDATE',
      'username',
    ]);
    expect(code(await create({ method: 'updb', identityId, expiresAt: inMs(HOUR_MS), username: 'admin' }))).toEqual([
      400,
      'COULD_NOT_VALIDATE',
      'username',
    ]);
    const list = await call('GET', `${srv.mgmt}/identities/${identityId}/enrollments`, { token: admin });
    expect(list.body.data).toEqual([]);
  });

  it('refresh: a new token and JWT, the old ones enroll nothing; an expired enrollment comes back to life', async () => {
    const identityId = await identity();
    const r = await create({ method: 'ott', identityId, expiresAt: inMs(HOUR_MS) });
    expect(r.status, r.text).toBe(201);
    const before = (await detail(r.body.data.id)).body.data;
    offset_ms = 2 * HOUR_MS; // past the window
    try {
      expect(code(await enrollOtt(before.token))).toEqual([400, 'ENROLLMENT_EXPIRED', undefined]);
      const expiresAt = inMs(HOUR_MS);
      const later = await login(srv.base); // the admin session of before has lapsed with the clock
      const refreshed = await call('POST', `${srv.mgmt}/enrollments/${r.body.data.id}/refresh`, {
        token: later,
        body: { expiresAt },
      });
      expect([refreshed.status, refreshed.body.data.id]).toEqual([200, r.body.data.id]);
      const after = (await detail(r.body.data.id, later)).body.data;
      expect(after.expiresAt).toBe(expiresAt);
      expect(after.token).not.toBe(before.token);
      expect(after.jwt).not.toBe(before.jwt);
      expect(JSON.parse(Buffer.from(after.jwt.split('.')[1], 'base64url').toString()).jti).toBe(after.token);
      expect(code(await enrollOtt(before.token))).toEqual([400, 'INVALID_ENROLLMENT_TOKEN', undefined]);
      expect((await enrollOtt(after.token)).status).toBe(200);
      // used up: nothing left to refresh
      const gone = await call('POST', `${srv.mgmt}/enrollments/${r.body.data.id}/refresh`, {
        token: later,
        body: { expiresAt },
      });
      expect(code(gone)).toEqual([404, 'NOT_FOUND', undefined]);
    } finally {
      offset_ms = 0;
    }
    admin = await login(srv.base);
    const other = await create({ method: 'ott', identityId: await identity(), expiresAt: inMs(HOUR_MS) });
    const refresh = (body: unknown) =>
      call('POST', `${srv.mgmt}/enrollments/${other.body.data.id}/refresh`, { token: admin, body });
    expect(code(await refresh({ expiresAt: inMs(-1000) }))).toEqual([400, 'COULD_NOT_VALIDATE', 'expiresAt']);
    expect(code(await refresh({}))).toEqual([400, 'COULD_NOT_VALIDATE', 'expiresAt']);
  });

  it('in a cluster: ctrls names every live member, this one first, as at creation (or refresh); verifiable with /enroll/jwks', async () => {
    let members = [
      fakeMember('n1', true, ['https://n1.example:1280']),
      fakeMember('n2', true, [srv.base]), // the answering node's own URL: listed once
      fakeMember('n3', false, ['https://n3.example:1280']),
    ];
    srv.ctl.svc.cluster = fakeClusterView('n2', () => members);
    const jwks = createLocalJWKSet((await call('GET', `${srv.client}/enroll/jwks`)).body);
    const ctrlsOf = async (jwt: string) => (await jwtVerify(jwt, jwks)).payload.ctrls;
    const atCreation = [srv.base, 'https://n1.example:1280'];
    try {
      // an identity created with its ott enrollment, an updb one created over /enrollments, an edge router's
      const ott = await enrollee(srv, admin, { ott: true });
      const updb = await create({
        method: 'updb',
        identityId: ott.id,
        expiresAt: inMs(HOUR_MS),
        username: `ctrls-user-${++seq}`,
      });
      expect(updb.status, updb.text).toBe(201);
      const router = await call('POST', `${srv.mgmt}/edge-routers`, { token: admin, body: { name: `c-er-${++seq}` } });
      expect(router.status, router.text).toBe(201);
      const jwts = async () => [
        ...Object.values((await call('GET', `${srv.mgmt}/identities/${ott.id}`, { token: admin })).body.data.enrollment)
          .map((e: any) => e.jwt as string)
          .sort(),
        (await call('GET', `${srv.mgmt}/edge-routers/${router.body.data.id}`, { token: admin })).body.data
          .enrollmentJwt as string,
      ];
      const stored = await jwts();
      expect(stored).toHaveLength(3);
      for (const jwt of stored) expect(await ctrlsOf(jwt)).toEqual(atCreation);
      // n3 comes up, n1 goes down: the stored JWTs keep the list of their creation (every member answers them)
      members = [members[1]!, { ...members[2]!, online: true }, { ...members[0]!, online: false }];
      expect(await jwts()).toEqual(stored);
      // a refresh signs a new JWT with the list of now
      const refreshed = await call('POST', `${srv.mgmt}/enrollments/${updb.body.data.id}/refresh`, {
        token: admin,
        body: { expiresAt: inMs(HOUR_MS) },
      });
      expect(refreshed.status, refreshed.text).toBe(200);
      expect(await ctrlsOf((await detail(updb.body.data.id)).body.data.jwt)).toEqual([
        srv.base,
        'https://n3.example:1280',
      ]);
    } finally {
      srv.ctl.svc.cluster = null;
    }
    // a single node: its own URLs
    expect(await ctrlsOf((await enrollee(srv, admin, { ott: true })).jwt)).toEqual([srv.base]);
  });

  it('re-enroll: an authenticator reverts to an enrollment of its kind (updb keeps the username, cert becomes ott)', async () => {
    const username = `re-user-${++seq}`;
    const created = await call('POST', `${srv.mgmt}/identities`, {
      token: admin,
      body: { name: `re-${seq}`, type: 'Device', isAdmin: false, enrollment: { updb: username } },
    });
    const identityId = created.body.data.id;
    const first = (await call('GET', `${srv.mgmt}/identities/${identityId}`, { token: admin })).body.data.enrollment;
    const updb = (token: string, password: string) =>
      call('POST', `${srv.client}/enroll/updb?token=${token}`, { body: { password } });
    expect((await updb(first.updb.token, 'first-pass')).status).toBe(200);
    const authenticators = async () =>
      (await call('GET', `${srv.mgmt}/identities/${identityId}/authenticators`, { token: admin })).body.data;
    const [pw] = await authenticators();
    const reEnroll = (id: string, expiresAt: string) =>
      call('POST', `${srv.mgmt}/authenticators/${id}/re-enroll`, { token: admin, body: { expiresAt } });
    expect(code(await reEnroll(pw.id, inMs(-1000)))).toEqual([400, 'COULD_NOT_VALIDATE', 'expiresAt']);
    const r = await reEnroll(pw.id, inMs(HOUR_MS));
    expect(r.status).toBe(201);
    const e = (await detail(r.body.data.id)).body.data;
    expect(e).toMatchObject({ method: 'updb', username, identityId });
    expect(await authenticators()).toEqual([]);
    expect(
      code(
        await call('POST', `${srv.mgmt}/authenticators/${pw.id}/re-enroll`, {
          token: admin,
          body: { expiresAt: inMs(HOUR_MS) },
        }),
      ),
    ).toEqual([404, 'NOT_FOUND', undefined]);
    expect((await updb(e.token, 'second-pass')).status).toBe(200);
    expect(await login(srv.base, username, 'second-pass')).toBeTruthy();
    // a cert authenticator issued by the network becomes an ott enrollment
    const ott = await create({ method: 'ott', identityId, expiresAt: inMs(HOUR_MS) });
    const token = (await detail(ott.body.data.id)).body.data.token;
    expect((await enrollOtt(token)).status).toBe(200);
    const cert = (await authenticators()).find((a: { method: string }) => a.method === 'cert');
    // with an ott enrollment already out, reverting would make a second one: 409, nothing changed
    const pending = await create({ method: 'ott', identityId, expiresAt: inMs(HOUR_MS) });
    expect(code(await reEnroll(cert.id, inMs(HOUR_MS)))).toEqual([409, 'ENROLLMENT_EXISTS', 'method']);
    expect(await authenticators()).toHaveLength(2);
    await call('DELETE', `${srv.mgmt}/enrollments/${pending.body.data.id}`, { token: admin });
    const reverted = await reEnroll(cert.id, inMs(HOUR_MS));
    expect((await detail(reverted.body.data.id)).body.data.method).toBe('ott');
    expect((await authenticators()).map((a: { method: string }) => a.method)).toEqual(['updb']);
  });
});
