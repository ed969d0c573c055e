/**
 * CAs with an `externalIdClaim` (end to end, node engine with API TLS): CA auto-enrollment gives the new identity
 * the external id found in its certificate (and no authenticator, as OpenZiti), and certificate login with any
 * certificate of that CA carrying the id finds the identity by it. Claims that could never resolve are refused on
 * create and patch; a patch merges the claim's fields. Responses go through the spec check (`tlsCall`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openssl, opensslCa, opensslIssue, Scratch } from '../pki/helpers.js';
import type { TestServer } from '../support/server.js';
import { startTlsServer, type TlsRes, tlsCall } from '../support/tls-call.js';

const s = new Scratch();
afterAll(() => s.remove());
let seq = 0;
const code = (r: TlsRes) => [r.status, r.body?.error?.code, r.body?.error?.cause?.field];

/** A clientAuth certificate of CA `ca` (from opensslCa) with a new key and the given SANs; key and PEM. */
function issueWithSans(ca: string, cn: string, san?: string): { key: string; cert: string } {
  const name = `leaf-${++seq}`;
  const csr = openssl([
    'req',
    '-new',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    s.path(`${name}.key`),
    '-subj',
    `/CN=${cn}`,
  ]);
  expect(csr.status).toBe(0);
  s.write(`${name}.ext`, `extendedKeyUsage=clientAuth\n${san ? `subjectAltName=${san}\n` : ''}`);
  const signer = ['-CA', s.path(`${ca}.pem`), '-CAkey', s.path(`${ca}.key`), '-CAcreateserial'];
  const r = openssl(['x509', '-req', '-days', '1', ...signer, '-extfile', s.path(`${name}.ext`)], csr.stdout);
  expect(r.status).toBe(0);
  return { key: s.read(`${name}.key`), cert: r.stdout };
}

