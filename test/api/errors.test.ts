/** Bad input of every kind gets OpenZiti's error envelope with the right code and status, and changes nothing. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_DEFINITIONS } from '../../http/errors.js';
import { conformant } from '../support/conformance.js';
import { call, login, startServer, type TestServer } from '../support/server.js';
import { median } from '../support/timing.js';

let srv: TestServer;
let token: string;
let userToken: string;

beforeAll(async () => {
  srv = await startServer();
  token = await login(srv.base);
  const u = await call('POST', `${srv.mgmt}/identities`, {
    token,
    body: { name: 'plain-user', type: 'User', isAdmin: false },
  });
  await call('POST', `${srv.mgmt}/authenticators`, {
    token,
    body: { method: 'updb', identityId: u.body.data.id, username: 'plainuser', password: 'plain-pass' },
  });
  userToken = await login(srv.base, 'plainuser', 'plain-pass');
});
afterAll(() => srv.stop());

/** A non-admin identity with `permissions`, logged in: its token and the id of its updb authenticator. */
async function userWith(name: string, permissions: string[]): Promise<{ t: string; authId: string; id: string }> {
  const u = await call('POST', `${srv.mgmt}/identities`, {
    token,
    body: { name, type: 'User', isAdmin: false, permissions },
  });
  const a = await call('POST', `${srv.mgmt}/authenticators`, {
    token,
    body: { method: 'updb', identityId: u.body.data.id, username: name, password: `${name}-pass` },
  });
  return { t: await login(srv.base, name, `${name}-pass`), authId: a.body.data.id, id: u.body.data.id };
}

async function identityCount(): Promise<number> {
  return (await call('GET', `${srv.mgmt}/identities?limit=1`, { token })).body.meta.pagination.totalCount;
}

function expectError(r: { status: number; body: any }, status: number, code: string, field?: string) {
  expect(r.status, JSON.stringify(r.body)).toBe(status);
  expect(r.body.error.code).toBe(code);
  expect(r.body.error.requestId).toMatch(/^[0-9a-zA-Z.-]+$/);
  expect(r.body.meta).toEqual({ apiEnrollmentVersion: '0.0.1', apiVersion: '0.0.1' });
  if (field !== undefined) expect(r.body.error.cause.field).toBe(field);
}

