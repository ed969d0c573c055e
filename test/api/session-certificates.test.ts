/**
 * Ephemeral certificates (`/current-api-session/certificates`, client API): an API session has a CSR made by
 * openssl signed into a 12-hour client certificate of its identity; the certificate logs in over mutual TLS as
 * that API session, and only while the session lives, the certificate is valid and not deleted. List, detail and
 * delete see the caller's own session's certificates only. Responses go through the spec check (`tlsCall`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_CERTIFICATES_PER_SESSION } from '../../src/ops/session-certificates.js';
import { openssl, opensslCsr, opensslFingerprint, Scratch } from '../pki/helpers.js';
import { shiftedClock } from '../support/clock.js';
import { expectOwnCoverageAfterAll } from '../support/conformance.js';
import type { TestServer } from '../support/server.js';
import { startTlsServer, type TlsRes, tlsCall } from '../support/tls-call.js';

const s = new Scratch();
afterAll(() => s.remove());
const opsServed = expectOwnCoverageAfterAll('test/api/session-certificates.test.ts');

const HOUR_MS = 3_600_000;
let seq = 0;
const code = (r: TlsRes) => [r.status, r.body?.error?.code];

describe('ephemeral certificates of the current API session (node engine, API TLS)', () => {
  let srv: TestServer;
  let ca: string;
  let admin: string;
  const clock = shiftedClock();
  const client = () => `${srv.base}/edge/client/v1`;
  beforeAll(async () => {
    // sessions outlive the certificates here, so that a certificate's own expiry can be seen
    ({ srv, ca, admin } = await startTlsServer({ clock, sessionTimeout_ms: 48 * HOUR_MS }));
    opsServed.push(...srv.ctl.ops);
  });
  afterAll(() => srv.stop());

  /** A new identity with a password; returns its id and a way to log in (a new API session each time). */
  const user = async () => {
    const name = `eph-${++seq}`;
    const mgmt = `${srv.base}/edge/management/v1`;
    const id = (
      await tlsCall('POST', `${mgmt}/identities`, { ca, token: admin, body: { name, type: 'User', isAdmin: false } })
    ).body.data.id as string;
    const body = { method: 'updb', identityId: id, username: name, password: 'eph-password-1' };
    expect((await tlsCall('POST', `${mgmt}/authenticators`, { ca, token: admin, body })).status).toBe(201);
    const login = async () =>
      (
        await tlsCall('POST', `${client()}/authenticate?method=password`, {
          ca,
          body: { username: name, password: 'eph-password-1' },
        })
      ).headers['zt-session'] as string;
    return { id, login };
  };
  const csr = () => opensslCsr(s, `k${++seq}`, 'ec', '/CN=ignored');
  const create = (token: string | undefined, body: unknown) =>
    tlsCall('POST', `${client()}/current-api-session/certificates`, { ca, token, body });
  const certLogin = (key: string, cert: string) =>
    tlsCall('POST', `${client()}/authenticate?method=cert`, { ca, key, cert, body: {} });

  it('a CSR becomes a 12-hour client certificate of the identity that logs in as the same API session', async () => {
    const u = await user();
    const token = await u.login();
    const request = csr();
    const key = s.read(`k${seq}.key`);
    const r = await create(token, { csr: request });
    expect(r.status).toBe(201);
    const { id, certificate, cas, _links } = r.body.data;
    expect(_links.self.href).toBe(`./current-api-session/certificates/${id}`);
    // the chain verifies for client use against the CAs the answer names; the subject is the identity
    const caFile = s.write('cas.pem', cas);
    const chainFile = s.write('eph.pem', certificate);
    const verified = openssl(['verify', '-CAfile', caFile, '-purpose', 'sslclient', chainFile]);
    expect(verified.stdout.trim()).toBe(`${chainFile}: OK`);
    const dates = openssl(['x509', '-noout', '-subject', '-startdate', '-enddate', '-in', chainFile]).stdout;
    expect(dates).toContain(`subject=CN = ${u.id}`);
    const notAfter = Date.parse(/notAfter=(.*)/.exec(dates)![1]!);
    expect(Math.abs(notAfter - (Date.now() + 12 * HOUR_MS))).toBeLessThan(5 * 60_000);
    // list and detail
    const list = await tlsCall('GET', `${client()}/current-api-session/certificates`, { ca, token });
    expect(list.body.data).toHaveLength(1);
    expect(list.body.meta.pagination.totalCount).toBe(1);
    const detail = await tlsCall('GET', `${client()}/current-api-session/certificates/${id}`, { ca, token });
    // list and detail link to where the certificate is served, as the create does
    expect([list.body.data[0]._links.self.href, detail.body.data._links.self.href]).toEqual([
      `./current-api-session/certificates/${id}`,
      `./current-api-session/certificates/${id}`,
    ]);
    expect(detail.body.data).toMatchObject({ id, fingerprint: opensslFingerprint(s, certificate), certificate });
    expect(detail.body.data.subject).toBe(`CN=${u.id}`);
    expect(Date.parse(detail.body.data.validTo)).toBe(notAfter);
    // logging in with it answers this very API session
    const session = (await tlsCall('GET', `${client()}/current-api-session`, { ca, token })).body.data;
    const login = await certLogin(key, certificate);
    expect(login.status).toBe(200);
    expect([login.body.data.id, login.headers['zt-session']]).toEqual([session.id, token]);
    // filterable like any list
    const filter = encodeURIComponent(`fingerprint = "${detail.body.data.fingerprint}"`);
    const filtered = await tlsCall('GET', `${client()}/current-api-session/certificates?filter=${filter}`, {
      ca,
      token,
    });
    expect(filtered.body.data.map((c: { id: string }) => c.id)).toEqual([id]);
  });

  it('another session (of the same identity too) neither sees nor deletes them; a deleted one logs in no more', async () => {
    const u = await user();
    const token = await u.login();
    const other = await u.login();
    const r = await create(token, { csr: csr() });
    const key = s.read(`k${seq}.key`);
    const id = r.body.data.id as string;
    const url = `${client()}/current-api-session/certificates/${id}`;
    expect(
      (await tlsCall('GET', `${client()}/current-api-session/certificates`, { ca, token: other })).body.data,
    ).toEqual([]);
    expect(code(await tlsCall('GET', url, { ca, token: other }))).toEqual([404, 'NOT_FOUND']);
    expect(code(await tlsCall('DELETE', url, { ca, token: other }))).toEqual([404, 'NOT_FOUND']);
    expect((await certLogin(key, r.body.data.certificate)).status).toBe(200);
    const deleted = await tlsCall('DELETE', url, { ca, token });
    expect([deleted.status, deleted.body]).toEqual([200, { data: {}, meta: {} }]);
    expect(code(await tlsCall('GET', url, { ca, token }))).toEqual([404, 'NOT_FOUND']);
    expect(code(await certLogin(key, r.body.data.certificate))).toEqual([401, 'INVALID_AUTH']);
  });

  it('valid only while its API session lives and before its own expiry', async () => {
    const u = await user();
    // the session ends (logout): its certificates go with it
    const token = await u.login();
    const r = await create(token, { csr: csr() });
    const key = s.read(`k${seq}.key`);
    expect((await tlsCall('DELETE', `${client()}/current-api-session`, { ca, token })).status).toBe(200);
    expect(code(await certLogin(key, r.body.data.certificate))).toEqual([401, 'INVALID_AUTH']);
    // past the certificate's 12 hours, within the session's timeout
    const live = await u.login();
    const later = await create(live, { csr: csr() });
    const laterKey = s.read(`k${seq}.key`);
    expect((await certLogin(laterKey, later.body.data.certificate)).status).toBe(200);
    const expired = await clock.during(13 * HOUR_MS, () => certLogin(laterKey, later.body.data.certificate));
    expect(code(expired)).toEqual([401, 'INVALID_AUTH']);
    // a disabled identity's session ends, and with it the certificate
    const again = await u.login();
    const third = await create(again, { csr: csr() });
    const thirdKey = s.read(`k${seq}.key`);
    const mgmt = `${srv.base}/edge/management/v1`;
    const disabled = await tlsCall('POST', `${mgmt}/identities/${u.id}/disable`, {
      ca,
      token: admin,
      body: { durationMinutes: 0 },
    });
    expect(disabled.status).toBe(200);
    expect(code(await certLogin(thirdKey, third.body.data.certificate))).toEqual([401, 'INVALID_AUTH']);
  });

  it('refusals: no session, a bad or missing CSR, more than the bound per API session', async () => {
    const u = await user();
    const token = await u.login();
    expect(code(await create(undefined, { csr: csr() }))).toEqual([401, 'UNAUTHORIZED']);
    expect(code(await create(token, { csr: 'not a csr' }))).toEqual([400, 'COULD_NOT_PROCESS_CSR']);
    expect(code(await create(token, {}))).toEqual([400, 'COULD_NOT_VALIDATE']);
    const request = csr();
    for (let i = 0; i < MAX_CERTIFICATES_PER_SESSION; i++)
      expect((await create(token, { csr: request })).status).toBe(201);
    expect(code(await create(token, { csr: request }))).toEqual([429, 'RATE_LIMITED']);
    // deleting one frees a place
    const [first] = (await tlsCall('GET', `${client()}/current-api-session/certificates?limit=1`, { ca, token })).body
      .data;
    await tlsCall('DELETE', `${client()}/current-api-session/certificates/${first.id}`, { ca, token });
    expect((await create(token, { csr: request })).status).toBe(201);
  });

  it('the bound holds for concurrent requests of one API session (counted in apply)', async () => {
    const token = await (await user()).login();
    const request = csr();
    const extra = 8;
    // every request finds the session below the bound before its CSR is signed
    const answers = await Promise.all(
      Array.from({ length: MAX_CERTIFICATES_PER_SESSION + extra }, () => create(token, { csr: request })),
    );
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((st) => st === 201)).toHaveLength(MAX_CERTIFICATES_PER_SESSION);
    const refused = answers.filter((r) => r.status !== 201);
    expect(refused.map(code)).toEqual(Array(extra).fill([429, 'RATE_LIMITED']));
    expect(refused[0]!.body.error.cause.field).toBe('csr');
    const list = await tlsCall('GET', `${client()}/current-api-session/certificates`, { ca, token });
    expect(list.body.meta.pagination.totalCount).toBe(MAX_CERTIFICATES_PER_SESSION);
  });
});
