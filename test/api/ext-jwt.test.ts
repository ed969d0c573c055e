/**
 * External JWT signers (CRUD, the client's list, references from auth policies) and `POST /authenticate?method=ext-jwt`
 * with tokens signed by keys made here: a signer by certificate, and signers by a JWKS endpoint served by this test
 * on 127.0.0.1.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, importPKCS8, type JWK, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminGate, loginGate } from '../../src/auth/rate-limit.js';
import { DEFAULT_AUTH_POLICY } from '../../src/model/auth-policy.js';
import { createRootCa } from '../../src/pki/ca.js';
import { interceptNextWrite } from '../support/api.js';
import { manualClock } from '../support/clock.js';
import { conformant, ownOperations } from '../support/conformance.js';
import { expectOnlyService, grantDial } from '../support/grant.js';
import { whileSaturated } from '../support/saturate.js';
import { call, login, type Res, startServer, type TestServer } from '../support/server.js';

const clock = manualClock(Date.now());
let srv: TestServer;
let token: string;
const M = 'management' as const;
const C = 'client' as const;
const ISSUER = 'https://idp.test';
const AUDIENCE = 'keel-test';

type Key = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

/** The test's JWKS server: `/jwks` serves `jwks`, counting requests. */
let jwksServer: Server;
let jwksUrl: string;
let jwks: { keys: JWK[] } = { keys: [] };
let jwksHits = 0;

let certSigner: { id: string; key: Key; kid: string; certPem: string };
let jwksSigner: { id: string; key: Key; kid: string };