describe('request bodies', () => {
  it('unparseable JSON → 400 COULD_NOT_PARSE_BODY', async () => {
    const before = await identityCount();
    const r = await call('POST', `${srv.mgmt}/identities`, {
      token,
      raw: '{"name": "x",',
      headers: { 'content-type': 'application/json' },
    });
    expectError(r, 400, 'COULD_NOT_PARSE_BODY');
    expect(await identityCount()).toBe(before);
  });

  it('a missing body → 400 COULD_NOT_VALIDATE naming the body', async () => {
    const r = await call('POST', `${srv.mgmt}/identities`, { token });
    expectError(r, 400, 'COULD_NOT_VALIDATE', 'identity');
  });

  it.each([
    // JSON null: go-openapi's zero value of the body, validated (its first required field)
    ['null', 'name', 'name in body is required'],
    // the wrong type at the root: named by the body parameter, as go-openapi names it
    ['[]', 'identity', 'identity in body must be of type object: "array"'],
    ['"x"', 'identity', 'identity in body must be of type object: "string"'],
    ['7', 'identity', 'identity in body must be of type object: "number"'],
  ])('a body of %s → COULD_NOT_VALIDATE on %s', async (raw, field, reason) => {
    const before = await identityCount();
    const r = await call('POST', `${srv.mgmt}/identities`, {
      token,
      raw,
      headers: { 'content-type': 'application/json' },
    });
    expectError(r, 400, 'COULD_NOT_VALIDATE', field);
    expect(r.body.error.cause.reason).toBe(reason);
    expect(await identityCount()).toBe(before);
  });

  it('a JSON null body of an operation whose fields are all optional is an empty one, as in go-openapi', async () => {
    const created = await call('POST', `${srv.mgmt}/identities`, {
      token,
      body: { name: 'null-patch', type: 'User', isAdmin: false, roleAttributes: ['kept'] },
    });
    expect(created.status).toBe(201);
    const id = created.body.data.id;
    const r = await call('PATCH', `${srv.mgmt}/identities/${id}`, {
      token,
      raw: 'null',
      headers: { 'content-type': 'application/json' },
    });
    expect(r.status, r.text).toBe(200);
    const after = await call('GET', `${srv.mgmt}/identities/${id}`, { token });
    expect([after.body.data.name, after.body.data.roleAttributes]).toEqual(['null-patch', ['kept']]);
  });

  it.each([
    [{ type: 'User', isAdmin: false }, 'name', 'name in body is required'],
    [{ name: 'x', type: 'User' }, 'isAdmin', 'isAdmin in body is required'],
    [{ name: 'x', type: 'User', isAdmin: 'yes' }, 'isAdmin', 'isAdmin in body must be of type boolean: "string"'],
    [{ name: 'x', type: 'Robot', isAdmin: false }, 'type', null],
    [
      { name: 'x', type: 'User', isAdmin: false, defaultHostingCost: 70000 },
      'defaultHostingCost',
      'defaultHostingCost in body should be less than or equal to 65535',
    ],
    [{ name: 'x', type: 'User', isAdmin: false, roleAttributes: 'web' }, 'roleAttributes', null],
    [
      { name: 'x', type: 'User', isAdmin: false, roleAttributes: ['#web'] },
      'roleAttributes',
      'role attributes may not be prefixed with #/@',
    ],
    [{ name: 'x', type: 'User', isAdmin: false, authPolicyId: 'nope' }, 'authPolicyId', null],
    [
      { name: 'x', type: 'User', isAdmin: false, serviceHostingPrecedences: { s: 'sometimes' } },
      'serviceHostingPrecedences.s',
      null,
    ],
    [{ name: 'x', type: 'User', isAdmin: false, permissions: ['everything'] }, 'permissions.0', null],
  ])('invalid identity %j → COULD_NOT_VALIDATE on %s', async (body, field, reason) => {
    const before = await identityCount();
    const r = await conformant('management', 'POST', '/identities', srv.base, { token, body });
    expectError(r, 400, 'COULD_NOT_VALIDATE', field);
    if (reason) expect(r.body.error.cause.reason).toBe(reason);
    expect(await identityCount()).toBe(before);
  });

  it('a validation error about a credential names the field, never its value (OpenZiti echoes it)', async () => {
    const refused = async (
      api: 'client' | 'management',
      path: string,
      body: unknown,
      field: string,
      secret: string,
    ) => {
      const r = await call('POST', `${api === 'client' ? srv.client : srv.mgmt}${path}`, { token: userToken, body });
      expectError(r, 400, 'COULD_NOT_VALIDATE', field);
      expect(r.body.error.cause.value).toBe('******');
      expect(r.text).not.toContain(secret);
      return r.body.error.cause.reason as string;
    };
    const long = `Leaked-${'p'.repeat(100)}`;
    const login = '/authenticate?method=password';
    await refused('management', login, { username: 'admin', password: long }, 'password', long);
    await refused('client', login, { username: 'admin', password: 'Lk9!' }, 'password', 'Lk9!');
    // the reason still says what was wrong with it
    expect(await refused('client', login, { username: 'admin', password: 987654321 }, 'password', '987654321')).toBe(
      'password in body must be of type string: "number"',
    );
    await refused('client', '/enroll/ott', { token: 4242424242, clientCsr: 'x' }, 'token', '4242424242');
    await refused('client', '/authenticate/mfa', { code: 135791 }, 'code', '135791');
  });

  it('a body of the wrong type, or an object or array in the wrong place, is named but never echoed', async () => {
    const notEchoed = async (path: string, body: unknown, field: string, secret: string) => {
      const r = await call('POST', `${srv.client}${path}`, { token: userToken, body });
      expectError(r, 400, 'COULD_NOT_VALIDATE', field);
      expect(r.body.error.cause.value).toBe('<nil>'); // Go's rendering of no value
      expect(r.text).not.toContain(secret);
    };
    const login = '/authenticate?method=password';
    // a login sent as a bare string or array (the password itself), a code as a bare string
    await notEchoed(login, 'Bare-Secret-1', 'auth', 'Bare-Secret-1');
    await notEchoed(login, ['admin', 'Bare-Secret-2'], 'auth', 'Bare-Secret-2');
    await notEchoed('/authenticate/mfa', '246813', 'mfaAuth', '246813');
    // a container where a scalar belongs may hold a credential under any name
    const nested = { username: { password: 'Nested-Secret-3' }, password: 'a-long-enough-password' };
    await notEchoed(login, nested, 'username', 'Nested-Secret-3');
    // a scalar of a field that is not a credential is still echoed, as go-openapi does
    const r = await call('POST', `${srv.client}${login}`, {
      body: { username: 12345, password: 'a-long-enough-password' },
    });
    expectError(r, 400, 'COULD_NOT_VALIDATE', 'username');
    expect(r.body.error.cause.value).toBe('12345');
  });

  it('a duplicate name → COULD_NOT_VALIDATE on name, as OpenZiti words it', async () => {
    const r = await conformant('management', 'POST', '/identities', srv.base, {
      token,
      body: { name: 'plain-user', type: 'User', isAdmin: false },
    });
    expectError(r, 400, 'COULD_NOT_VALIDATE', 'name');
    expect(r.body.error.cause.reason).toBe("duplicate value 'plain-user' in unique index on identities store");
  });

  it('authenticator bodies: bad method, short password, cert PEM garbage, unknown identity', async () => {
    const id = (
      await call('POST', `${srv.mgmt}/identities`, {
        token,
        body: { name: 'auth-target', type: 'User', isAdmin: false },
      })
    ).body.data.id;
    expectError(
      await conformant('management', 'POST', '/authenticators', srv.base, {
        token,
        body: { method: 'kerberos', identityId: id },
      }),
      400,
      'COULD_NOT_VALIDATE',
      'method',
    );
    expectError(
      await conformant('management', 'POST', '/authenticators', srv.base, {
        token,
        body: { method: 'updb', identityId: id, username: 'abcd', password: 'abc' },
      }),
      400,
      'COULD_NOT_VALIDATE',
      'password',
    );
    expectError(
      await conformant('management', 'POST', '/authenticators', srv.base, {
        token,
        body: { method: 'cert', identityId: id, certPem: 'nonsense' },
      }),
      400,
      'INVALID_CERT_PEM',
    );
    expectError(
      await conformant('management', 'POST', '/authenticators', srv.base, {
        token,
        body: { method: 'updb', identityId: 'ghost', username: 'ghost-user', password: 'secret-1' },
      }),
      400,
      'COULD_NOT_VALIDATE',
      'identityId',
    );
    expectError(
      await conformant('management', 'POST', '/authenticators', srv.base, {
        token,
        body: { method: 'updb', identityId: id, username: 'plainuser', password: 'secret-1' },
      }),
      400,
      'COULD_NOT_VALIDATE',
      'username',
    );
    expectError(
      await conformant('management', 'PUT', '/authenticators/{id}', srv.base, {
        token,
        params: { id: 'ghost' },
        body: { username: 'abcd', password: 'abcde' },
      }),
      404,
      'NOT_FOUND',
    );
  });

  it('bodies over 1 MiB → 413 REQUEST_ENTITY_TOO_LARGE', async () => {
    const r = await call('POST', `${srv.mgmt}/identities`, {
      token,
      raw: JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10), type: 'User', isAdmin: false }),
    });
    expectError(r, 413, 'REQUEST_ENTITY_TOO_LARGE');
  });

  it('random garbage against real and missing ids: the envelope and the code of the fault, never a 5xx', async () => {
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 16807) % 2147483647;
      return seed % n;
    };
    const target = (
      await call('POST', `${srv.mgmt}/identities`, {
        token,
        body: { name: 'fuzz-target', type: 'User', isAdmin: false },
      })
    ).body.data.id;
    const auth = (
      await call('POST', `${srv.mgmt}/authenticators`, {
        token,
        body: { method: 'updb', identityId: target, username: 'fuzz-target', password: 'fuzz-pass' },
      })
    ).body.data.id;
    const values = [
      null,
      true,
      0,
      -1,
      1e308,
      '',
      'x',
      '#a',
      '@b',
      [],
      [1],
      ['a', '#b'],
      {},
      { a: null },
      { ott: true },
      'é'.repeat(300),
      'User',
    ];
    const keys: Record<string, string[]> = {
      identities: [
        'name',
        'type',
        'isAdmin',
        'roleAttributes',
        'tags',
        'authPolicyId',
        'appData',
        'defaultHostingCost',
        'permissions',
        'externalId',
        'enrollment',
        'serviceHostingCosts',
      ],
      authenticators: ['method', 'identityId', 'username', 'password', 'certPem', 'tags'],
    };
    const ids: Record<string, string[]> = { identities: [target, 'ghost'], authenticators: [auth, 'ghost'] };
    // what may legitimately go wrong, per entity (the request faults the fuzzer can produce), and the fields a
    // request must carry (a fault may name one of those although the body does not)
    const codes: Record<string, string[]> = {
      identities: ['COULD_NOT_VALIDATE', 'NOT_FOUND', 'ENTITY_CAN_NOT_BE_UPDATED'],
      authenticators: [
        'COULD_NOT_VALIDATE',
        'NOT_FOUND',
        'INVALID_AUTHENTICATOR_PROPERTIES',
        'INVALID_CERT_PEM',
        'CAN_NOT_UPDATE_AUTHENTICATOR',
        'MAX_AUTHENTICATOR_METHODS_REACHED',
      ],
    };
    const required: Record<string, string[]> = {
      'POST identities': ['identity', 'name', 'type', 'isAdmin'],
      'PUT identities': ['identity', 'name', 'type', 'isAdmin'],
      'PATCH identities': ['identity'],
      'POST authenticators': ['authenticator', 'method', 'identityId', 'username', 'password', 'certPem'],
      'PUT authenticators': ['authenticator', 'username', 'password'],
      'PATCH authenticators': ['authenticator'],
    };
    const seen = new Map<string, number>();
    for (let i = 0; i < 300; i++) {
      const entity = rnd(2) ? 'identities' : 'authenticators';
      const body: Record<string, unknown> = {};
      for (let k = 0; k < 1 + rnd(5); k++) body[keys[entity]![rnd(keys[entity]!.length)]!] = values[rnd(values.length)];
      const method = ['POST', 'PUT', 'PATCH'][rnd(3)]!;
      const id = method === 'POST' ? null : ids[entity]![rnd(2)]!;
      const url = id === null ? `${srv.mgmt}/${entity}` : `${srv.mgmt}/${entity}/${id}`;
      const r = await call(method, url, { token, body });
      const what = `${method} ${url} ${JSON.stringify(body)} → ${r.text}`;
      if (r.status < 300) {
        expect(r.status, what).toBe(method === 'POST' ? 201 : 200);
        expect(id, what).not.toBe('ghost');
        if (method === 'POST') expect(r.body.data.id, what).toMatch(/\S/);
        else expect(r.body, what).toEqual({ data: {}, meta: {} });
        seen.set(String(r.status), (seen.get(String(r.status)) ?? 0) + 1);
        continue;
      }
      // an error: the full envelope, a code of this entity's faults, and the status that code has
      expectError(r, r.status, r.body?.error?.code);
      const code: string = r.body.error.code;
      expect(codes[entity], what).toContain(code);
      expect(r.status, what).toBe(ERROR_DEFINITIONS[code as keyof typeof ERROR_DEFINITIONS][0]);
      seen.set(code, (seen.get(code) ?? 0) + 1);
      if (code === 'NOT_FOUND') {
        // only the missing id is missing, and the cause says which
        expect(id, what).toBe('ghost');
        expect(r.body.error.cause.message, what).toBe(
          `${entity === 'identities' ? 'identity' : 'authenticator'} with id ghost not found`,
        );
      } else if (r.body.error.cause?.field !== undefined) {
        // a field fault names a field of this body, or one the operation requires
        const field = String(r.body.error.cause.field).split('.')[0]!;
        expect([...Object.keys(body), ...required[`${method} ${entity}`]!], what).toContain(field);
      }
    }
    // the (seeded) fuzzer reached successes and the main faults
    for (const expected of ['200', 'COULD_NOT_VALIDATE', 'NOT_FOUND'])
      expect(seen.get(expected), expected).toBeGreaterThan(0);
  });

  it('a flood of password checks is bounded: 429 beyond the gate, never 5xx', async () => {
    const results = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const started = performance.now();
        const r = await call('POST', `${srv.mgmt}/authenticate?method=password`, {
          body: { username: `nobody-${i}`, password: 'whatever-pw' },
        });
        return { ...r, took_ms: performance.now() - started };
      }),
    );
    const statuses = new Set(results.map((r) => r.status));
    expect([...statuses].every((s) => s === 401 || s === 429)).toBe(true);
    expect(results.filter((r) => r.status === 429).length).toBeGreaterThan(0);
    expect(results.find((r) => r.status === 429)!.body.error.code).toBe('SERVER_TOO_MANY_REQUESTS');
    // the excess is refused at once, not queued behind the checks: measured against the answered (401) logins of
    // the same flood rather than a wall-clock bound for the whole flood (8 s), which a loaded machine can miss
    const took = (status: number) => median(results.filter((r) => r.status === status).map((r) => r.took_ms));
    expect(took(429)).toBeLessThan(took(401));
    await login(srv.base); // the gate drains: a real login works afterwards
  });
});

