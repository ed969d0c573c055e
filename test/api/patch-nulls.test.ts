/**
 * A PATCH updates only the fields sent with a value, as OpenZiti's `GetJsonFields` reads a body: a `null` is no
 * change, at any depth (go-swagger clients send `null` for every list they leave unset, e.g. `ziti edge update
 * ext-jwt-signer --audience` sends `scopes: null`, which must not wipe the scopes). Elsewhere (create, PUT) a `null`
 * optional list is an empty one.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_AUTH_POLICY } from '../../src/model/auth-policy.js';
import { adminServer } from '../support/admin-api.js';

const api = adminServer();
const get = async (path: string) => (await api.mgmt('GET', path)).body.data;

describe('PATCH with null', () => {
  it('leaves every field sent as null as it was', async () => {
    const values = { cost: 10, noTraversal: true, disabled: true, appData: { a: 1 }, roleAttributes: ['x'] };
    const path = `/edge-routers/${await api.create('/edge-routers', { name: 'pn-router', ...values, tags: { t: 'v' } })}`;
    const nulls = Object.fromEntries(Object.keys(values).map((k) => [k, null]));
    await api.patch(path, { ...nulls, tags: null, isTunnelerEnabled: null });
    expect(await get(path)).toMatchObject({ ...values, tags: { t: 'v' } });
    // a value still changes it, and an empty object clears
    await api.patch(path, { cost: null, tags: {} });
    expect(await get(path)).toMatchObject({ cost: 10, tags: {} });
  });

  it("the CLI's ext-jwt-signer update keeps the scopes it sends as null; nested nulls change nothing", async () => {
    const signer = await api.create('/external-jwt-signers', {
      name: 'pn-signer',
      enabled: true,
      issuer: 'https://pn.example',
      audience: 'aud1',
      jwksEndpoint: 'https://pn.example/jwks',
      scopes: ['openid', 'email'],
    });
    const path = `/external-jwt-signers/${signer}`;
    await api.patch(path, { audience: 'aud2', scopes: null, tags: {} });
    expect(await get(path)).toMatchObject({ audience: 'aud2', scopes: ['openid', 'email'] });

    const policy = `/auth-policies/${await api.create('/auth-policies', { ...DEFAULT_AUTH_POLICY, name: 'pn-policy' })}`;
    await api.patch(policy, { primary: { cert: { allowed: null }, updb: { minPasswordLength: null } } });
    expect((await get(policy)).primary).toMatchObject({ cert: { allowed: true }, updb: { minPasswordLength: 5 } });
  });
});