beforeAll(async () => {
  srv = await startServer({ clock });
  token = await login(srv.base);
  jwksServer = createServer((req, res) => {
    jwksHits++;
    if (req.url === '/huge') {
      res.end(JSON.stringify({ keys: [], pad: 'x'.repeat(300 * 1024) }));
      return;
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(jwks));
  });
  await new Promise<void>((r) => jwksServer.listen(0, '127.0.0.1', r));
  jwksUrl = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks`;

  const ca = await createRootCa({ commonName: 'ext-jwt-signer' });
  const cert = await createSigner({ name: 'by-cert', certPem: ca.certPem, kid: 'cert-kid' });
  expect(cert.status, cert.text).toBe(201);
  certSigner = {
    id: cert.body.data.id,
    key: await importPKCS8(ca.keyPem, 'ES256'),
    kid: 'cert-kid',
    certPem: ca.certPem,
  };

  const pair = await generateKeyPair('RS256');
  jwks = { keys: [{ ...(await exportJWK(pair.publicKey)), kid: 'jwks-1', alg: 'RS256', use: 'sig' }] };
  const byJwks = await createSigner({ name: 'by-jwks', jwksEndpoint: jwksUrl, issuer: `${ISSUER}/jwks` });
  expect(byJwks.status, byJwks.text).toBe(201);
  jwksSigner = { id: byJwks.body.data.id, key: pair.privateKey, kid: 'jwks-1' };
});
afterAll(async () => {
  const { served, missing } = ownOperations('test/api/ext-jwt.test.ts', srv.ctl.ops);
  await srv.stop();
  await new Promise((r) => jwksServer.close(r));
  expect(served.length).toBe(7);
  expect(missing).toEqual([]);
});

function expectError(res: Res, status: number, code: string, field?: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.body.error.code).toBe(code);
  if (field !== undefined) expect(res.body.error.cause.field).toBe(field);
}

let seq = 0;
function createSigner(body: Record<string, unknown>): Promise<Res> {
  return conformant(M, 'POST', '/external-jwt-signers', srv.base, {
    token,
    body: {
      enabled: true,
      issuer: ISSUER,
      audience: AUDIENCE,
      externalAuthUrl: 'https://idp.test/auth',
      ...body,
      name: `${body.name ?? 'signer'}-${++seq}`,
    },
  });
}

async function createPolicy(extJwt: { allowed: boolean; allowedSigners: string[] | null }): Promise<string> {
  const body = structuredClone(DEFAULT_AUTH_POLICY) as any;
  body.name = `ext-jwt-policy-${++seq}`;
  body.primary.extJwt = extJwt;
  const r = await call('POST', `${srv.mgmt}/auth-policies`, { token, body });
  expect(r.status, r.text).toBe(201);
  return r.body.data.id;
}

async function createIdentity(extra: Record<string, unknown> = {}): Promise<string> {
  const r = await call('POST', `${srv.mgmt}/identities`, {
    token,
    body: { name: `ext-jwt-user-${++seq}`, type: 'User', isAdmin: false, ...extra },
  });
  expect(r.status, r.text).toBe(201);
  return r.body.data.id;
}

interface TokenOpts {
  key?: Key;
  alg?: string;
  kid?: string;
  iss?: string;
  aud?: string;
  exp_s?: number;
  nbf_s?: number;
  claims?: Record<string, unknown>;
}
function jwt(sub: string, o: TokenOpts): Promise<string> {
  const now_s = Math.floor(clock.now() / 1000);
  return new SignJWT({ sub, ...(o.claims ?? {}) })
    .setProtectedHeader({ alg: o.alg ?? 'ES256', ...(o.kid ? { kid: o.kid } : {}) })
    .setIssuer(o.iss ?? ISSUER)
    .setAudience(o.aud ?? AUDIENCE)
    .setIssuedAt(now_s)
    .setNotBefore(o.nbf_s ?? now_s)
    .setExpirationTime(o.exp_s ?? now_s + 300)
    .sign(o.key!);
}
const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const certToken = (sub: string, o: TokenOpts = {}) => jwt(sub, { key: certSigner.key, kid: certSigner.kid, ...o });
const jwksToken = (sub: string, o: TokenOpts = {}) =>
  jwt(sub, { key: jwksSigner.key, kid: jwksSigner.kid, alg: 'RS256', iss: `${ISSUER}/jwks`, ...o });

function extJwtLogin(jwtText: string, api: 'client' | 'management' = C): Promise<Res> {
  return conformant(api, 'POST', '/authenticate', srv.base, {
    query: 'method=ext-jwt',
    headers: { authorization: `Bearer ${jwtText}` },
    body: {},
  });
}

describe('ext-jwt login', () => {
  it('a token of the cert signer logs the identity in; the session works', async () => {
    const id = await createIdentity();
    const r = await extJwtLogin(await certToken(id));
    expect(r.status, r.text).toBe(200);
    expect(r.body.data.identity.id).toBe(id);
    const session = r.headers.get('zt-session')!;
    const me = await conformant(C, 'GET', '/current-identity', srv.base, { token: session });
    expect(me.status, me.text).toBe(200);
    expect(me.body.data.id).toBe(id);
    // the management API takes it too
    expect((await extJwtLogin(await certToken(id), M)).status).toBe(200);
  });

  it('a token of the JWKS signer logs in; the key set is cached', async () => {
    const id = await createIdentity();
    const before = jwksHits;
    expect((await extJwtLogin(await jwksToken(id))).status).toBe(200);
    const r = await extJwtLogin(await jwksToken(id));
    expect(r.status, r.text).toBe(200);
    expect(jwksHits - before).toBeLessThanOrEqual(1);
    // the session lists the services granted to the identity
    const granted = await grantDial(call, srv.mgmt, token, `@${id}`);
    await expectOnlyService(call, srv.client, r.headers.get('zt-session')!, granted);
  });

  it('goes through the auth rate limiter: 429 with Retry-After when its lane is full; an admin has a lane of its own', async () => {
    const user = await createIdentity();
    const admin = await createIdentity({ isAdmin: true });
    const refused = (r: Res) => {
      expect([r.status, r.body.error?.code], r.text).toEqual([429, 'SERVER_TOO_MANY_REQUESTS']);
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    };
    await whileSaturated(loginGate, async () => {
      refused(await extJwtLogin(await jwksToken(user)));
      expect((await extJwtLogin(await certToken(admin))).status).toBe(200);
    });
    await whileSaturated(adminGate, async () => {
      refused(await extJwtLogin(await certToken(admin)));
      expect((await extJwtLogin(await certToken(user))).status).toBe(200);
    });
    expect((await extJwtLogin(await certToken(admin))).status).toBe(200);
  });

  it('a rotated JWKS key is fetched on its unknown kid, at most once per cooldown', async () => {
    const id = await createIdentity();
    expect((await extJwtLogin(await jwksToken(id))).status).toBe(200); // cached
    clock.advance(60_000);
    const pair = await generateKeyPair('RS256');
    jwks = { keys: [...jwks.keys, { ...(await exportJWK(pair.publicKey)), kid: 'jwks-2', alg: 'RS256' }] };
    const before = jwksHits;
    const rotated = await jwksToken(id, { key: pair.privateKey, kid: 'jwks-2' });
    expect((await extJwtLogin(rotated)).status).toBe(200);
    expect(jwksHits - before).toBe(1);
    // a flood of unknown kids right after causes no further fetch
    const unknown = await jwksToken(id, { key: pair.privateKey, kid: 'jwks-unknown' });
    for (let i = 0; i < 5; i++) expectError(await extJwtLogin(unknown), 401, 'INVALID_AUTH');
    expect(jwksHits - before).toBe(1);
  });

  it('external ids are matched when the signer says useExternalId, with its claimsProperty', async () => {
    const r = await createSigner({
      name: 'ext-id',
      jwksEndpoint: jwksUrl,
      issuer: `${ISSUER}/ext`,
      useExternalId: true,
      claimsProperty: 'email',
    });
    expect(r.status, r.text).toBe(201);
    const id = await createIdentity({ externalId: 'alice@example.test' });
    const ok = await jwksToken('ignored', { iss: `${ISSUER}/ext`, claims: { email: 'alice@example.test' } });
    const login = await extJwtLogin(ok);
    expect(login.status, login.text).toBe(200);
    expect(login.body.data.identity.id).toBe(id);
    // the id in `sub` is not used by this signer
    expectError(await extJwtLogin(await jwksToken(id, { iss: `${ISSUER}/ext` })), 401, 'INVALID_AUTH');
  });

  it('refuses bad tokens with 401 INVALID_AUTH and no detail', async () => {
    const id = await createIdentity();
    const now_s = Math.floor(clock.now() / 1000);
    const other = await generateKeyPair('ES256');
    const bad = [
      await certToken(id, { kid: 'wrong-kid' }),
      await certToken(id, { key: other.privateKey }), // signed by another key
      await certToken(id, { iss: 'https://other.test' }),
      await certToken(id, { aud: 'someone-else' }),
      await certToken(id, { exp_s: now_s - 120 }), // expired beyond the leeway
      await certToken(id, { nbf_s: now_s + 120 }), // not yet valid
      await certToken('no-such-identity'),
      'not.a.jwt',
      // no signature, and HMAC keyed with the signer's public certificate (algorithm confusion)
      `${b64({ alg: 'none', kid: certSigner.kid })}.${b64({ sub: id, iss: ISSUER, aud: AUDIENCE, exp: now_s + 60 })}.`,
      await jwt(id, {
        key: new TextEncoder().encode(certSigner.certPem) as unknown as Key,
        alg: 'HS256',
        kid: 'cert-kid',
      }),
    ];
    for (const b of bad) {
      const r = await extJwtLogin(b);
      expectError(r, 401, 'INVALID_AUTH');
      expect(r.text).not.toContain('kid');
      expect(r.headers.get('zt-session')).toBeNull();
    }
    // no header at all, and a token within the leeway passes
    expectError(
      await conformant(C, 'POST', '/authenticate', srv.base, { query: 'method=ext-jwt', body: {} }),
      401,
      'INVALID_AUTH',
    );
    expect((await extJwtLogin(await certToken(id, { exp_s: now_s - 10 }))).status).toBe(200);
  });

  it('refuses a disabled signer, a disabled identity and a policy that disallows the signer', async () => {
    const id = await createIdentity();
    const signer = await createSigner({ name: 'toggle', jwksEndpoint: jwksUrl, issuer: `${ISSUER}/toggle` });
    const t = await jwksToken(id, { iss: `${ISSUER}/toggle` });
    expect((await extJwtLogin(t)).status).toBe(200);
    const off = await conformant(M, 'PATCH', '/external-jwt-signers/{id}', srv.base, {
      token,
      params: { id: signer.body.data.id },
      body: { enabled: false },
    });
    expect(off.status, off.text).toBe(200);
    expectError(await extJwtLogin(t), 401, 'INVALID_AUTH');

    // a policy allowing only the cert signer
    const onlyCert = await createPolicy({ allowed: true, allowedSigners: [certSigner.id] });
    const limited = await createIdentity({ authPolicyId: onlyCert });
    expect((await extJwtLogin(await certToken(limited))).status).toBe(200);
    expectError(await extJwtLogin(await jwksToken(limited)), 401, 'INVALID_AUTH');
    // a policy without ext-jwt
    const none = await createIdentity({ authPolicyId: await createPolicy({ allowed: false, allowedSigners: null }) });
    expectError(await extJwtLogin(await certToken(none)), 401, 'INVALID_AUTH');

    const dis = await call('POST', `${srv.mgmt}/identities/${id}/disable`, { token, body: { durationMinutes: 0 } });
    expect(dis.status, dis.text).toBe(200);
    expectError(await extJwtLogin(await certToken(id)), 401, 'INVALID_AUTH');
  });

  it('a login whose signer or auth policy changes while it verifies is refused (checked again where it applies)', async () => {
    const policy = await createPolicy({ allowed: true, allowedSigners: null });
    const id = await createIdentity({ authPolicyId: policy });
    const sessions = () => srv.ctl.svc.store.lookup('api-sessions', 'identityId', id).length;
    const during = async (change: () => Promise<unknown>) => {
      const before = sessions();
      interceptNextWrite(srv.ctl.svc)(change);
      expectError(await extJwtLogin(await certToken(id)), 401, 'INVALID_AUTH');
      expect(sessions()).toBe(before); // nothing half-written
    };
    // time passes between the login's read and the change (the policy's check is its updatedAt)
    const patch = (path: string, body: Record<string, unknown>) => () => {
      clock.advance(1);
      return call('PATCH', `${srv.mgmt}${path}`, { token, body }).then((r) => expect(r.status, r.text).toBe(200));
    };
    // the signer is disabled between the token's verification and the session's write
    await during(patch(`/external-jwt-signers/${certSigner.id}`, { enabled: false }));
    await patch(`/external-jwt-signers/${certSigner.id}`, { enabled: true })();
    // the policy stops allowing ext-jwt meanwhile
    await during(patch(`/auth-policies/${policy}`, { primary: { extJwt: { allowed: false, allowedSigners: null } } }));
    await patch(`/auth-policies/${policy}`, { primary: { extJwt: { allowed: true, allowedSigners: null } } })();
    // the identity is moved to a policy without ext-jwt meanwhile
    const none = await createPolicy({ allowed: false, allowedSigners: null });
    await during(patch(`/identities/${id}`, { authPolicyId: none }));
    await patch(`/identities/${id}`, { authPolicyId: policy })();
    // the signer's claim mapping changes meanwhile (the same token would now name someone else, or no one)
    await during(patch(`/external-jwt-signers/${certSigner.id}`, { claimsProperty: 'email' }));
    await patch(`/external-jwt-signers/${certSigner.id}`, { claimsProperty: 'sub' })();
    // untouched, the same login goes through
    expect((await extJwtLogin(await certToken(id))).status).toBe(200);
  });

  it('a JWKS endpoint answering more than the size bound yields no keys', async () => {
    const r = await createSigner({
      name: 'huge',
      jwksEndpoint: jwksUrl.replace('/jwks', '/huge'),
      issuer: `${ISSUER}/huge`,
    });
    expect(r.status, r.text).toBe(201);
    const id = await createIdentity();
    expectError(await extJwtLogin(await jwksToken(id, { iss: `${ISSUER}/huge` })), 401, 'INVALID_AUTH');
  });
});

describe('secondary.requireExtJwtSigner', () => {
  it('a password session stays partial until a token of the required signer for the same identity', async () => {
    const body = structuredClone(DEFAULT_AUTH_POLICY) as any;
    body.name = `secondary-${++seq}`;
    body.secondary.requireExtJwtSigner = certSigner.id;
    const pol = await call('POST', `${srv.mgmt}/auth-policies`, { token, body });
    expect(pol.status, pol.text).toBe(201);
    const id = await createIdentity({ authPolicyId: pol.body.data.id });
    const name = `second-${seq}`;
    const a = await call('POST', `${srv.mgmt}/authenticators`, {
      token,
      body: { method: 'updb', identityId: id, username: name, password: `${name}-pw` },
    });
    expect(a.status, a.text).toBe(201);
    const pw = await call('POST', `${srv.client}/authenticate?method=password`, {
      body: { username: name, password: `${name}-pw` },
    });
    expect(pw.status, pw.text).toBe(200);
    const session = pw.headers.get('zt-session')!;
    expect(pw.body.data.authQueries).toEqual([
      expect.objectContaining({
        typeId: 'EXT-JWT',
        provider: 'url',
        id: certSigner.id,
        httpUrl: 'https://idp.test/auth',
      }),
    ]);
    expect((await call('GET', `${srv.client}/current-identity`, { token: session })).status).toBe(401);

    // a token of another identity, or of another signer, does not complete it
    const other = await createIdentity();
    const secondStep = async (jwtText: string) =>
      conformant(C, 'POST', '/authenticate', srv.base, {
        query: 'method=ext-jwt',
        token: session,
        headers: { authorization: `Bearer ${jwtText}` },
        body: {},
      });
    expectError(await secondStep(await certToken(other)), 401, 'INVALID_AUTH');
    expectError(await secondStep(await jwksToken(id)), 401, 'INVALID_AUTH');
    expect((await call('GET', `${srv.client}/current-identity`, { token: session })).status).toBe(401);

    const done = await secondStep(await certToken(id));
    expect(done.status, done.text).toBe(200);
    expect(done.body.data.authQueries).toEqual([]);
    expect(done.headers.get('zt-session')).toBeNull();
    expect((await call('GET', `${srv.client}/current-identity`, { token: session })).status).toBe(200);

    // a primary login with the required signer's token needs no second step
    const direct = await extJwtLogin(await certToken(id));
    expect(direct.status, direct.text).toBe(200);
    expect(direct.body.data.authQueries).toEqual([]);
  });
});

describe('external JWT signer CRUD', () => {
  it('reads, lists, updates and deletes; the client list shows enabled signers only', async () => {
    const ca = await createRootCa({ commonName: 'crud-signer' });
    const r = await createSigner({ name: 'crud', certPem: ca.certPem, kid: 'crud-kid' });
    expect(r.status, r.text).toBe(201);
    const id = r.body.data.id;
    const d = await conformant(M, 'GET', '/external-jwt-signers/{id}', srv.base, { token, params: { id } });
    expect(d.status, d.text).toBe(200);
    expect(d.body.data).toMatchObject({ commonName: 'crud-signer', claimsProperty: 'sub', useExternalId: false });
    expect(d.body.data.fingerprint).toMatch(/^[0-9a-f]{40}$/);
    const l = await conformant(M, 'GET', '/external-jwt-signers', srv.base, { token, query: `filter=id="${id}"` });
    expect(l.body.data.map((x: any) => x.id)).toEqual([id]);

    const u = await conformant(M, 'PUT', '/external-jwt-signers/{id}', srv.base, {
      token,
      params: { id },
      body: {
        name: `crud-renamed-${++seq}`,
        enabled: false,
        issuer: ISSUER,
        audience: AUDIENCE,
        jwksEndpoint: jwksUrl,
        externalAuthUrl: 'https://idp.test/auth',
      },
    });
    expect(u.status, u.text).toBe(200);
    const after = await call('GET', `${srv.mgmt}/external-jwt-signers/${id}`, { token });
    expect(after.body.data).toMatchObject({ certPem: null, jwksEndpoint: jwksUrl, fingerprint: '', enabled: false });

    const client = await conformant(C, 'GET', '/external-jwt-signers', srv.base, {});
    expect(client.status, client.text).toBe(200);
    const ids = client.body.data.map((x: any) => x.id);
    expect(ids).toContain(certSigner.id);
    expect(ids).not.toContain(id);
    expect(client.body.data[0]).not.toHaveProperty('certPem');

    const del = await conformant(M, 'DELETE', '/external-jwt-signers/{id}', srv.base, { token, params: { id } });
    expect(del.status, del.text).toBe(200);
    expect((await call('GET', `${srv.mgmt}/external-jwt-signers/${id}`, { token })).status).toBe(404);
  });

  it('a PATCH of other fields racing a switch from certificate to JWKS leaves the switch whole', async () => {
    const ca = await createRootCa({ commonName: 'raced-signer' });
    const r = await createSigner({ name: 'raced', certPem: ca.certPem, kid: 'raced-kid' });
    expect(r.status, r.text).toBe(201);
    const id = r.body.data.id;
    const name = (await call('GET', `${srv.mgmt}/external-jwt-signers/${id}`, { token })).body.data.name;
    // the switch (a PUT: in a PATCH a null certPem is no change) applies first; the rename, checked against the
    // certificate signer, after it
    interceptNextWrite(srv.ctl.svc)(async () => {
      const put = {
        name,
        enabled: true,
        issuer: ISSUER,
        audience: AUDIENCE,
        kid: 'raced-kid',
        jwksEndpoint: jwksUrl,
      };
      const sw = await call('PUT', `${srv.mgmt}/external-jwt-signers/${id}`, { token, body: put });
      expect(sw.status, sw.text).toBe(200);
    });
    const renamed = await call('PATCH', `${srv.mgmt}/external-jwt-signers/${id}`, {
      token,
      body: { name: `raced-renamed-${++seq}`, enabled: false },
    });
    expect(renamed.status, renamed.text).toBe(200);
    const after = await call('GET', `${srv.mgmt}/external-jwt-signers/${id}`, { token });
    expect(after.body.data).toMatchObject({ certPem: null, jwksEndpoint: jwksUrl, fingerprint: '', enabled: false });
    expect(after.body.data.name).toMatch(/^raced-renamed-/);
  });

  it('refuses bad bodies', async () => {
    const ca = await createRootCa({ commonName: 'dup-signer' });
    expectError(await createSigner({ name: 'neither' }), 400, 'COULD_NOT_VALIDATE', 'certPem');
    expectError(
      await createSigner({ name: 'both', certPem: ca.certPem, jwksEndpoint: jwksUrl }),
      400,
      'COULD_NOT_VALIDATE',
      'jwksEndpoint',
    );
    expectError(await createSigner({ name: 'bad-pem', certPem: 'nope' }), 400, 'INVALID_CERT_PEM', 'certPem');
    expectError(
      await createSigner({ name: 'bad-url', jwksEndpoint: 'ftp://x' }),
      400,
      'COULD_NOT_VALIDATE',
      'jwksEndpoint',
    );
    expectError(
      await createSigner({ name: 'empty-iss', jwksEndpoint: jwksUrl, issuer: ' ' }),
      400,
      'COULD_NOT_VALIDATE',
      'issuer',
    );
    expect((await createSigner({ name: 'first', certPem: ca.certPem })).status).toBe(201);
    expectError(await createSigner({ name: 'dup', certPem: ca.certPem }), 400, 'COULD_NOT_VALIDATE', 'fingerprint');
    expectError(
      await createSigner({ name: 'dup-kid', jwksEndpoint: jwksUrl, kid: 'cert-kid' }),
      400,
      'COULD_NOT_VALIDATE',
      'kid',
    );
  });

  it('auth policies name existing signers only; a named signer cannot be deleted', async () => {
    const r = await createSigner({ name: 'named', jwksEndpoint: jwksUrl, issuer: `${ISSUER}/named` });
    const id = r.body.data.id;
    const unknown = structuredClone(DEFAULT_AUTH_POLICY) as any;
    unknown.name = `unknown-signer-${++seq}`;
    unknown.primary.extJwt.allowedSigners = ['no-such-signer'];
    expectError(await call('POST', `${srv.mgmt}/auth-policies`, { token, body: unknown }), 400, 'COULD_NOT_VALIDATE');
    unknown.primary.extJwt.allowedSigners = null;
    unknown.secondary.requireExtJwtSigner = 'no-such-signer';
    expectError(await call('POST', `${srv.mgmt}/auth-policies`, { token, body: unknown }), 400, 'COULD_NOT_VALIDATE');

    const policyId = await createPolicy({ allowed: true, allowedSigners: [id] });
    const del = await call('DELETE', `${srv.mgmt}/external-jwt-signers/${id}`, { token });
    expectError(del, 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY');
    // once the policy no longer names it, it goes
    const p = await call('PATCH', `${srv.mgmt}/auth-policies/${policyId}`, {
      token,
      body: { primary: { extJwt: { allowedSigners: [] } } },
    });
    expect(p.status, p.text).toBe(200);
    expect((await call('DELETE', `${srv.mgmt}/external-jwt-signers/${id}`, { token })).status).toBe(200);
  });
});