describe('routing and access', () => {
  it('unknown path → 404 NOT_FOUND; wrong method → 405 METHOD_NOT_ALLOWED', async () => {
    expectError(await call('GET', `${srv.mgmt}/no-such-thing`, { token }), 404, 'NOT_FOUND');
    const r = await call('PATCH', `${srv.mgmt}/identities`, { token, body: {} });
    expectError(r, 405, 'METHOD_NOT_ALLOWED');
    expect(r.headers.get('allow')).toContain('GET');
  });

  it('management operations need an admin: 401 UNAUTHORIZED otherwise', async () => {
    expectError(await call('GET', `${srv.mgmt}/identities`, { token: userToken }), 401, 'UNAUTHORIZED');
    expectError(
      await call('POST', `${srv.mgmt}/identities`, {
        token: userToken,
        body: { name: 'sneaky', type: 'User', isAdmin: true },
      }),
      401,
      'UNAUTHORIZED',
    );
    expectError(await call('GET', `${srv.mgmt}/identities`), 401, 'UNAUTHORIZED');
    expectError(
      await call('GET', `${srv.mgmt}/identities`, { token: '00000000-0000-0000-0000-000000000000' }),
      401,
      'UNAUTHORIZED',
    );
    // the caller's own data stays visible
    expect((await call('GET', `${srv.client}/current-identity`, { token: userToken })).body.data.name).toBe(
      'plain-user',
    );
  });

  it('permissions grant management access without isAdmin', async () => {
    const { t } = await userWith('reader', ['admin_readonly']);
    expect((await call('GET', `${srv.mgmt}/identities`, { token: t })).status).toBe(200);
    expectError(
      await call('POST', `${srv.mgmt}/identities`, { token: t, body: { name: 'no', type: 'User', isAdmin: false } }),
      401,
      'UNAUTHORIZED',
    );
  });

  it('identity permissions do not let a non-admin create admins or touch admin credentials', async () => {
    const { t, id: helpdeskId } = await userWith('helpdesk', ['identity']);
    const ok = await call('POST', `${srv.mgmt}/identities`, {
      token: t,
      body: { name: 'made-by-helpdesk', type: 'User', isAdmin: false },
    });
    expect(ok.status).toBe(201);
    expectError(
      await call('POST', `${srv.mgmt}/identities`, { token: t, body: { name: 'evil', type: 'User', isAdmin: true } }),
      401,
      'UNAUTHORIZED',
    );
    expectError(
      await call('PATCH', `${srv.mgmt}/identities/${ok.body.data.id}`, { token: t, body: { isAdmin: true } }),
      401,
      'UNAUTHORIZED',
    );
    expectError(
      await call('PATCH', `${srv.mgmt}/identities/${helpdeskId}`, {
        token: t,
        body: { permissions: ['admin_readonly', 'identity'] },
      }),
      401,
      'UNAUTHORIZED',
    );
    // nor edit or demote an admin that is not the default admin (the guard on the existing row)
    const otherAdmin = await call('POST', `${srv.mgmt}/identities`, {
      token,
      body: { name: 'second-admin', type: 'User', isAdmin: true },
    });
    const otherAdminUrl = `${srv.mgmt}/identities/${otherAdmin.body.data.id}`;
    expectError(await call('PATCH', otherAdminUrl, { token: t, body: { isAdmin: false } }), 401, 'UNAUTHORIZED');
    expectError(await call('PATCH', otherAdminUrl, { token: t, body: { name: 'renamed' } }), 401, 'UNAUTHORIZED');
    expectError(
      await call('PUT', otherAdminUrl, { token: t, body: { name: 'second-admin', type: 'User', isAdmin: false } }),
      401,
      'UNAUTHORIZED',
    );
    expect((await call('GET', otherAdminUrl, { token })).body.data).toMatchObject({
      name: 'second-admin',
      isAdmin: true,
    });
    expect((await call('DELETE', otherAdminUrl, { token })).status).toBe(200);
    const admin = (await call('GET', `${srv.mgmt}/current-identity`, { token })).body.data;
    const adminAuth = admin.authenticators.updb.id;
    expectError(
      await call('PATCH', `${srv.mgmt}/authenticators/${adminAuth}`, { token: t, body: { password: 'taken-over' } }),
      401,
      'UNAUTHORIZED',
    );
    expectError(await call('DELETE', `${srv.mgmt}/authenticators/${adminAuth}`, { token: t }), 401, 'UNAUTHORIZED');
    expectError(await call('DELETE', `${srv.mgmt}/identities/${admin.id}`, { token: t }), 401, 'UNAUTHORIZED');
    await login(srv.base); // the admin's password still works
  });

  it("identity permissions do not let a non-admin change another identity's rights, revoking included (as OpenZiti)", async () => {
    const { t } = await userWith('rights-helpdesk', ['identity']);
    const { id: operatorId } = await userWith('rights-operator', ['ops', 'service']);
    const url = `${srv.mgmt}/identities/${operatorId}`;
    // OpenZiti's PATCH: "non-admins may not modify the identity field 'permissions'" (or isAdmin, isDefaultAdmin)
    for (const body of [{ permissions: [] }, { isAdmin: false }, { isDefaultAdmin: false }]) {
      expectError(await call('PATCH', url, { token: t, body }), 401, 'UNAUTHORIZED');
    }
    // a null in a PATCH is no change at all (OpenZiti updates only the fields sent with a value): nothing to refuse
    expect((await call('PATCH', url, { token: t, body: { permissions: null } })).status).toBe(200);
    expect((await call('GET', url, { token })).body.data).toMatchObject({ permissions: ['ops', 'service'] });
    // other fields stay theirs to change, and an admin may revoke
    expect((await call('PATCH', url, { token: t, body: { roleAttributes: ['ops-team'] } })).status).toBe(200);
    expect((await call('PATCH', url, { token, body: { permissions: ['ops'] } })).status).toBe(200);
    expect((await call('GET', url, { token })).body.data).toMatchObject({
      permissions: ['ops'],
      roleAttributes: ['ops-team'],
    });
  });

  it('API sessions are `ops` business: identity permissions cannot read tokens; ops readers see no tokens', async () => {
    const idReader = (await userWith('id-reader', ['identity.read'])).t;
    expectError(await call('GET', `${srv.mgmt}/api-sessions`, { token: idReader }), 401, 'UNAUTHORIZED');
    const opsReader = (await userWith('ops-reader', ['ops.read'])).t;
    const list = await conformant('management', 'GET', '/api-sessions', srv.base, {
      token: opsReader,
      query: 'limit=-1',
    });
    expect(list.status).toBe(200);
    expect(list.body.data.length).toBeGreaterThan(1);
    expect(list.text).not.toContain(token);
    expect(list.body.data.every((x: any) => x.token === '')).toBe(true);
    const asAdmin = await call('GET', `${srv.mgmt}/api-sessions?limit=-1`, { token });
    expect(asAdmin.text).toContain(token);
    // a token is not a filterable field (no `token contains` oracle)
    expectError(
      await call('GET', `${srv.mgmt}/api-sessions?filter=${encodeURIComponent('token contains "a"')}`, { token }),
      400,
      'INVALID_FILTER',
    );
    // enrollment secrets of identities are for admins only
    const e = await call('POST', `${srv.mgmt}/identities`, {
      token,
      body: { name: 'has-ott', type: 'User', isAdmin: false, enrollment: { ott: true } },
    });
    const asReader = (
      await call('GET', `${srv.mgmt}/identities/${e.body.data.id}`, {
        token: (await userWith('id-reader2', ['identity.read'])).t,
      })
    ).body.data;
    expect(asReader.enrollment.ott.id).toBeDefined();
    expect(asReader.enrollment.ott.jwt).toBeUndefined();
    expect(asReader.enrollment.ott.token).toBeUndefined();
    expect(
      (await call('GET', `${srv.mgmt}/identities/${e.body.data.id}`, { token })).body.data.enrollment.ott.jwt,
    ).toBeDefined();
  });

  it('authenticator writes need an admin; reads accept admin_readonly (as OpenZiti)', async () => {
    const victim = await userWith('power-user', ['service', 'config']);
    const helpdesk = await userWith('helpdesk-2', ['identity']);
    expectError(
      await call('PATCH', `${srv.mgmt}/authenticators/${victim.authId}`, {
        token: helpdesk.t,
        body: { password: 'hijacked1' },
      }),
      401,
      'UNAUTHORIZED',
    );
    expectError(await call('GET', `${srv.mgmt}/authenticators`, { token: helpdesk.t }), 401, 'UNAUTHORIZED');
    const ro = await userWith('read-only', ['admin_readonly']);
    expect((await call('GET', `${srv.mgmt}/authenticators`, { token: ro.t })).status).toBe(200);
    expectError(
      await call('DELETE', `${srv.mgmt}/authenticators/${victim.authId}`, { token: ro.t }),
      401,
      'UNAUTHORIZED',
    );
    await login(srv.base, 'power-user', 'power-user-pass');
  });

  it('a permission denial does not tell the client its token is invalid', async () => {
    const r = await call('GET', `${srv.mgmt}/identities`, { token: userToken });
    expectError(r, 401, 'UNAUTHORIZED');
    expect(r.headers.get('www-authenticate')).toBeNull();
  });

  it('the default admin cannot be deleted or demoted', async () => {
    const me = (await call('GET', `${srv.mgmt}/current-identity`, { token })).body.data;
    expectError(
      await conformant('management', 'DELETE', '/identities/{id}', srv.base, { token, params: { id: me.id } }),
      400,
      'ENTITY_CAN_NOT_BE_DELETED',
    );
    expectError(
      await conformant('management', 'PATCH', '/identities/{id}', srv.base, {
        token,
        params: { id: me.id },
        body: { isAdmin: false },
      }),
      400,
      'ENTITY_CAN_NOT_BE_UPDATED',
    );
  });

  it('operations on missing ids → 404 with OpenZiti cause', async () => {
    for (const [method, body] of [
      ['GET'],
      ['DELETE'],
      ['PATCH', {}],
      ['PUT', { name: 'n', type: 'User', isAdmin: false }],
    ] as const) {
      const r = await call(method, `${srv.mgmt}/identities/ghost`, { token, body });
      expectError(r, 404, 'NOT_FOUND');
      expect(r.body.error.cause.message).toBe('identity with id ghost not found');
    }
  });
});

