/**
 * A PATCH updates only the fields sent with a value, as OpenZiti's `GetJsonFields` reads a body: a `null` is no
 * change, at any depth (go-swagger clients send `null` for every list they leave unset, e.g. `ziti edge update
 * ext-jwt-signer --audience` sends `scopes: null`, which must not wipe the scopes). Elsewhere (create, PUT) a `null`
 * optional list is an empty one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let token: string;
beforeAll(async () => {
  srv = await startServer();
  token = await login(srv.base);
});
afterAll(() => srv.stop());

const get = async (path: string) => (await call('GET', `${srv.mgmt}${path}`, { token })).body.data;
const patch = (path: string, body: unknown) => call('PATCH', `${srv.mgmt}${path}`, { token, body });

describe('PATCH with null', () => {
  it('leaves every field sent as null as it was', async () => {
    const r = await call('POST', `${srv.mgmt}/edge-routers`, {
      token,
      body: {
        name: 'pn-router',
        cost: 10,
        noTraversal: true,
        disabled: true,
        appData: { a: 1 },
        roleAttributes: ['x'],
        tags: { t: 'v' },
      },
    });
    expect(r.status, r.text).toBe(201);
    const path = `/edge-routers/${r.body.data.id}`;
    const nulls = { cost: null, noTraversal: null, disabled: null, appData: null, roleAttributes: null, tags: null };
    const p = await patch(path, { ...nulls, isTunnelerEnabled: null });
    expect(p.status, p.text).toBe(200);
    expect(await get(path)).toMatchObject({
      cost: 10,
      noTraversal: true,
      disabled: true,
      appData: { a: 1 },
      roleAttributes: ['x'],
      tags: { t: 'v' },
    });
    // a value still changes it, and an empty object clears
    expect((await patch(path, { cost: null, tags: {} })).status).toBe(200);
    expect(await get(path)).toMatchObject({ cost: 10, tags: {} });
  });

  it("the CLI's ext-jwt-signer update keeps the scopes it sends as null; nested nulls change nothing", async () => {
    const signer = await call('POST', `${srv.mgmt}/external-jwt-signers`, {
      token,
      body: {
        name: 'pn-signer',
        enabled: true,
        issuer: 'https://pn.example',
        audience: 'aud1',
        jwksEndpoint: 'https://pn.example/jwks',
        scopes: ['openid', 'email'],
      },
    });
    expect(signer.status, signer.text).toBe(201);
    const path = `/external-jwt-signers/${signer.body.data.id}`;
    expect((await patch(path, { audience: 'aud2', scopes: null, tags: {} })).status).toBe(200);
    expect(await get(path)).toMatchObject({ audience: 'aud2', scopes: ['openid', 'email'] });

    const policy = await call('POST', `${srv.mgmt}/auth-policies`, {
      token,
      body: {
        name: 'pn-policy',
        primary: {
          cert: { allowed: true, allowExpiredCerts: false },
          extJwt: { allowed: false, allowedSigners: [] },
          updb: {
            allowed: true,
            lockoutDurationMinutes: 0,
            maxAttempts: 5,
            minPasswordLength: 5,
            requireMixedCase: false,
            requireNumberChar: false,
            requireSpecialChar: false,
          },
        },
        secondary: { requireTotp: false },
      },
    });
    expect(policy.status, policy.text).toBe(201);
    const ppath = `/auth-policies/${policy.body.data.id}`;
    expect((await patch(ppath, { primary: { cert: { allowed: null }, updb: { maxAttempts: null } } })).status).toBe(
      200,
    );
    expect((await get(ppath)).primary).toMatchObject({ cert: { allowed: true }, updb: { maxAttempts: 5 } });
  });
});
