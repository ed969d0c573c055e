/**
 * Router enrollment end to end: an edge router created over the management API enrolls with a server and a client
 * CSR made by openssl (the spec's `POST /enroll/erott` and the legacy `POST /enroll?method=erott` routers send),
 * the issued certificates chain to the signing CA, the router shows `isVerified` and its fingerprint (on
 * `/edge-routers` and `/routers` alike); a transit router enrolls with its `trott` token on the legacy form; both
 * extend their certificates over mutual TLS with their client certificate; re-enroll reverts an edge router to a
 * new enrollment. Every refusal has OpenZiti's code; every response goes through the spec check (`call()` /
 * `tlsCall()`).
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { importJWK, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSigningCa } from '../../src/pki/index.js';
import { openssl, opensslFingerprint, Scratch } from '../pki/helpers.js';
import { interceptNextWrite } from '../support/api.js';
import { shiftedClock } from '../support/clock.js';
import { expectOwnCoverageAfterAll } from '../support/conformance.js';
import { call, login, startServer, type TestServer } from '../support/server.js';
import { startTlsServer, tlsCall } from '../support/tls-call.js';

const s = new Scratch();
afterAll(() => s.remove());
const opsServed = expectOwnCoverageAfterAll('test/api/router-enroll.test.ts');

let seq = 0;
const code = (r: { status: number; body?: any }) => [r.status, r.body?.error?.code];

/**
 * A router's key and its two CSRs, as OpenZiti's router enroller makes them: one key, the same subject (CN = the
 * router id) with the configured SANs, for the server and the client certificate.
 */
function routerCsrs(cn: string, sans = 'DNS:router.example.test,IP:127.0.0.1') {
  const name = `r${++seq}`;
  const key = s.path(`${name}.key`);
  const keyGen = openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', key]);
  expect(keyGen.status).toBe(0);
  const csr = (suffix: string) => {
    const out = s.path(`${name}-${suffix}.csr`);
    const r = openssl(['req', '-new', '-key', key, '-subj', `/CN=${cn}/O=Keel`, '-addext', `subjectAltName=${sans}`]);
    expect(r.status).toBe(0);
    s.write(`${name}-${suffix}.csr`, r.stdout);
    return readFileSync(out, 'utf8');
  };
  return { key: readFileSync(key, 'utf8'), serverCsr: csr('server'), clientCsr: csr('client') };
}

/** `openssl verify` of a chain against a CA bundle for a TLS purpose. */
function verifies(ca: string, chain: string, purpose: 'sslclient' | 'sslserver'): boolean {
  const caFile = s.write(`ca-${++seq}.pem`, ca);
  const chainFile = s.write(`chain-${seq}.pem`, chain);
  const r = openssl(['verify', '-CAfile', caFile, '-purpose', purpose, chainFile]);
  return r.status === 0 && r.stdout.trim() === `${chainFile}: OK`;
}

function x509Text(pem: string): string {
  const file = s.write(`cert-${++seq}.pem`, pem);
  return openssl(['x509', '-noout', '-subject', '-ext', 'subjectAltName,extendedKeyUsage', '-in', file]).stdout;
}