describe('lists: filters and pagination', () => {
  beforeAll(async () => {
    for (let i = 0; i < 25; i++) {
      await call('POST', `${srv.mgmt}/identities`, {
        token,
        body: {
          name: `list-${String(i).padStart(2, '0')}`,
          type: 'User',
          isAdmin: false,
          roleAttributes: i % 2 ? ['odd', 'every'] : ['even', 'every'],
          tags: { n: String(i) },
        },
      });
    }
  });
  const q = (query: string) => call('GET', `${srv.mgmt}/identities?${query}`, { token });

  it('default page 10, max 500, limit=-1 and limit none mean all', async () => {
    const r = await q('filter=' + encodeURIComponent('name contains "list-"'));
    expect(r.body.data.length).toBe(10);
    expect(r.body.meta.pagination).toEqual({ limit: 10, offset: 0, totalCount: 25 });
    expect((await q('limit=600')).body.meta.pagination.limit).toBe(500);
    const all = await q('limit=-1&filter=' + encodeURIComponent('name contains "list-"'));
    expect(all.text).toContain('"limit":9223372036854775807');
    expect(all.body.data.length).toBe(25);
    const none = await q('filter=' + encodeURIComponent('name contains "list-" limit none'));
    expect(none.body.data.length).toBe(25);
    expect((await q('limit=0')).body.meta.pagination.limit).toBe(10);
    expect((await q('offset=200000')).body.meta.pagination.offset).toBe(100000);
  });

  it('sorting, skip and the sort parameter; id tiebreak', async () => {
    const r = await q('filter=' + encodeURIComponent('name contains "list-" sort by name desc skip 2 limit 3'));
    expect(r.body.data.map((x: any) => x.name)).toEqual(['list-22', 'list-21', 'list-20']);
    expect(r.body.meta.pagination).toEqual({ limit: 3, offset: 2, totalCount: 25 });
    const s = await q(
      `sort=${encodeURIComponent('name asc')}&limit=2&offset=1&filter=${encodeURIComponent('name contains "list-"')}`,
    );
    expect(s.body.data.map((x: any) => x.name)).toEqual(['list-01', 'list-02']);
  });

  it('tags, sets and booleans in filters', async () => {
    expect((await q('filter=' + encodeURIComponent('tags.n = "7"'))).body.data.map((x: any) => x.name)).toEqual([
      'list-07',
    ]);
    expect((await q('limit=-1&filter=' + encodeURIComponent('anyOf(roleAttributes) = "odd"'))).body.data.length).toBe(
      12,
    );
    expect((await q('filter=' + encodeURIComponent('isAdmin = true'))).body.data.map((x: any) => x.name)).toEqual([
      'Default Admin',
    ]);
  });

  it('roleFilter and roleSemantic', async () => {
    // `#all` is the attribute `all` in a roleFilter (OpenZiti's splitRolesAndIds), held by no identity here
    const all = await q('limit=-1&roleFilter=%23all');
    expect(all.body.meta.pagination.totalCount).toBe(0);
    // an empty roleSemantic is AllOf
    expect((await q('limit=-1&roleFilter=%23odd&roleFilter=%23every&roleSemantic=')).body.data.length).toBe(12);
    expect((await q('limit=-1&roleFilter=%23odd&roleFilter=%23every')).body.data.length).toBe(12);
    expect((await q('limit=-1&roleFilter=%23odd&roleFilter=%23even')).body.data.length).toBe(0);
    expect((await q('limit=-1&roleFilter=%23odd&roleFilter=%23even&roleSemantic=AnyOf')).body.data.length).toBe(25);
    const one = (await q('filter=' + encodeURIComponent('name = "list-03"'))).body.data[0].id;
    expect((await q(`roleFilter=%40${one}`)).body.data.map((x: any) => x.id)).toEqual([one]);
    expectError(await q('roleFilter=%23odd&roleSemantic=SomeOf'), 400, 'COULD_NOT_VALIDATE', 'roleSemantic');
    expectError(await q('roleFilter=odd'), 400, 'COULD_NOT_VALIDATE', 'roleFilter');
  });

  it('fields read as the API shows them: a left-out field is its default; isSystem is a symbol', async () => {
    const count = async (filter: string) =>
      (await q(`limit=-1&filter=${encodeURIComponent(filter)}`)).body.meta.pagination.totalCount as number;
    const every = await count('true');
    expect(every).toBeGreaterThanOrEqual(25);
    // no identity here set them: each shows the default, and a filter sees the default
    expect(await count('defaultHostingCost = 0')).toBe(every);
    expect(await count('defaultHostingPrecedence = "default"')).toBe(every);
    expect(await count('isMfaEnabled = null')).toBe(0);
    // the default admin is the controller's own (isSystem); the rest are not
    expect(await count('isSystem = false')).toBe(every - (await count('isSystem = true')));
    expect(await count('isSystem = true and isDefaultAdmin = true')).toBeLessThanOrEqual(1);
  });

  it.each([
    ['filter=' + encodeURIComponent('name = '), 'INVALID_FILTER'],
    ['filter=' + encodeURIComponent('nmae = "x"'), 'INVALID_FILTER'],
    ['filter=' + encodeURIComponent('roleAttributes = "x"'), 'INVALID_FILTER'],
    ['filter=' + encodeURIComponent('isAdmin > 3'), 'INVALID_FILTER'],
    ['limit=ten', 'INVALID_PAGINATION'],
    ['offset=1.5', 'INVALID_PAGINATION'],
    ['sort=' + encodeURIComponent('nope desc'), 'INVALID_SORT_IDENTIFIER'],
    ['sort=' + encodeURIComponent('name sideways'), 'INVALID_SORT_IDENTIFIER'],
  ])('%s → 400 %s with a cause that says where', async (query, code) => {
    const r = await conformant('management', 'GET', '/identities', srv.base, { token, query });
    expectError(r, 400, code);
    expect(r.body.error.cause.reason.length).toBeGreaterThan(5);
  });

  it('role attributes listing filters and pages', async () => {
    const r = await conformant('management', 'GET', '/identity-role-attributes', srv.base, {
      token,
      query: 'filter=' + encodeURIComponent('id contains "d"'),
    });
    expect(r.body.data).toEqual(['odd']);
    // only the filter counts here (OpenZiti ignores limit, offset and sort on role-attribute listings)
    const all = await call(
      'GET',
      `${srv.mgmt}/identity-role-attributes?limit=1&filter=${encodeURIComponent('true limit 2')}`,
      { token },
    );
    expect(all.body.data).toEqual(['even', 'every']);
    expect(all.body.meta.pagination.totalCount).toBeGreaterThanOrEqual(3);
  });
});
