/**
 * `POST /enroll/token` (token enrollment with an external JWT signer's token, with or without a CSR made by
 * openssl) and `POST /enroll/challenge` (a nonce signed with the enrollment key, checked with the JWKS). Every
 * response goes through the spec check (`call()`).
 */
import { createPublicKey, verify } from 'node:crypto';
import { importPKCS8, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_AUTH_POLICY } from '../../src/model/auth-policy.js';
import { createRootCa } from '../../src/pki/ca.js';
import { opensslCsr, Scratch } from '../pki/helpers.js';
import { interceptNextWrite } from '../support/api.js';
import { expectOwnCoverageAfterAll } from '../support/conformance.js';
import { call, login, type Res, startServer, type TestServer } from '../support/server.js';

const s = new Scratch();
afterAll(() => s.remove());
const opsServed = expectOwnCoverageAfterAll('test/api/token-enroll.test.ts');

const ISSUER = 'https://idp.enroll.test';
const AUDIENCE = 'keel-enroll';
let seq = 0;
const code = (r: Res) => [r.status, r.body?.error?.code, r.body?.error?.cause?.field];

describe('token enrollment and the enrollment challenge', () => {
  let srv: TestServer;
  let admin: string;
  /** Each signer's own certificate (fingerprints are unique) and signing key, by kid. */
  const keys = new Map<string, Awaited<ReturnType<typeof importPKCS8>>>();
  const signerCert = async (kid: string) => {
    const ca = await createRootCa({ commonName: `enroll-signer-${kid}` });
    keys.set(kid, await importPKCS8(ca.keyPem, 'ES256'));
    return ca.certPem;
  };
  beforeAll(async () => {
    srv = await startServer();
    admin = await login(srv.base);
    opsServed.push(...srv.ctl.ops);
  });
  afterAll(() => srv.stop());

  /** A signer of ISSUER's tokens (kid `kid`) with the given enrollment settings. */
  const signer = async (kid: string, settings: Record<string, unknown>) => {
    const body = {
      name: `enroll-signer-${++seq}`,
      enabled: true,
      issuer: ISSUER,
      audience: AUDIENCE,
      certPem: await signerCert(kid),
      kid,
      useExternalId: true,
      ...settings,
    };
    const r = await call('POST', `${srv.mgmt}/external-jwt-signers`, { token: admin, body });
    expect(r.status, r.text).toBe(201);
    return r.body.data.id as string;
  };
  const jwt = (kid: string, claims: Record<string, unknown>) => {
    const now_s = Math.floor(Date.now() / 1000);
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setIssuedAt(now_s)
      .setExpirationTime(now_s + 300)
      .sign(keys.get(kid)!);
  };
  const enroll = (jwtText: string | null, body: unknown = {}, headers: Record<string, string> = {}) =>
    call('POST', `${srv.client}/enroll/token`, {
      body,
      headers: { ...(jwtText ? { authorization: `Bearer ${jwtText}` } : {}), ...headers },
    });
  const identityByExternalId = async (externalId: string) =>
    (
      await call('GET', `${srv.mgmt}/identities?filter=${encodeURIComponent(`externalId = "${externalId}"`)}`, {
        token: admin,
      })
    ).body.data[0];

  it('without a CSR: an identity named and attributed by the claims, which then logs in with ext-jwt', async () => {
    const signerId = await signer('tok-1', {
      enrollToTokenEnabled: true,
      enrollNameClaimsSelector: 'preferred_username',
      enrollAttributeClaimsSelector: '/groups',
    });
    const claims = { sub: 'ext-user-1', preferred_username: 'alice', groups: ['eng', 'ops', 7] };
    const r = await enroll(await jwt('tok-1', claims));
    expect([r.status, r.body.data]).toEqual([200, {}]);
    const created = await identityByExternalId('ext-user-1');
    expect(created).toMatchObject({ name: 'alice', roleAttributes: ['eng', 'ops'], authPolicyId: 'default' });
    const ext = await call('POST', `${srv.client}/authenticate?method=ext-jwt`, {
      body: {},
      headers: { authorization: `Bearer ${await jwt('tok-1', { sub: 'ext-user-1' })}` },
    });
    expect([ext.status, ext.body.data.identityId]).toEqual([200, created.id]);
    // the same subject again
    expect(code(await enroll(await jwt('tok-1', { ...claims, preferred_username: 'alice2' })))).toEqual([
      409,
      'ENROLLMENT_IDENTITY_ALREADY_ENROLLED',
      undefined,
    ]);
    // a CSR is not allowed by this signer
    const csr = opensslCsr(s, `t${++seq}`, 'ec', '/CN=x');
    expect(
      code(await enroll(await jwt('tok-1', { sub: 'ext-user-9', preferred_username: 'z' }), { clientCsr: csr })),
    ).toEqual([409, 'INVALID_ENROLLMENT_NOT_ALLOWED', undefined]);
    // naming this signer explicitly works; naming another one does not verify the token
    const named = await enroll(
      await jwt('tok-1', { sub: 'ext-user-2', preferred_username: 'bob' }),
      {},
      {
        'ziti-token-issuer-id': signerId,
      },
    );
    expect(named.status).toBe(200);
    const other = await signer('tok-other', { enrollToTokenEnabled: true });
    const wrong = await enroll(await jwt('tok-1', { sub: 'ext-user-3' }), {}, { 'ziti-token-issuer-id': other });
    expect(code(wrong)).toEqual([400, 'INVALID_ENROLLMENT_TOKEN', undefined]);
  });

  it('the id claim is the one ext-jwt login reads: a namespaced claimsProperty is a property name, not a path', async () => {
    const claim = `${ISSUER}/uid`;
    await signer('tok-ns', { enrollToTokenEnabled: true, claimsProperty: claim });
    // a nested claim at the path the name would spell must not be taken for it
    const path = { 'https:': { '': { 'idp.enroll.test': { uid: 'ns-decoy' } } } };
    const r = await enroll(await jwt('tok-ns', { sub: 'ns-sub', [claim]: 'ns-user-1', ...path }));
    expect([r.status, r.body.data]).toEqual([200, {}]);
    const created = await identityByExternalId('ns-user-1');
    expect(created).toMatchObject({ name: 'ns-sub' });
    expect(await identityByExternalId('ns-decoy')).toBeUndefined();
    const ext = await call('POST', `${srv.client}/authenticate?method=ext-jwt`, {
      body: {},
      headers: { authorization: `Bearer ${await jwt('tok-ns', { sub: 'other', [claim]: 'ns-user-1' })}` },
    });
    expect([ext.status, ext.body.data?.identityId]).toEqual([200, created.id]);
  });

  it('with a CSR: the identity also gets a network-issued certificate', async () => {
    await signer('cert-1', { enrollToCertEnabled: true });
    const csr = opensslCsr(s, `t${++seq}`, 'ec', '/CN=ignored');
    const r = await enroll(await jwt('cert-1', { sub: 'device-77' }), { clientCsr: csr });
    expect(r.status).toBe(200);
    expect(r.body.data.cert).toContain('-----BEGIN CERTIFICATE-----');
    expect(r.body.data.ca).toContain('-----BEGIN CERTIFICATE-----');
    // named by the subject (the default name selector), externalId the subject
    const created = await identityByExternalId('device-77');
    expect(created.name).toBe('device-77');
    const auths = (await call('GET', `${srv.mgmt}/identities/${created.id}/authenticators`, { token: admin })).body
      .data;
    expect(auths).toMatchObject([{ method: 'cert', isIssuedByNetwork: true }]);
    // token enrollment is not allowed by this signer; a bad CSR is refused
    expect(code(await enroll(await jwt('cert-1', { sub: 'device-78' })))).toEqual([
      409,
      'INVALID_ENROLLMENT_NOT_ALLOWED',
      undefined,
    ]);
    expect(code(await enroll(await jwt('cert-1', { sub: 'device-79' }), { clientCsr: 'junk' }))).toEqual([
      400,
      'COULD_NOT_PROCESS_CSR',
      undefined,
    ]);
  });

  it('refusals: no or a bad token, missing claims, an auth policy that does not allow the login it would use', async () => {
    await signer('ref-1', { enrollToTokenEnabled: true, enrollNameClaimsSelector: '/profile/name' });
    expect(code(await enroll(null))).toEqual([400, 'INVALID_ENROLLMENT_TOKEN', undefined]);
    expect(code(await enroll('not-a-jwt'))).toEqual([400, 'INVALID_ENROLLMENT_TOKEN', undefined]);
    const forged = (await jwt('ref-1', { sub: 'u', profile: { name: 'n' } })).slice(0, -4) + 'AAAA';
    expect(code(await enroll(forged))).toEqual([400, 'INVALID_ENROLLMENT_TOKEN', undefined]);
    // the name selector points at nothing
    expect(code(await enroll(await jwt('ref-1', { sub: 'u-1' })))).toEqual([
      400,
      'INVALID_ENROLLMENT_TOKEN',
      undefined,
    ]);
    const nested = await enroll(await jwt('ref-1', { sub: 'u-2', profile: { name: 'nested-name' } }));
    expect(nested.status).toBe(200);
    expect((await identityByExternalId('u-2')).name).toBe('nested-name');
    // a policy without ext-jwt logins cannot receive token-enrolled identities
    const policy = structuredClone(DEFAULT_AUTH_POLICY) as any;
    policy.name = `no-ext-jwt-${++seq}`;
    policy.primary.extJwt = { allowed: false, allowedSigners: null };
    const policyId = (await call('POST', `${srv.mgmt}/auth-policies`, { token: admin, body: policy })).body.data.id;
    await signer('ref-2', { enrollToTokenEnabled: true, enrollAuthPolicyId: policyId });
    expect(code(await enroll(await jwt('ref-2', { sub: 'u-3' })))).toEqual([
      409,
      'INVALID_ENROLLMENT_NOT_ALLOWED',
      undefined,
    ]);
    // a signer naming an auth policy that does not exist is refused
    const bad = await call('POST', `${srv.mgmt}/external-jwt-signers`, {
      token: admin,
      body: {
        name: `bad-${++seq}`,
        enabled: true,
        issuer: ISSUER,
        audience: AUDIENCE,
        certPem: await signerCert('ref-3'),
        kid: 'ref-3',
        enrollAuthPolicyId: 'no-such-policy',
      },
    });
    expect(code(bad)).toEqual([400, 'COULD_NOT_VALIDATE', 'enrollAuthPolicyId']);
  });

  it("a signer's enrollAuthPolicyId is a restricting reference: the policy is not deleted under it, even racing", async () => {
    const policy = structuredClone(DEFAULT_AUTH_POLICY) as any;
    policy.name = `named-by-signer-${++seq}`;
    const policyId = (await call('POST', `${srv.mgmt}/auth-policies`, { token: admin, body: policy })).body.data.id;
    const signerId = await signer('named-1', { enrollToTokenEnabled: true, enrollAuthPolicyId: policyId });
    const refused = await call('DELETE', `${srv.mgmt}/auth-policies/${policyId}`, { token: admin });
    expect(code(refused)).toEqual([409, 'CAN_NOT_DELETE_REFERENCED_ENTITY', 'id']);
    // once no signer names it, the policy goes
    const moved = await call('PATCH', `${srv.mgmt}/external-jwt-signers/${signerId}`, {
      token: admin,
      body: { enrollAuthPolicyId: '' },
    });
    expect(moved.status, moved.text).toBe(200);
    expect((await call('DELETE', `${srv.mgmt}/auth-policies/${policyId}`, { token: admin })).status).toBe(200);

    // a signer written while the policy it names is deleted: the write finds the policy gone where it applies
    policy.name = `raced-by-signer-${++seq}`;
    const racedId = (await call('POST', `${srv.mgmt}/auth-policies`, { token: admin, body: policy })).body.data.id;
    const meanwhile = interceptNextWrite(srv.ctl.svc);
    let deleted: Res | undefined;
    meanwhile(async () => {
      deleted = await call('DELETE', `${srv.mgmt}/auth-policies/${racedId}`, { token: admin });
    });
    const raced = await call('PATCH', `${srv.mgmt}/external-jwt-signers/${signerId}`, {
      token: admin,
      body: { enrollAuthPolicyId: racedId },
    });
    expect(deleted?.status, deleted?.text).toBe(200);
    expect(code(raced)).toEqual([400, 'COULD_NOT_VALIDATE', 'enrollAuthPolicyId']);
    expect(srv.ctl.svc.get('external-jwt-signers', signerId)?.enrollAuthPolicyId).toBe('');
  });

  it('the signer is checked again where the write applies: disabled, switched off or rekeyed meanwhile, no identity', async () => {
    const signerId = await signer('raced-1', { enrollToTokenEnabled: true, enrollToCertEnabled: true });
    const patch = (body: Record<string, unknown>) =>
      call('PATCH', `${srv.mgmt}/external-jwt-signers/${signerId}`, { token: admin, body });
    /** Enrolls `sub` while `change` is patched into the signer between the handler's checks and the write. */
    const raced = async (
      sub: string,
      change: Record<string, unknown>,
      restore: Record<string, unknown>,
      csr = false,
    ) => {
      const token = await jwt('raced-1', { sub });
      let changed: Res | undefined;
      interceptNextWrite(srv.ctl.svc)(async () => {
        changed = await patch(change);
      });
      const body = csr ? { clientCsr: opensslCsr(s, `t${++seq}`, 'ec', '/CN=x') } : {};
      const r = await enroll(token, body);
      expect(changed?.status, changed?.text).toBe(200);
      expect(await identityByExternalId(sub)).toBeUndefined();
      expect((await patch(restore)).status).toBe(200);
      return code(r);
    };
    expect(await raced('raced-off', { enabled: false }, { enabled: true })).toEqual([
      400,
      'INVALID_ENROLLMENT_TOKEN',
      undefined,
    ]);
    expect(await raced('raced-tok', { enrollToTokenEnabled: false }, { enrollToTokenEnabled: true })).toEqual([
      409,
      'INVALID_ENROLLMENT_NOT_ALLOWED',
      undefined,
    ]);
    expect(await raced('raced-crt', { enrollToCertEnabled: false }, { enrollToCertEnabled: true }, true)).toEqual([
      409,
      'INVALID_ENROLLMENT_NOT_ALLOWED',
      undefined,
    ]);
    const oldPem = srv.ctl.svc.get('external-jwt-signers', signerId)?.certPem;
    const newPem = (await createRootCa({ commonName: `rekeyed-${++seq}` })).certPem;
    expect(await raced('raced-key', { certPem: newPem }, { certPem: oldPem })).toEqual([
      400,
      'INVALID_ENROLLMENT_TOKEN',
      undefined,
    ]);
    const others: [string, string][] = [
      ['kid', 'raced-other-kid'],
      ['issuer', 'https://other.enroll.test'],
      ['audience', 'other-audience'],
    ];
    for (const [field, other] of others) {
      const was = srv.ctl.svc.get('external-jwt-signers', signerId)?.[field];
      expect(await raced(`raced-${field}`, { [field]: other }, { [field]: was }), field).toEqual([
        400,
        'INVALID_ENROLLMENT_TOKEN',
        undefined,
      ]);
    }
    // unchanged, the same signer enrolls
    expect((await enroll(await jwt('raced-1', { sub: 'raced-ok' }))).status).toBe(200);
  });

  it('the auth policy is checked again where the write applies: one changed meanwhile enrolls no identity', async () => {
    const policy = structuredClone(DEFAULT_AUTH_POLICY) as any;
    policy.name = `raced-policy-${++seq}`;
    const policyId = (await call('POST', `${srv.mgmt}/auth-policies`, { token: admin, body: policy })).body.data.id;
    await signer('raced-pol', { enrollToTokenEnabled: true, enrollAuthPolicyId: policyId });
    let changed: Res | undefined;
    interceptNextWrite(srv.ctl.svc)(async () => {
      const primary = { ...policy.primary, extJwt: { ...policy.primary.extJwt, allowed: false } };
      changed = await call('PATCH', `${srv.mgmt}/auth-policies/${policyId}`, { token: admin, body: { primary } });
    });
    const r = await enroll(await jwt('raced-pol', { sub: 'raced-pol-1' }));
    expect(changed?.status, changed?.text).toBe(200);
    expect(code(r)).toEqual([409, 'INVALID_ENROLLMENT_NOT_ALLOWED', undefined]);
    expect(await identityByExternalId('raced-pol-1')).toBeUndefined();
  });

  it('update and patch take null for the enrollment settings, as the spec declares them (x-nullable)', async () => {
    const settings = {
      enrollToCertEnabled: true,
      enrollToTokenEnabled: true,
      enrollNameClaimsSelector: '/profile/name',
      enrollAttributeClaimsSelector: '/groups',
      enrollAuthPolicyId: 'default',
    };
    const externalAuthUrl = 'https://idp.enroll.test/auth';
    const id = await signer('null-1', { ...settings, externalAuthUrl });
    const url = `${srv.mgmt}/external-jwt-signers/${id}`;
    const nulls = Object.fromEntries(Object.keys(settings).map((k) => [k, null]));
    // PATCH: null is "not given", the settings stay
    const patched = await call('PATCH', url, { token: admin, body: nulls });
    expect(patched.status, patched.text).toBe(200);
    expect((await call('GET', url, { token: admin })).body.data).toMatchObject(settings);
    // PUT: null is "not given", the settings go back to their defaults
    const { name, enabled, issuer, audience, certPem, kid } = (await call('GET', url, { token: admin })).body.data;
    const body = { name, enabled, issuer, audience, certPem, kid, externalAuthUrl, ...nulls };
    const put = await call('PUT', url, { token: admin, body });
    expect(put.status, put.text).toBe(200);
    expect((await call('GET', url, { token: admin })).body.data).toMatchObject({
      enrollToCertEnabled: false,
      enrollToTokenEnabled: false,
      enrollNameClaimsSelector: '',
      enrollAttributeClaimsSelector: '',
      enrollAuthPolicyId: '',
    });
  });

  it('/enroll/challenge: the nonce signed with the enrollment key of the JWKS', async () => {
    const [jwk] = (await call('GET', `${srv.client}/enroll/jwks`)).body.keys;
    const nonce = '0d3c1a77-4b8e-4f2a-9c61-2f5e8a9b7c10';
    const r = await call('POST', `${srv.client}/enroll/challenge`, { body: { nonce, keyId: jwk.kid } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ algorithm: 'ES256', kid: jwk.kid });
    expect(r.body.caPool).toContain('-----BEGIN CERTIFICATE-----');
    const publicKey = createPublicKey({ key: jwk, format: 'jwk' });
    const signature = Buffer.from(r.body.signature, 'base64url');
    const ok = (n: string) =>
      verify('sha256', Buffer.from(n), { key: publicKey, dsaEncoding: 'ieee-p1363' }, signature);
    expect(ok(nonce)).toBe(true);
    expect(ok('0d3c1a77-4b8e-4f2a-9c61-2f5e8a9b7c11')).toBe(false);
    const challenge = (body: unknown) => call('POST', `${srv.client}/enroll/challenge`, { body });
    expect(code(await challenge({ nonce, keyId: 'no-such-key' }))).toEqual([400, 'COULD_NOT_VALIDATE', 'keyId']);
    expect(code(await challenge({ nonce: 'not-a-uuid', keyId: jwk.kid }))[1]).toBe('COULD_NOT_VALIDATE');
    // the key signs enrollment and network JWTs: a JWT's signing input is never signed (a forged network JWT would
    // verify with /enroll/jwks)
    const forged = ['{"alg":"ES256","kid":"k"}', '{"em":"network","iss":"https://evil.example/"}']
      .map((part) => Buffer.from(part.replace('"k"', JSON.stringify(jwk.kid))).toString('base64url'))
      .join('.');
    const oracle = await challenge({ nonce: forged, keyId: jwk.kid });
    expect(code(oracle)).toEqual([400, 'COULD_NOT_VALIDATE', 'nonce']);
    expect(oracle.text).not.toContain('signature');
    // a form of UUID the schema's format admits and the key does not sign: a refusal, not a failure
    const urn = await challenge({ nonce: `urn:uuid:${nonce}`, keyId: jwk.kid });
    expect(code(urn)).toEqual([400, 'COULD_NOT_VALIDATE', 'nonce']);
    expect(code(await challenge({ nonce }))[1]).toBe('COULD_NOT_VALIDATE');
  });
});
