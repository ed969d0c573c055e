/**
 * An identity deleted (or its session ended) while one of its requests is in flight: the request was authenticated,
 * then the identity goes — here between the handler's checks and the apply of its command, deterministically
 * (interceptNextWrite) — and the write meets a state without it. The answer is OpenZiti's for a session whose
 * identity is gone, 401 UNAUTHORIZED, never a 400 naming an internal field (`identityId`, `apiSessionId`).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { generateKeyPair, x509 } from '../../src/pki/crypto.js';
import { adminServer } from '../support/admin-api.js';
import { expectError, interceptNextWrite, userWith } from '../support/api.js';
import { call, type Res } from '../support/server.js';

let meanwhile: (f: () => Promise<unknown>) => void;
let seq = 0;

const { mgmt, create, srv, admin } = adminServer();

beforeAll(async () => {
  meanwhile = interceptNextWrite(srv().ctl.svc);
  // every identity may dial `gone-svc` through `gone-er`
  const service = await create('/services', { name: 'gone-svc', encryptionRequired: true });
  const router = await create('/edge-routers', { name: 'gone-er' });
  await create('/service-policies', {
    name: 'gone-dial',
    type: 'Dial',
    semantic: 'AnyOf',
    identityRoles: ['#all'],
    serviceRoles: [`@${service}`],
  });
  await create('/edge-router-policies', {
    name: 'gone-erp',
    semantic: 'AnyOf',
    identityRoles: ['#all'],
    edgeRouterRoles: [`@${router}`],
  });
  await create('/service-edge-router-policies', {
    name: 'gone-serp',
    semantic: 'AnyOf',
    serviceRoles: [`@${service}`],
    edgeRouterRoles: [`@${router}`],
  });
});

async function csr(): Promise<string> {
  const keys = await generateKeyPair();
  const req = await x509.Pkcs10CertificateRequestGenerator.create({
    name: 'CN=gone',
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
  });
  return req.toString('pem');
}

/** What each request sends, as the identity `user` (its session token, its updb authenticator). */
type Send = (user: { token: string; authenticatorId: string; name: string }) => Promise<Res>;

const client = (method: string, path: string, body?: unknown): Send => {
  return ({ token }) => call(method, `${srv().client}${path}`, { token, body });
};

const REQUESTS: [string, Send][] = [
  [
    'POST /sessions',
    async (u) => {
      const service = (await mgmt('GET', `/services?filter=${encodeURIComponent('name = "gone-svc"')}`)).body.data[0];
      return client('POST', '/sessions', { serviceId: service.id })(u);
    },
  ],
  ['POST /current-identity/mfa', client('POST', '/current-identity/mfa')],
  [
    'POST /current-api-session/certificates',
    async (u) => client('POST', '/current-api-session/certificates', { csr: await csr() })(u),
  ],
  [
    'PATCH /current-identity/authenticators/{id}',
    (u) =>
      call('PATCH', `${srv().client}/current-identity/authenticators/${u.authenticatorId}`, {
        token: u.token,
        body: { currentPassword: `${u.name}-pass`, password: 'a-new-password' },
      }),
  ],
];

describe('a request whose identity is deleted while it is in flight', () => {
  it.each(REQUESTS)('%s: 401 UNAUTHORIZED, no internal field named', async (_op, send) => {
    const name = `gone-${++seq}`;
    const user = await userWith(srv().base, admin(), name);
    const authenticatorId = (await mgmt('GET', `/identities/${user.id}/authenticators`)).body.data[0].id;
    meanwhile(async () => {
      const r = await mgmt('DELETE', `/identities/${user.id}`);
      expect(r.status, r.text).toBe(200);
    });
    const r = await send({ token: user.token, authenticatorId, name });
    expectError(r, 401, 'UNAUTHORIZED');
    expect(r.text).not.toMatch(/identityId|apiSessionId|api session|identity with id/);
    expect(srv().ctl.svc.get('identities', user.id)).toBeUndefined();
  });
});