describe('CA externalIdClaim: auto-enrollment sets externalId, cert login matches by it', () => {
  let srv: TestServer;
  let ca: string;
  let admin: string;
  /** Moves the controller's clock (certificates made by openssl here last a day). */
  let offset_ms = 0;
  beforeAll(async () => {
    ({ srv, ca, admin } = await startTlsServer({ clock: { now: () => Date.now() + offset_ms } }));
  });
  afterAll(() => srv.stop());

  const mg = (method: string, path: string, body?: unknown) =>
    tlsCall(method, `${srv.mgmt}${path}`, { ca, token: admin, body });
  const spiffe = {
    location: 'SAN_URI',
    matcher: 'SCHEME',
    matcherCriteria: 'spiffe',
    parser: 'NONE',
    parserCriteria: '',
    index: 0,
  };
  /** A CA with the spiffe claim, created and verified (openssl-made proof); its id. */
  const verifiedCa = async (caName: string): Promise<string> => {
    const caId = (await mg('POST', '/cas', caBody(caName, spiffe))).body.data.id;
    const token = (await mg('GET', `/cas/${caId}`)).body.data.verificationToken;
    const proof = opensslIssue(s, caName, `proof-${++seq}`, token);
    const verified = await tlsCall('POST', `${srv.mgmt}/cas/${caId}/verify`, { ca, token: admin, raw: proof });
    expect(verified.status).toBe(200);
    return caId;
  };
  const caBody = (name: string, externalIdClaim: unknown) => ({
    name,
    certPem: opensslCa(s, name),
    isAutoCaEnrollmentEnabled: true,
    isOttCaEnrollmentEnabled: false,
    isAuthEnabled: true,
    identityRoles: ['claimed'],
    externalIdClaim,
  });

  it('refuses claims that could never resolve; PATCH merges the claim', async () => {
    const bad = async (claim: unknown) => code(await mg('POST', '/cas', caBody(`bad-${++seq}`, claim)));
    expect(await bad({ ...spiffe, matcher: 'PREFIX' })).toEqual([400, 'COULD_NOT_VALIDATE', 'externalIdClaim']);
    expect(await bad({ ...spiffe, matcherCriteria: '' })).toEqual([400, 'COULD_NOT_VALIDATE', 'externalIdClaim']);
    expect(await bad({ ...spiffe, parser: 'SPLIT' })).toEqual([400, 'COULD_NOT_VALIDATE', 'externalIdClaim']);
    expect(await bad({ ...spiffe, index: -1 })).toEqual([400, 'COULD_NOT_VALIDATE', 'externalIdClaim.index']);
    const created = await mg('POST', '/cas', caBody(`merge-${++seq}`, spiffe));
    expect(created.status).toBe(201);
    const id = created.body.data.id;
    expect(
      (await mg('PATCH', `/cas/${id}`, { externalIdClaim: { parser: 'SPLIT', parserCriteria: '/', index: 3 } })).status,
    ).toBe(200);
    expect((await mg('GET', `/cas/${id}`)).body.data.externalIdClaim).toEqual({
      ...spiffe,
      parser: 'SPLIT',
      parserCriteria: '/',
      index: 3,
    });
    // a patch that would leave an unusable claim is refused, and changes nothing
    expect(code(await mg('PATCH', `/cas/${id}`, { externalIdClaim: { matcher: 'SUFFIX' } }))).toEqual([
      400,
      'COULD_NOT_VALIDATE',
      'externalIdClaim',
    ]);
    expect((await mg('GET', `/cas/${id}`)).body.data.externalIdClaim.matcher).toBe('SCHEME');
  });

  it('enrolls with the claimed external id (no authenticator); any certificate of the CA with that id logs in', async () => {
    const caName = `claim-ca-${++seq}`;
    const caId = await verifiedCa(caName);
    const enroll = (c: { key: string; cert: string }) =>
      tlsCall('POST', `${srv.client}/enroll/ca`, { ca, key: c.key, cert: c.cert });
    const login = (c: { key: string; cert: string }) =>
      tlsCall('POST', `${srv.client}/authenticate?method=cert`, { ca, key: c.key, cert: c.cert, body: {} });

    const first = issueWithSans(caName, 'device-1', 'URI:https://acme.example/x,URI:spiffe://example.org/device/1');
    const r = await enroll(first);
    expect([r.status, r.body]).toEqual([200, { data: {}, meta: {} }]);
    const filter = encodeURIComponent('externalId = "spiffe://example.org/device/1"');
    const [identity] = (await mg('GET', `/identities?filter=${filter}`)).body.data;
    expect(identity).toMatchObject({ name: `${caName}-device-1`, roleAttributes: ['claimed'] });
    expect((await mg('GET', `/identities/${identity.id}/authenticators`)).body.data).toEqual([]);
    // the enrolling certificate and a renewed one (new key, same id) both log in as that identity
    const ok1 = await login(first);
    expect([ok1.status, ok1.body.data.identityId]).toEqual([200, identity.id]);
    const renewed = issueWithSans(caName, 'device-1-renewed', 'URI:spiffe://example.org/device/1');
    const ok2 = await login(renewed);
    expect([ok2.status, ok2.body.data.identityId]).toEqual([200, identity.id]);
    // the same id in a certificate of a CA nobody registered: no login
    const rogue = `rogue-${++seq}`;
    opensslCa(s, rogue);
    expect(code(await login(issueWithSans(rogue, 'device-1', 'URI:spiffe://example.org/device/1')))).toEqual([
      401,
      'INVALID_AUTH',
      undefined,
    ]);
    // an id no identity has, or no claim at all: no login
    expect(code(await login(issueWithSans(caName, 'device-2', 'URI:spiffe://example.org/device/2')))).toEqual([
      401,
      'INVALID_AUTH',
      undefined,
    ]);
    expect(code(await login(issueWithSans(caName, 'device-3')))).toEqual([401, 'INVALID_AUTH', undefined]);
    // enrollment refusals: no claim in the certificate, an id already enrolled
    expect(code(await enroll(issueWithSans(caName, 'no-uri', 'email:x@acme.example')))).toEqual([
      400,
      'MISSING_CERT_CLAIM',
      undefined,
    ]);
    expect(code(await enroll(renewed))).toEqual([400, 'COULD_NOT_VALIDATE', 'externalId']);
    // the CA no longer allows authentication: no login by external id
    expect((await mg('PATCH', `/cas/${caId}`, { isAuthEnabled: false })).status).toBe(200);
    expect(code(await login(renewed))).toEqual([401, 'INVALID_AUTH', undefined]);
    expect((await mg('PATCH', `/cas/${caId}`, { isAuthEnabled: true })).status).toBe(200);
    // a disabled identity does not log in
    expect((await mg('POST', `/identities/${identity.id}/disable`, { durationMinutes: 0 })).status).toBe(200);
    expect(code(await login(renewed))).toEqual([401, 'INVALID_AUTH', undefined]);
  });

  it('an expired certificate logs in by external id only when its CA signed it: a forgery under the same CA name does not', async () => {
    const caName = `expiry-ca-${++seq}`;
    await verifiedCa(caName);
    // an identity with an external id, under the default auth policy (allowExpiredCerts: true, as OpenZiti's)
    const externalId = `spiffe://example.org/victim/${seq}`;
    const created = await mg('POST', '/identities', {
      name: `victim-${seq}`,
      type: 'Device',
      isAdmin: false,
      externalId,
    });
    expect(created.status, created.text).toBe(201);
    // an attacker's own CA with the registered CA's name, and a certificate of it carrying the victim's id
    const rogue = `rogue-of-${caName}`;
    const out = ['-keyout', s.path(`${rogue}.key`), '-out', s.path(`${rogue}.pem`), '-subj', `/CN=${caName}`];
    const ext = ['-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign'];
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
    expect(openssl(['req', '-x509', ...ec, '-days', '30', ...out, ...ext]).status).toBe(0);
    const forged = issueWithSans(rogue, 'victim', `URI:${externalId}`);
    const genuine = issueWithSans(caName, 'victim', `URI:${externalId}`);
    const login = (c: { key: string; cert: string }) =>
      tlsCall('POST', `${srv.client}/authenticate?method=cert`, { ca, key: c.key, cert: c.cert, body: {} });
    expect(code(await login(forged))).toEqual([401, 'INVALID_AUTH', undefined]);
    // both certificates expired (they last a day): the genuine one still logs in, the forgery still does not
    offset_ms = 2 * 24 * 60 * 60 * 1000;
    try {
      const ok = await login(genuine);
      expect([ok.status, ok.body.data?.identityId]).toEqual([200, created.body.data.id]);
      expect(code(await login(forged))).toEqual([401, 'INVALID_AUTH', undefined]);
    } finally {
      offset_ms = 0;
    }
  });
});
