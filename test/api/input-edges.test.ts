/**
 * Inputs at the edge of what the API reads (found by attacking it): a config type's schema too large to validate
 * against, numbers beyond a double's range or an int64's, `__proto__` keys, a leap second, a JSON `null` for an
 * optional array body. Each gets a 4xx naming the caller's field, never a 500, and leaves nothing behind.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_USER_SCHEMA_NODES } from '../../src/schema/user-schema.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let token: string;

beforeAll(async () => {
  srv = await startServer();
  token = await login(srv.base);
});
afterAll(() => srv.stop());

const post = (path: string, body: unknown) => call('POST', `${srv.mgmt}${path}`, { token, body });
const postRaw = (path: string, raw: string) =>
  call('POST', `${srv.mgmt}${path}`, { token, raw, headers: { 'content-type': 'application/json' } });

/** A schema of `n` integer properties (n + 2 objects). */
const wideSchema = (n: number) => ({
  type: 'object',
  properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: 'integer' }])),
});

describe("a config type's schema", () => {
  it(`is refused above ${MAX_USER_SCHEMA_NODES} objects and arrays, so no config write meets a validator that overflows`, async () => {
    const big = await post('/config-types', { name: 'too-wide.v1', schema: wideSchema(2_000) });
    expect(big.status).toBe(400);
    expect(big.body.error.code).toBe('COULD_NOT_VALIDATE');
    expect(big.body.error.cause.field).toBe('schema');
    expect(big.body.error.cause.reason).toContain(`more than ${MAX_USER_SCHEMA_NODES} objects and arrays`);
    const listed = await call('GET', `${srv.mgmt}/config-types?filter=${encodeURIComponent('name = "too-wide.v1"')}`, {
      token,
    });
    expect(listed.body.meta.pagination.totalCount).toBe(0);

    // within the bound: the type is made and its configs validate (201 or 400, never 500)
    const ok = await post('/config-types', { name: 'wide.v1', schema: wideSchema(MAX_USER_SCHEMA_NODES - 10) });
    expect(ok.status, ok.text).toBe(201);
    const good = await post('/configs', { name: 'wide-good', configTypeId: ok.body.data.id, data: { p0: 1, p5: 2 } });
    expect(good.status, good.text).toBe(201);
    const bad = await post('/configs', { name: 'wide-bad', configTypeId: ok.body.data.id, data: { p7: 'x' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.cause.field).toBe('p7');
  });
});

describe('numbers', () => {
  it('beyond a 64-bit float (JSON.parse makes them Infinity) are refused, naming the field', async () => {
    const type = await post('/config-types', { name: 'port.v1' });
    expect(type.status).toBe(201);
    const inf = await postRaw(
      '/configs',
      `{"name":"inf","configTypeId":"${type.body.data.id}","data":{"listen":{"port":1e400}}}`,
    );
    expect(inf.status).toBe(400);
    expect(inf.body.error.code).toBe('COULD_NOT_VALIDATE');
    expect(inf.body.error.cause.field).toBe('data.listen.port');
    const digits = await postRaw(
      '/configs',
      `{"name":"digits","configTypeId":"${type.body.data.id}","data":{"n":[${'9'.repeat(400)}]}}`,
    );
    expect(digits.status).toBe(400);
    expect(digits.body.error.cause.field).toBe('data.n.0');
    // large but finite numbers in free-form data are kept (OpenZiti keeps them as float64)
    const big = await postRaw(
      '/configs',
      `{"name":"big","configTypeId":"${type.body.data.id}","data":{"n":1e300,"e":2E-5}}`,
    );
    expect(big.status, big.text).toBe(201);
    const read = await call('GET', `${srv.mgmt}/configs/${big.body.data.id}`, { token });
    expect(read.body.data.data).toEqual({ n: 1e300, e: 2e-5 });
  });

  it("beyond an int64 are refused in an integer field (OpenZiti's are Go int64)", async () => {
    for (const value of ['1e300', '-1e19', '9223372036854775808000']) {
      const r = await postRaw('/posture-checks', `{"name":"mfa-${value}","typeId":"MFA","timeoutSeconds":${value}}`);
      expect(r.status, r.text).toBe(400);
      expect(r.body.error.code).toBe('COULD_NOT_VALIDATE');
      expect(r.body.error.cause.field).toBe('timeoutSeconds');
    }
    const ok = await postRaw('/posture-checks', '{"name":"mfa-ok","typeId":"MFA","timeoutSeconds":3600}');
    expect(ok.status, ok.text).toBe(201);
  });
});

describe('a __proto__ key in a map field', () => {
  it("is refused naming the caller's field, not the store command's path to it", async () => {
    const r = await postRaw(
      '/identities',
      '{"name":"proto","type":"User","isAdmin":false,"appData":{"__proto__":"x"},"enrollment":{"ott":true}}',
    );
    expect(r.status).toBe(400);
    expect(r.body.error.cause.field).toBe('appData.__proto__');
    const t = await postRaw('/services', '{"name":"proto-svc","encryptionRequired":true,"tags":{"__proto__":1}}');
    expect(t.status).toBe(400);
    expect(t.body.error.cause.field).toBe('tags.__proto__');
  });
});

describe('date-times', () => {
  it('with a leap second (which Go refuses and JavaScript cannot read) are refused as not a date-time', async () => {
    const id = (await post('/identities', { name: 'leap', type: 'User', isAdmin: false })).body.data.id;
    const r = await post('/enrollments', { method: 'ott', identityId: id, expiresAt: '2027-06-30T23:59:60Z' });
    expect(r.status).toBe(400);
    expect(r.body.error.cause.field).toBe('expiresAt');
    expect(r.body.error.cause.reason).not.toContain('in the future');
    const fine = await post('/enrollments', {
      method: 'ott',
      identityId: id,
      expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    });
    expect(fine.status, fine.text).toBe(201);
  });
});

describe('a JSON null body', () => {
  it('for an optional array body is as if absent', async () => {
    const id = (await post('/identities', { name: 'null-body', type: 'User', isAdmin: false })).body.data.id;
    const r = await call('DELETE', `${srv.mgmt}/identities/${id}/service-configs`, {
      token,
      raw: 'null',
      headers: { 'content-type': 'application/json' },
    });
    expect(r.status, r.text).toBe(200);
    const required = await call('POST', `${srv.mgmt}/identities/${id}/service-configs`, {
      token,
      raw: 'null',
      headers: { 'content-type': 'application/json' },
    });
    expect(required.status).toBe(400);
    expect(required.body.error.cause.reason).toContain('is required');
  });
});

describe('an asynchronous schema', () => {
  it('`$async` is ignored, as gojsonschema ignores it: configs are validated, nothing is left unhandled', async () => {
    const type = await post('/config-types', {
      name: 'async.v1',
      schema: { $async: true, type: 'object', properties: { port: { type: 'integer' } }, required: ['port'] },
    });
    expect(type.status, type.text).toBe(201);
    const bad = await post('/configs', { name: 'async-bad', configTypeId: type.body.data.id, data: { port: 'x' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.cause.field).toBe('port');
    const good = await post('/configs', { name: 'async-good', configTypeId: type.body.data.id, data: { port: 1 } });
    expect(good.status, good.text).toBe(201);
  });
});

describe('a filter on an indexed field with a default', () => {
  it('finds the rows that leave the field out (they show the default; the index does not hold them)', async () => {
    const { createRootCa } = await import('../../src/pki/ca.js');
    const make = async (name: string, kid?: string) => {
      const ca = await createRootCa({ commonName: name });
      const body = { name, enabled: true, certPem: ca.certPem, issuer: `https://${name}.example`, audience: 'a' };
      const r = await post('/external-jwt-signers', kid === undefined ? body : { ...body, kid });
      expect(r.status, r.text).toBe(201);
      return r.body.data.id as string;
    };
    const without = await make('kidless');
    const withKid = await make('kidful', 'k-1');
    expect((await call('GET', `${srv.mgmt}/external-jwt-signers/${without}`, { token })).body.data.kid).toBe('');
    const ids = async (filter: string) =>
      (
        await call('GET', `${srv.mgmt}/external-jwt-signers?filter=${encodeURIComponent(filter)}`, { token })
      ).body.data.map((s: { id: string }) => s.id);
    expect(await ids('kid = ""')).toContain(without);
    expect(await ids('kid = ""')).not.toContain(withKid);
    expect(await ids('kid = "k-1"')).toEqual([withKid]);
    expect(await ids('kid in ["", "k-1"]')).toEqual(expect.arrayContaining([without, withKid]));
  });
});