describe.each(['uws', 'node'] as const)('edge router enrollment on the %s engine', (engine) => {
  let srv: TestServer;
  let admin: string;
  const clock = shiftedClock();
  beforeAll(async () => {
    srv = await startServer({ engine, clock });
    admin = await login(srv.base);
    opsServed.splice(0, opsServed.length, ...srv.ctl.ops);
  });
  afterAll(() => srv.stop());

  const newRouter = async () => {
    const r = await call('POST', `${srv.mgmt}/edge-routers`, { token: admin, body: { name: `er-${++seq}` } });
    expect(r.status).toBe(201);
    return r.body.data.id as string;
  };
  const detail = async (id: string, token = admin) =>
    (await call('GET', `${srv.mgmt}/edge-routers/${id}`, { token })).body.data;
  const erott = (body: unknown) => call('POST', `${srv.client}/enroll/erott`, { body });
  /** The enrollments of the router `id` (`field`: which kind of router it is). */
  const enrollmentsOf = async (field: 'edgeRouterId' | 'transitRouterId', id: string) => {
    const filter = encodeURIComponent(`${field}="${id}"`);
    const r = await call('GET', `${srv.mgmt}/enrollments?filter=${filter}`, { token: admin });
    expect(r.status, r.text).toBe(200);
    return r.body.data;
  };
  const listedIds = async (filter: string) => {
    const r = await call('GET', `${srv.mgmt}/edge-routers?filter=${encodeURIComponent(filter)}`, { token: admin });
    expect(r.status, r.text).toBe(200);
    return r.body.data.map((row: { id: string }) => row.id);
  };

  it('a new router has an erott enrollment JWT; enrolling signs both CSRs and verifies the router', async () => {
    const id = await newRouter();
    const before = await detail(id);
    expect(before).toMatchObject({ isVerified: false, fingerprint: '', certPem: null });
    expect(await listedIds(`isVerified = false and id = "${id}"`)).toEqual([id]);
    expect(Date.parse(before.enrollmentExpiresAt) - Date.parse(before.enrollmentCreatedAt)).toBe(180 * 60_000);
    // the JWT carries the token, names the router and verifies with the enrollment JWKS
    const jwks = (await call('GET', `${srv.client}/enroll/jwks`)).body;
    const { payload } = await jwtVerify(before.enrollmentJwt, await importJWK(jwks.keys[0], 'ES256'));
    expect(payload).toMatchObject({ em: 'erott', sub: id, jti: before.enrollmentToken });
    // /enrollments shows it, tied to the router
    const [listed] = await enrollmentsOf('edgeRouterId', id);
    expect(listed).toMatchObject({
      method: 'erott',
      edgeRouterId: id,
      edgeRouter: { id },
      token: before.enrollmentToken,
    });

    const csrs = routerCsrs(id);
    const r = await erott({ token: before.enrollmentToken, serverCsr: csrs.serverCsr, clientCsr: csrs.clientCsr });
    expect(r.status).toBe(200);
    const { cert, serverCert, ca } = r.body.data;
    expect(verifies(ca, cert, 'sslclient')).toBe(true);
    expect(verifies(ca, serverCert, 'sslserver')).toBe(true);
    // both leaves are signed by this controller's signing CA (the intermediate of its PKI directory)
    const signing = new X509Certificate((await loadSigningCa(join(srv.dataDir, 'pki'))).certPem);
    for (const pem of [cert, serverCert]) {
      const leaf = new X509Certificate(pem);
      expect([leaf.checkIssued(signing), leaf.verify(signing.publicKey)]).toEqual([true, true]);
    }
    // the client certificate is not for serving, and names the router; the server one carries the requested SANs
    expect(verifies(ca, cert, 'sslserver')).toBe(false);
    expect(x509Text(cert)).toContain(`CN = ${id}`);
    expect(x509Text(serverCert)).toMatch(/DNS:router\.example\.test, IP Address:127\.0\.0\.1/);
    const after = await detail(id);
    expect(after).toMatchObject({
      isVerified: true,
      fingerprint: opensslFingerprint(s, cert),
      enrollmentJwt: null,
      enrollmentToken: null,
      enrollmentCreatedAt: null,
      enrollmentExpiresAt: null,
    });
    expect(after.certPem).toContain('-----BEGIN CERTIFICATE-----');
    // one router, one state: its /routers view shows the same enrollment outcome
    const asRouter = (await call('GET', `${srv.mgmt}/routers/${id}`, { token: admin })).body.data;
    expect(asRouter).toMatchObject({ isVerified: true, fingerprint: after.fingerprint, enrollmentToken: null });
    // `/edge-routers` filters and sorts on what the router row holds
    expect(await listedIds(`isVerified = false and id = "${id}"`)).toEqual([]);
    expect(await listedIds(`isVerified = true and fingerprint = "${after.fingerprint}"`)).toEqual([id]);
    const other = await newRouter();
    const both = `id in ["${id}", "${other}"]`;
    expect(await listedIds(`${both} sort by isVerified desc`)).toEqual([id, other]);
    expect(await listedIds(`${both} sort by fingerprint asc`)).toEqual([other, id]);
    // used up
    const again = await erott({ token: before.enrollmentToken, ...csrs });
    expect(code(again)).toEqual([400, 'INVALID_ENROLLMENT_TOKEN']);
  });

  it('the legacy form routers send: POST /enroll?method=erott with {serverCertCsr, certCsr}, a JSON answer', async () => {
    const id = await newRouter();
    const token = (await detail(id)).enrollmentToken;
    const csrs = routerCsrs(id);
    const r = await call('POST', `${srv.client}/enroll?method=erott&token=${token}`, {
      body: { serverCertCsr: csrs.serverCsr, certCsr: csrs.clientCsr },
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('application/json');
    expect((await detail(id)).fingerprint).toBe(opensslFingerprint(s, r.body.data.cert));
  });

  it('refusals leave the token usable: unknown token, missing or bad CSRs, a wrong common name, another method, expiry', async () => {
    const id = await newRouter();
    const token = (await detail(id)).enrollmentToken;
    const good = routerCsrs(id);
    expect(code(await erott({ token: '2f1b7a64-31f4-4bd0-9b5e-4c0e0f2b3a11', ...good }))).toEqual([
      400,
      'INVALID_ENROLLMENT_TOKEN',
    ]);
    expect(code(await erott({ serverCsr: good.serverCsr, clientCsr: good.clientCsr }))).toEqual([
      400,
      'INVALID_ENROLLMENT_TOKEN',
    ]);
    expect(code(await erott({ token, clientCsr: good.clientCsr }))).toEqual([400, 'MISSING_OR_INVALID_CSR']);
    expect(code(await erott({ token, serverCsr: good.serverCsr }))).toEqual([400, 'MISSING_OR_INVALID_CSR']);
    expect(code(await erott({ token, serverCsr: 'junk', clientCsr: good.clientCsr }))).toEqual([
      400,
      'COULD_NOT_PROCESS_CSR',
    ]);
    // the client certificate must name the router by its id
    const wrongCn = routerCsrs('not-the-id');
    const r = await erott({ token, serverCsr: good.serverCsr, clientCsr: wrongCn.clientCsr });
    expect([...code(r), r.body.error.cause.code]).toEqual([
      400,
      'COULD_NOT_PROCESS_CSR',
      'EDGE_ROUTER_ENROLL_COMMON_NAME_INVALID',
    ]);
    // nor name it among others: a subject of two common names (Go reads the last one) is refused
    const twoCns = routerCsrs(`${id}/CN=admin`);
    const two = await erott({ token, serverCsr: good.serverCsr, clientCsr: twoCns.clientCsr });
    expect([...code(two), two.body.error.cause.code]).toEqual([
      400,
      'COULD_NOT_PROCESS_CSR',
      'EDGE_ROUTER_ENROLL_COMMON_NAME_INVALID',
    ]);
    expect(code(await erott({ token, serverCsr: good.serverCsr, clientCsr: 7 }))).toEqual([400, 'COULD_NOT_VALIDATE']);
    // an identity's token is not a router's
    const ident = await call('POST', `${srv.mgmt}/identities`, {
      token: admin,
      body: { name: `ident-${++seq}`, type: 'Device', isAdmin: false, enrollment: { ott: true } },
    });
    const identToken = (await call('GET', `${srv.mgmt}/identities/${ident.body.data.id}`, { token: admin })).body.data
      .enrollment.ott.token;
    expect(code(await erott({ token: identToken, ...good }))).toEqual([400, 'INVALID_ENROLL_METHOD']);
    expect(
      code(await call('POST', `${srv.client}/enroll/ott`, { body: { token, clientCsr: good.clientCsr } })),
    ).toEqual([400, 'INVALID_ENROLL_METHOD']);
    // nothing changed: the router is unverified and its token still enrolls (not once expired)
    expect((await detail(id)).isVerified).toBe(false);
    const late = await clock.during(181 * 60_000, () => erott({ token, ...good }));
    expect(code(late)).toEqual([400, 'ENROLLMENT_EXPIRED']);
    expect((await erott({ token, serverCsr: good.serverCsr, clientCsr: good.clientCsr })).status).toBe(200);
  });

  it('a transit router: its trott enrollment on /enrollments; the legacy form enrolls it, the common name set to its id', async () => {
    const made = await call('POST', `${srv.mgmt}/routers`, { token: admin, body: { name: `tr-${++seq}` } });
    expect(made.status).toBe(201);
    const id = made.body.data.id as string;
    const routerDetail = async (token = admin) =>
      (await call('GET', `${srv.mgmt}/transit-routers/${id}`, { token })).body.data;
    const before = await routerDetail();
    expect(before).toMatchObject({ isVerified: false, fingerprint: '' });
    const [listed] = await enrollmentsOf('transitRouterId', id);
    expect(listed).toMatchObject({
      method: 'trott',
      transitRouterId: id,
      transitRouter: { id },
      token: before.enrollmentToken,
      jwt: before.enrollmentJwt,
    });
    const token = before.enrollmentToken as string;
    const csrs = routerCsrs('whatever-the-router-calls-itself');
    const legacy = (method: string, t: string, c = csrs) =>
      call('POST', `${srv.client}/enroll?method=${method}&token=${t}`, {
        body: { serverCertCsr: c.serverCsr, certCsr: c.clientCsr },
      });
    // a transit router's token is for trott only, an edge router's for erott only
    expect(code(await legacy('erott', token))).toEqual([400, 'INVALID_ENROLL_METHOD']);
    expect(code(await erott({ token, serverCsr: csrs.serverCsr, clientCsr: csrs.clientCsr }))).toEqual([
      400,
      'INVALID_ENROLL_METHOD',
    ]);
    const edgeToken = (await detail(await newRouter())).enrollmentToken as string;
    expect(code(await legacy('trott', edgeToken, routerCsrs('x')))).toEqual([400, 'INVALID_ENROLL_METHOD']);
    expect(code(await legacy('trott', token, { ...csrs, serverCsr: '' }))).toEqual([400, 'MISSING_OR_INVALID_CSR']);
    expect((await routerDetail()).isVerified).toBe(false);

    const r = await legacy('trott', token);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('application/json');
    const { cert, serverCert, ca } = r.body.data;
    expect(verifies(ca, cert, 'sslclient')).toBe(true);
    expect(verifies(ca, serverCert, 'sslserver')).toBe(true);
    expect(x509Text(cert)).toContain(`CN = ${id}`);
    expect(x509Text(serverCert)).toMatch(/DNS:router\.example\.test, IP Address:127\.0\.0\.1/);
    const after = (await call('GET', `${srv.mgmt}/routers/${id}`, { token: admin })).body.data;
    expect(after).toMatchObject({
      isVerified: true,
      fingerprint: opensslFingerprint(s, cert),
      enrollmentJwt: null,
      enrollmentToken: null,
      enrollmentCreatedAt: null,
      enrollmentExpiresAt: null,
    });
    expect(await enrollmentsOf('transitRouterId', id)).toEqual([]);
    expect(code(await legacy('trott', token))).toEqual([400, 'INVALID_ENROLLMENT_TOKEN']);
    // a new transit router's enrollment goes with it
    const gone = await call('POST', `${srv.mgmt}/routers`, { token: admin, body: { name: `tr-${++seq}` } });
    expect(await enrollmentsOf('transitRouterId', gone.body.data.id)).toHaveLength(1);
    expect((await call('DELETE', `${srv.mgmt}/routers/${gone.body.data.id}`, { token: admin })).status).toBe(200);
    expect(await enrollmentsOf('transitRouterId', gone.body.data.id)).toEqual([]);
  });

  it('an edge router without a router row (made before routers had rows) gets one on re-enroll, then enrolls', async () => {
    const name = `legacy-${++seq}`;
    const id = await (async () => {
      const r = await call('POST', `${srv.mgmt}/edge-routers`, { token: admin, body: { name, cost: 7 } });
      return r.body.data.id as string;
    })();
    // as such a router was stored: no router row and no enrollment
    const at = new Date().toISOString();
    const [enrollment] = await enrollmentsOf('edgeRouterId', id);
    await srv.ctl.svc.write({
      op: 'batch',
      ops: [
        { op: 'delete', entity: 'enrollments', id: enrollment.id, at, system: true },
        { op: 'delete', entity: 'transit-routers', id, at },
      ],
    });
    expect((await call('GET', `${srv.mgmt}/routers/${id}`, { token: admin })).status).toBe(404);
    expect(await detail(id)).toMatchObject({ isVerified: false, enrollmentToken: null });
    expect((await call('POST', `${srv.mgmt}/edge-routers/${id}/re-enroll`, { token: admin })).status).toBe(200);
    expect((await call('GET', `${srv.mgmt}/routers/${id}`, { token: admin })).body.data).toMatchObject({
      name,
      cost: 7,
      isVerified: false,
    });
    const token = (await detail(id)).enrollmentToken;
    const csrs = routerCsrs(id);
    expect((await erott({ token, serverCsr: csrs.serverCsr, clientCsr: csrs.clientCsr })).status).toBe(200);
    expect((await detail(id)).isVerified).toBe(true);
  });

  it('re-enroll: a new token and JWT replace the old ones, the certificate is forgotten; deleting the router ends its enrollment', async () => {
    const id = await newRouter();
    const first = (await detail(id)).enrollmentToken;
    const reEnroll = (rid: string) => call('POST', `${srv.mgmt}/edge-routers/${rid}/re-enroll`, { token: admin });
    // while still unenrolled: the outstanding token is replaced
    expect((await reEnroll(id)).status).toBe(200);
    const second = (await detail(id)).enrollmentToken;
    expect(second).not.toBe(first);
    const csrs = routerCsrs(id);
    expect(code(await erott({ token: first, ...csrs }))).toEqual([400, 'INVALID_ENROLLMENT_TOKEN']);
    expect((await erott({ token: second, serverCsr: csrs.serverCsr, clientCsr: csrs.clientCsr })).status).toBe(200);
    expect((await detail(id)).isVerified).toBe(true);
    // once enrolled: back to unverified, no fingerprint, a fresh enrollment
    const r = await reEnroll(id);
    expect([r.status, r.body]).toEqual([200, { data: {}, meta: {} }]);
    const after = await detail(id);
    expect(after).toMatchObject({ isVerified: false, fingerprint: '', certPem: null });
    expect(after.enrollmentToken).not.toBe(second);
    expect(code(await reEnroll('no-such-router'))).toEqual([404, 'NOT_FOUND']);
    // the router's enrollment refreshes like any other: a new token (the JWT still names the router)
    const [outstanding] = await enrollmentsOf('edgeRouterId', id);
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const refreshed = await call('POST', `${srv.mgmt}/enrollments/${outstanding.id}/refresh`, {
      token: admin,
      body: { expiresAt },
    });
    expect(refreshed.status).toBe(200);
    const fresh = await detail(id);
    expect(fresh.enrollmentToken).not.toBe(after.enrollmentToken);
    expect(JSON.parse(Buffer.from(fresh.enrollmentJwt.split('.')[1], 'base64url').toString())).toMatchObject({
      sub: id,
      em: 'erott',
      jti: fresh.enrollmentToken,
    });
    expect(code(await erott({ token: after.enrollmentToken, ...routerCsrs(id) }))).toEqual([
      400,
      'INVALID_ENROLLMENT_TOKEN',
    ]);
    // readers without admin rights do not see the enrollment secrets
    const ro = `ro-${++seq}`;
    const roId = (
      await call('POST', `${srv.mgmt}/identities`, {
        token: admin,
        body: { name: ro, type: 'User', isAdmin: false, permissions: ['admin_readonly'] },
      })
    ).body.data.id;
    await call('POST', `${srv.mgmt}/authenticators`, {
      token: admin,
      body: { method: 'updb', identityId: roId, username: ro, password: 'ro-password-1' },
    });
    const readonly = await login(srv.base, ro, 'ro-password-1');
    expect(await detail(id, readonly)).toMatchObject({ enrollmentJwt: null, enrollmentToken: null });
    const routerView = await call('GET', `${srv.mgmt}/routers/${id}`, { token: readonly });
    expect(routerView.body.data).toMatchObject({ enrollmentJwt: null, enrollmentToken: null });
    expect((await call('GET', `${srv.mgmt}/routers/${id}`, { token: admin })).body.data.enrollmentToken).toBe(
      fresh.enrollmentToken,
    );
    // the router's deletion takes its enrollment along
    expect((await call('DELETE', `${srv.mgmt}/edge-routers/${id}`, { token: admin })).status).toBe(200);
    expect(await enrollmentsOf('edgeRouterId', id)).toEqual([]);
  });
});

describe('edge router certificate extension over mutual TLS (node engine, API TLS)', () => {
  let srv: TestServer;
  let ca: string;
  let admin: string;
  const clock = shiftedClock();
  const mgmt = () => `${srv.base}/edge/management/v1`;
  const client = () => `${srv.base}/edge/client/v1`;
  beforeAll(async () => {
    ({ srv, ca, admin } = await startTlsServer({ clock }));
  });
  afterAll(() => srv.stop());

  /** A router enrolled over HTTPS: its id, key and client certificate chain. */
  const enrolledRouter = async () => {
    const id = (await tlsCall('POST', `${mgmt()}/edge-routers`, { ca, token: admin, body: { name: `x-${++seq}` } }))
      .body.data.id as string;
    const token = (await tlsCall('GET', `${mgmt()}/edge-routers/${id}`, { ca, token: admin })).body.data
      .enrollmentToken;
    const csrs = routerCsrs(id);
    const r = await tlsCall('POST', `${client()}/enroll/erott`, {
      ca,
      body: { token, serverCsr: csrs.serverCsr, clientCsr: csrs.clientCsr },
    });
    expect(r.status).toBe(200);
    return { id, key: csrs.key, cert: r.body.data.cert as string };
  };
  const extend = (key: string | undefined, cert: string | undefined, body: unknown) =>
    tlsCall('POST', `${client()}/enroll/extend/router`, { ca, key, cert, body });
  const fingerprintOf = async (id: string) =>
    (await tlsCall('GET', `${mgmt()}/edge-routers/${id}`, { ca, token: admin })).body.data.fingerprint as string;

  it('the router extends with its current certificate (a new key too); the old certificate no longer extends', async () => {
    const r = await enrolledRouter();
    const rolled = routerCsrs(r.id, 'DNS:renewed.example.test');
    const ext = await extend(r.key, r.cert, { serverCertCsr: rolled.serverCsr, certCsr: rolled.clientCsr });
    expect(ext.status).toBe(200);
    const { cert, serverCert, ca: bundle } = ext.body.data;
    expect(verifies(bundle, cert, 'sslclient')).toBe(true);
    expect(verifies(bundle, serverCert, 'sslserver')).toBe(true);
    expect(x509Text(serverCert)).toContain('DNS:renewed.example.test');
    expect(await fingerprintOf(r.id)).toBe(opensslFingerprint(s, cert));
    // the replaced certificate is worthless, the new one (with the new key) extends again
    const csrs = routerCsrs(r.id);
    const body = { serverCertCsr: csrs.serverCsr, certCsr: csrs.clientCsr };
    expect(code(await extend(r.key, r.cert, body))).toEqual([401, 'UNAUTHORIZED']);
    expect((await extend(rolled.key, cert, body)).status).toBe(200);
  });

  it('refusals: no certificate, an unknown one, a re-enrolled router, a wrong common name, missing CSRs', async () => {
    const r = await enrolledRouter();
    const csrs = routerCsrs(r.id);
    const body = { serverCertCsr: csrs.serverCsr, certCsr: csrs.clientCsr };
    expect(code(await extend(undefined, undefined, body))).toEqual([401, 'UNAUTHORIZED']);
    // another router's certificate extends that router only: CSRs naming this router are refused
    const other = await enrolledRouter();
    const wrong = await extend(other.key, other.cert, body);
    expect([...code(wrong), wrong.body.error.cause?.code]).toEqual([
      400,
      'COULD_NOT_PROCESS_CSR',
      'EDGE_ROUTER_ENROLL_COMMON_NAME_INVALID',
    ]);
    const missing = await extend(r.key, r.cert, { certCsr: csrs.clientCsr });
    expect(code(missing)).toEqual([400, 'COULD_NOT_VALIDATE']);
    const before = await fingerprintOf(r.id);
    expect((await tlsCall('POST', `${mgmt()}/edge-routers/${r.id}/re-enroll`, { ca, token: admin })).status).toBe(200);
    expect(code(await extend(r.key, r.cert, body))).toEqual([401, 'UNAUTHORIZED']);
    expect(before).not.toBe('');
    expect(await fingerprintOf(r.id)).toBe('');
  });

  it('a re-enroll landing between the check and the write: 401 UNAUTHORIZED, no internal field named', async () => {
    const r = await enrolledRouter();
    const csrs = routerCsrs(r.id);
    const meanwhile = interceptNextWrite(srv.ctl.svc);
    meanwhile(async () => {
      const re = await tlsCall('POST', `${mgmt()}/edge-routers/${r.id}/re-enroll`, { ca, token: admin });
      expect(re.status).toBe(200);
    });
    const raced = await extend(r.key, r.cert, { serverCertCsr: csrs.serverCsr, certCsr: csrs.clientCsr });
    expect(code(raced)).toEqual([401, 'UNAUTHORIZED']);
    expect(raced.body.error.cause).toBeUndefined();
    expect(await fingerprintOf(r.id)).toBe('');
  });

  it('a transit router extends too (enrolled with trott; its common name is set to its id, not checked)', async () => {
    const id = (await tlsCall('POST', `${mgmt()}/routers`, { ca, token: admin, body: { name: `t-${++seq}` } })).body
      .data.id as string;
    const token = (await tlsCall('GET', `${mgmt()}/routers/${id}`, { ca, token: admin })).body.data.enrollmentToken;
    const csrs = routerCsrs('transit');
    const enrolled = await tlsCall('POST', `${client()}/enroll?method=trott&token=${token}`, {
      ca,
      body: { serverCertCsr: csrs.serverCsr, certCsr: csrs.clientCsr },
    });
    expect(enrolled.status).toBe(200);
    const rolled = routerCsrs('another-name');
    const ext = await extend(csrs.key, enrolled.body.data.cert, {
      serverCertCsr: rolled.serverCsr,
      certCsr: rolled.clientCsr,
    });
    expect(ext.status).toBe(200);
    expect(x509Text(ext.body.data.cert)).toContain(`CN = ${id}`);
    const after = (await tlsCall('GET', `${mgmt()}/routers/${id}`, { ca, token: admin })).body.data;
    expect(after).toMatchObject({ isVerified: true, fingerprint: opensslFingerprint(s, ext.body.data.cert) });
    const body = { serverCertCsr: rolled.serverCsr, certCsr: rolled.clientCsr };
    expect(code(await extend(csrs.key, enrolled.body.data.cert, body))).toEqual([401, 'UNAUTHORIZED']);
  });

  it('an expired router certificate does not extend (the chain is checked at the current time)', async () => {
    const r = await enrolledRouter();
    const csrs = routerCsrs(r.id);
    const body = { serverCertCsr: csrs.serverCsr, certCsr: csrs.clientCsr };
    const res = await clock.during(366 * 24 * 3_600_000, () => extend(r.key, r.cert, body));
    expect(code(res)).toEqual([401, 'UNAUTHORIZED']);
  });
});
