/**
 * Enrollment JWTs as OpenZiti's SDKs and CLI check them (sdk-golang `enroll.ValidateToken`): they connect to the
 * JWT's `iss` without verifying TLS, take the certificate the server presents, and verify the JWT's signature with
 * its public key. So every JWT a client enrolls with (identity `ott`/`updb`, router `erott`, the network JWT) must be
 * signed with the key of the API certificate its issuer serves, `kid` the certificate's SHA-1 (OpenZiti's
 * `GetEnrollmentJwtSigner`). On plain HTTP there is no certificate: the controller key signs (test/api/enroll.test.ts).
 */
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, login, startServer, type TestServer } from '../support/server.js';
import { trustCa } from '../support/tls-call.js';

let srv: TestServer;
let admin: string;

beforeAll(async () => {
  srv = await startServer({ engine: 'node', apiTls: true });
  trustCa(readFileSync(join(srv.dataDir, 'pki', 'ca.cert.pem'), 'utf8'));
  admin = await login(srv.base);
});
afterAll(() => srv.stop());

/** The certificate the server at `url` presents, fetched without verifying it (sdk-golang `FetchServerCert`). */
function serverCertOf(url: string): Promise<X509Certificate> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: u.hostname, port: Number(u.port), rejectUnauthorized: false }, () => {
      const raw = socket.getPeerCertificate().raw;
      socket.end();
      resolve(new X509Certificate(raw));
    });
    socket.on('error', reject);
  });
}

/** Verifies `jwt` as the Go SDK does; returns its payload and the certificate it was checked against. */
async function verifiedAsSdk(jwt: string) {
  const iss = JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()).iss as string;
  const cert = await serverCertOf(iss);
  const { payload } = await jwtVerify(jwt, cert.publicKey);
  const header = decodeProtectedHeader(jwt);
  // OpenZiti's kid: the lower-case hex SHA-1 of the signing certificate's DER
  expect(header.kid).toBe(createHash('sha1').update(cert.raw).digest('hex'));
  expect(header.alg).toBe('ES256');
  return payload;
}

describe('enrollment JWTs on an HTTPS controller', () => {
  it("identity ott and updb JWTs verify against the certificate their issuer serves, as OpenZiti's SDK checks", async () => {
    const created = await call('POST', `${srv.mgmt}/identities`, {
      token: admin,
      body: { name: 'jwt-ott', type: 'Device', isAdmin: false, enrollment: { ott: true } },
    });
    expect(created.status, created.text).toBe(201);
    const ott = (await call('GET', `${srv.mgmt}/identities/${created.body.data.id}`, { token: admin })).body.data
      .enrollment.ott;
    expect(await verifiedAsSdk(ott.jwt)).toMatchObject({ em: 'ott', jti: ott.token, iss: srv.base });

    const updbId = (
      await call('POST', `${srv.mgmt}/identities`, {
        token: admin,
        body: { name: 'jwt-updb', type: 'User', isAdmin: false, enrollment: { updb: 'jwt-updb' } },
      })
    ).body.data.id;
    const updb = (await call('GET', `${srv.mgmt}/identities/${updbId}`, { token: admin })).body.data.enrollment.updb;
    expect(await verifiedAsSdk(updb.jwt)).toMatchObject({ em: 'updb', jti: updb.token });
  });

  it("an edge router's enrollment JWT and the network JWT verify the same way", async () => {
    const router = await call('POST', `${srv.mgmt}/edge-routers`, { token: admin, body: { name: 'jwt-router' } });
    expect(router.status, router.text).toBe(201);
    const detail = (await call('GET', `${srv.mgmt}/edge-routers/${router.body.data.id}`, { token: admin })).body.data;
    expect(await verifiedAsSdk(detail.enrollmentJwt)).toMatchObject({ em: 'erott', jti: detail.enrollmentToken });
    const network = (await call('GET', `${srv.client}/network-jwts`)).body.data[0].token as string;
    expect(await verifiedAsSdk(network)).toMatchObject({ em: 'network' });
  });

  it('/enroll/jwks lists the API certificate key first, and /enroll/challenge signs with it', async () => {
    const keys = (await call('GET', `${srv.client}/enroll/jwks`)).body.keys as Array<{ kid: string; alg: string }>;
    const cert = await serverCertOf(srv.base);
    const kid = createHash('sha1').update(cert.raw).digest('hex');
    expect(keys.map((k) => k.kid)).toEqual([kid, expect.any(String)]);
    const nonce = '6f1e0b1c-3d0a-4c1e-9a5b-2f7d8e9a0b1c';
    const r = await call('POST', `${srv.client}/enroll/challenge`, { body: { nonce, keyId: kid } });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ algorithm: 'ES256', kid });
    const { verify } = await import('node:crypto');
    const ok = verify(
      'sha256',
      Buffer.from(nonce),
      { key: cert.publicKey, dsaEncoding: 'ieee-p1363' },
      Buffer.from(r.body.signature, 'base64url'),
    );
    expect(ok).toBe(true);
  });
});
