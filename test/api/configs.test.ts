/**
 * Config types and configs: every operation through the conformance helper (responses validated against OpenZiti's
 * schemas), and their error cases.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conformant, ownOperations } from '../support/conformance.js';
import { call, login, type Res, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let token: string;

beforeAll(async () => {
  srv = await startServer();
  token = await login(srv.base);
});
afterAll(async () => {
  const { served, missing } = ownOperations('test/api/configs.test.ts', srv.ctl.ops);
  await srv.stop();
  expect(served.length).toBeGreaterThan(10);
  expect(missing).toEqual([]);
});

const M = 'management' as const;
const PORT_SCHEMA = {
  $id: 'http://example.com/schemas/port.json',
  type: 'object',
  additionalProperties: false,
  required: ['hostname', 'port'],
  properties: {
    hostname: { type: 'string' },
    port: { type: 'integer', minimum: 0, maximum: 65535 },
    listen: { type: 'object', properties: { max: { type: 'integer', minimum: 1 } } },
  },
};

function expectError(res: Res, status: number, code: string, field?: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.body.error.code).toBe(code);
  if (field !== undefined) expect(res.body.error.cause.field).toBe(field);
}

async function createType(name: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await conformant(M, 'POST', '/config-types', srv.base, {
    token,
    body: { name, schema: PORT_SCHEMA, ...extra },
  });
  expect(r.status, r.text).toBe(201);
  return r.body.data.id;
}

async function createConfig(name: string, configTypeId: string, data: unknown): Promise<Res> {
  return conformant(M, 'POST', '/configs', srv.base, { token, body: { name, configTypeId, data } });
}

describe('config types', () => {
  it('CRUD: create (target defaults to service), detail, list, update, patch, delete', async () => {
    const id = await createType('port.v1', { tags: { team: 'a' } });
    const detail = await conformant(M, 'GET', '/config-types/{id}', srv.base, { token, params: { id } });
    expect(detail.body.data).toMatchObject({
      name: 'port.v1',
      target: 'service',
      schema: PORT_SCHEMA,
      tags: { team: 'a' },
    });
    const router = await createType('router-thing.v1', { target: 'router', schema: {} });
    const routerDetail = await call('GET', `${srv.mgmt}/config-types/${router}`, { token });
    expect(routerDetail.body.data.target).toBe('router');

    const list = await conformant(M, 'GET', '/config-types', srv.base, {
      token,
      query: `filter=${encodeURIComponent('name contains "port"')}`,
    });
    expect(list.body.data.map((t: { id: string }) => t.id)).toEqual([id]);

    const put = await conformant(M, 'PUT', '/config-types/{id}', srv.base, {
      token,
      params: { id },
      body: { name: 'port.v2', target: 'service' },
    });
    expect(put.status).toBe(200);
    const afterPut = await call('GET', `${srv.mgmt}/config-types/${id}`, { token });
    // PUT resets what it leaves out: the schema goes back to the empty (permissive) schema, tags to {}
    expect(afterPut.body.data).toMatchObject({ name: 'port.v2', schema: {}, tags: {}, target: 'service' });

    const patch = await conformant(M, 'PATCH', '/config-types/{id}', srv.base, {
      token,
      params: { id },
      body: { schema: PORT_SCHEMA },
    });
    expect(patch.status).toBe(200);
    const afterPatch = await call('GET', `${srv.mgmt}/config-types/${id}`, { token });
    expect(afterPatch.body.data).toMatchObject({ name: 'port.v2', schema: PORT_SCHEMA });

    const del = await conformant(M, 'DELETE', '/config-types/{id}', srv.base, { token, params: { id: router } });
    expect(del.status).toBe(200);
    expectError(
      await conformant(M, 'GET', '/config-types/{id}', srv.base, { token, params: { id: router } }),
      404,
      'NOT_FOUND',
    );
  });

  it('a schema that is not a valid JSON schema is refused on create, update and patch (400 field schema)', async () => {
    const bad = { type: 'object', properties: { port: { type: 'no-such-type' } } };
    expectError(
      await conformant(M, 'POST', '/config-types', srv.base, { token, body: { name: 'bad.v1', schema: bad } }),
      400,
      'COULD_NOT_VALIDATE',
      'schema',
    );
    expectError(
      await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'bad.v1', schema: { minimum: 'x' } } }),
      400,
      'COULD_NOT_VALIDATE',
      'schema',
    );
    // not an object at all: the request schema refuses it
    expectError(
      await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'bad.v1', schema: [1] } }),
      400,
      'COULD_NOT_VALIDATE',
      'schema',
    );
    const id = await createType('good.v1');
    expectError(
      await conformant(M, 'PUT', '/config-types/{id}', srv.base, {
        token,
        params: { id },
        body: { name: 'good.v1', schema: bad },
      }),
      400,
      'COULD_NOT_VALIDATE',
      'schema',
    );
    expectError(
      await conformant(M, 'PATCH', '/config-types/{id}', srv.base, { token, params: { id }, body: { schema: bad } }),
      400,
      'COULD_NOT_VALIDATE',
      'schema',
    );
    const unchanged = await call('GET', `${srv.mgmt}/config-types/${id}`, { token });
    expect(unchanged.body.data.schema).toEqual(PORT_SCHEMA);
    expect((await call('GET', `${srv.mgmt}/config-types?filter=name="bad.v1"`, { token })).body.data).toEqual([]);
  });

  it('target is immutable and must be service or router; names are unique', async () => {
    const id = await createType('fixed.v1');
    expectError(
      await call('PATCH', `${srv.mgmt}/config-types/${id}`, { token, body: { target: 'router' } }),
      400,
      'COULD_NOT_VALIDATE',
      'target',
    );
    expect((await call('GET', `${srv.mgmt}/config-types/${id}`, { token })).body.data.target).toBe('service');
    expectError(
      await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'x.v1', target: 'client' } }),
      400,
      'COULD_NOT_VALIDATE',
      'target',
    );
    expectError(
      await call('POST', `${srv.mgmt}/config-types`, { token, body: { name: 'fixed.v1' } }),
      400,
      'COULD_NOT_VALIDATE',
      'name',
    );
    expectError(await call('POST', `${srv.mgmt}/config-types`, { token, body: {} }), 400, 'COULD_NOT_VALIDATE', 'name');
  });

  it('a type with configs cannot be deleted (409); its configs are listed under it', async () => {
    const id = await createType('listed.v1');
    const other = await createType('other.v1');
    const a = (await createConfig('listed-a', id, { hostname: 'a', port: 1 })).body.data.id;
    const b = (await createConfig('listed-b', id, { hostname: 'b', port: 2 })).body.data.id;
    await createConfig('other-c', other, { hostname: 'c', port: 3 });
    const listed = await conformant(M, 'GET', '/config-types/{id}/configs', srv.base, {
      token,
      params: { id },
      query: 'sort=name desc',
    });
    expect(listed.body.data.map((c: { id: string }) => c.id)).toEqual([b, a]);
    expect(listed.body.meta.pagination.totalCount).toBe(2);
    const filtered = await call('GET', `${srv.mgmt}/config-types/${id}/configs?filter=name="listed-a"`, { token });
    expect(filtered.body.data.map((c: { id: string }) => c.id)).toEqual([a]);
    expectError(
      await conformant(M, 'GET', '/config-types/{id}/configs', srv.base, { token, params: { id: 'nope' } }),
      404,
      'NOT_FOUND',
    );

    expectError(
      await conformant(M, 'DELETE', '/config-types/{id}', srv.base, { token, params: { id } }),
      409,
      'CAN_NOT_DELETE_REFERENCED_ENTITY',
    );
    expect((await call('GET', `${srv.mgmt}/config-types/${id}`, { token })).status).toBe(200);
    for (const c of [a, b]) {
      expect((await conformant(M, 'DELETE', '/configs/{id}', srv.base, { token, params: { id: c } })).status).toBe(200);
    }
    expect((await call('DELETE', `${srv.mgmt}/config-types/${id}`, { token })).status).toBe(200);
  });

  it('the built-in config types keep their fixed ids and targets', async () => {
    const r = await call('GET', `${srv.mgmt}/config-types/router.link.v1`, { token });
    expect(r.body.data).toMatchObject({ name: 'router.link.v1', target: 'router' });
  });

  it("the built-in config types carry OpenZiti's schemas: valid tunneler configs pass, invalid ones name the field", async () => {
    const ok = (type: string, name: string, data: unknown) =>
      createConfig(name, type, data).then((r) => expect(r.status, `${name}: ${r.text}`).toBe(201));
    const bad = async (type: string, name: string, data: unknown, field: string) =>
      expectError(await createConfig(name, type, data), 400, 'COULD_NOT_VALIDATE', field);
    const INTERCEPT = 'g7cIWbcGg';
    const HOST_V1 = 'NH5p4FpGR';
    await ok(INTERCEPT, 'i1', {
      protocols: ['tcp', 'udp'],
      addresses: ['web.ziti', '10.0.0.0/24'],
      portRanges: [{ low: 80, high: 443 }],
    });
    await bad(INTERCEPT, 'i2', { protocols: ['tcp'], addresses: [], portRanges: [{ low: 1, high: 2 }] }, 'addresses');
    await bad(
      INTERCEPT,
      'i3',
      { protocols: ['icmp'], addresses: ['a'], portRanges: [{ low: 1, high: 2 }] },
      'protocols.0',
    );
    await bad(INTERCEPT, 'i4', { protocols: ['tcp'], addresses: ['a'], portRanges: [{ low: 1 }] }, 'portRanges.0.high');
    await bad(INTERCEPT, 'i5', { protocols: ['tcp'], addresses: ['a'] }, 'portRanges');
    await ok(HOST_V1, 'h1', { protocol: 'tcp', address: 'localhost', port: 8080 });
    await ok(HOST_V1, 'h2', {
      forwardProtocol: true,
      allowedProtocols: ['tcp'],
      address: '127.0.0.1',
      forwardPort: true,
      allowedPortRanges: [{ low: 1000, high: 2000 }],
      listenOptions: { precedence: 'required', cost: 10 },
      httpChecks: [
        {
          url: 'http://x/health',
          interval: '5s',
          timeout: '1s',
          actions: [{ trigger: 'fail', action: 'mark unhealthy' }],
        },
      ],
    });
    // forwardProtocol needs allowedProtocols
    await bad(HOST_V1, 'h3', { forwardProtocol: true, address: 'a', port: 1 }, 'allowedProtocols');
    await bad(
      HOST_V1,
      'h4',
      { protocol: 'tcp', address: 'a', port: 1, listenOptions: { precedence: 'best' } },
      'listenOptions.precedence',
    );
    await ok('host.v2', 'h5', { terminators: [{ protocol: 'udp', address: 'dns.local', port: 53 }] });
    await bad('host.v2', 'h6', { terminators: [] }, 'terminators');
    await ok('f2dd2df0-9c04-4b84-a91e-71437ac229f1', 'c1', { hostname: 'svc.ziti', port: 22 });
    await bad('f2dd2df0-9c04-4b84-a91e-71437ac229f1', 'c2', { hostname: 'svc.ziti', port: 65536 }, 'port');
    await ok('cea49285-6c07-42cf-9f52-09a9b115c783', 's1', { protocol: 'tcp', hostname: 'localhost', port: 22 });
    await bad('cea49285-6c07-42cf-9f52-09a9b115c783', 's2', { hostname: 'localhost' }, 'port');
    await ok('proxy.v1', 'p1', { port: 3128, protocols: ['tcp'] });
    await bad('proxy.v1', 'p2', { port: 0, protocols: ['tcp'] }, 'port');
    await ok('interfaces.v1', 'n1', { interfaces: ['eth0'] });
    await bad('interfaces.v1', 'n2', { interfaces: 'eth0' }, 'interfaces');
    // router.link.v1 has no schema: anything goes
    await ok('router.link.v1', 'r1', { anything: true });
  });
});

describe('configs', () => {
  let typeId: string;
  beforeAll(async () => {
    typeId = await createType('svc-port.v1');
  });

  it('CRUD: create, detail (with its type), list, update, patch, delete', async () => {
    const created = await createConfig('web', typeId, { hostname: 'web.local', port: 80 });
    expect(created.status, created.text).toBe(201);
    const id = created.body.data.id;
    const detail = await conformant(M, 'GET', '/configs/{id}', srv.base, { token, params: { id } });
    expect(detail.body.data).toMatchObject({
      name: 'web',
      configTypeId: typeId,
      configType: { id: typeId, name: 'svc-port.v1', entity: 'config-types' },
      data: { hostname: 'web.local', port: 80 },
    });
    const list = await conformant(M, 'GET', '/configs', srv.base, {
      token,
      query: `filter=${encodeURIComponent(`type = "${typeId}"`)}`,
    });
    expect(list.body.data.map((c: { id: string }) => c.id)).toEqual([id]);

    const put = await conformant(M, 'PUT', '/configs/{id}', srv.base, {
      token,
      params: { id },
      body: { name: 'web2', data: { hostname: 'web2.local', port: 8080 } },
    });
    expect(put.status).toBe(200);
    const patch = await conformant(M, 'PATCH', '/configs/{id}', srv.base, {
      token,
      params: { id },
      body: { data: { hostname: 'web3.local', port: 443, listen: { max: 3 } } },
    });
    expect(patch.status).toBe(200);
    const after = await call('GET', `${srv.mgmt}/configs/${id}`, { token });
    expect(after.body.data).toMatchObject({
      name: 'web2',
      configTypeId: typeId,
      data: { hostname: 'web3.local', port: 443, listen: { max: 3 } },
    });
    expect((await conformant(M, 'DELETE', '/configs/{id}', srv.base, { token, params: { id } })).status).toBe(200);
    expectError(await conformant(M, 'GET', '/configs/{id}', srv.base, { token, params: { id } }), 404, 'NOT_FOUND');
  });

  it('data is validated against its type schema: 400 naming the failing field, on create, update and patch', async () => {
    const cases: [unknown, string][] = [
      [{ hostname: 'x', port: 'eighty' }, 'port'],
      [{ hostname: 'x', port: 70000 }, 'port'],
      [{ port: 80 }, 'hostname'],
      [{ hostname: 'x', port: 80, extra: true }, 'extra'],
      [{ hostname: 'x', port: 80, listen: { max: 0 } }, 'listen.max'],
    ];
    for (const [data, field] of cases) {
      expectError(await createConfig('invalid', typeId, data), 400, 'COULD_NOT_VALIDATE', field);
    }
    expect((await call('GET', `${srv.mgmt}/configs?filter=name="invalid"`, { token })).body.data).toEqual([]);

    const id = (await createConfig('valid', typeId, { hostname: 'v', port: 1 })).body.data.id;
    expectError(
      await conformant(M, 'PUT', '/configs/{id}', srv.base, {
        token,
        params: { id },
        body: { name: 'valid', data: { hostname: 'v' } },
      }),
      400,
      'COULD_NOT_VALIDATE',
      'port',
    );
    expectError(
      await conformant(M, 'PATCH', '/configs/{id}', srv.base, {
        token,
        params: { id },
        body: { data: { hostname: 'v', port: -1 } },
      }),
      400,
      'COULD_NOT_VALIDATE',
      'port',
    );
    expect((await call('GET', `${srv.mgmt}/configs/${id}`, { token })).body.data.data).toEqual({
      hostname: 'v',
      port: 1,
    });
    // a type without a schema constrains nothing
    const free = await createType('free.v1', { schema: {} });
    expect((await createConfig('anything', free, { whatever: [1, 'two'] })).status).toBe(201);
  });

  it("a config's type must exist and is immutable (an update naming another is ignored); data is required and must be an object", async () => {
    expectError(await createConfig('orphan', 'no-such-type', { a: 1 }), 400, 'COULD_NOT_VALIDATE', 'configTypeId');
    expectError(
      await call('POST', `${srv.mgmt}/configs`, { token, body: { name: 'no-data', configTypeId: typeId } }),
      400,
      'COULD_NOT_VALIDATE',
      'data',
    );
    expectError(await createConfig('array-data', typeId, [1]), 400, 'COULD_NOT_VALIDATE', 'data');
    const id = (await createConfig('typed', typeId, { hostname: 't', port: 2 })).body.data.id;
    const other = await createType('other-type.v1', { schema: {} });
    // the update bodies have no type (OpenZiti's configUpdate/configPatch): one sent is ignored, the type stays
    const retyped = await call('PATCH', `${srv.mgmt}/configs/${id}`, { token, body: { configTypeId: other } });
    expect(retyped.status, retyped.text).toBe(200);
    expect((await call('GET', `${srv.mgmt}/configs/${id}`, { token })).body.data.configTypeId).toBe(typeId);
    const put = await call('PUT', `${srv.mgmt}/configs/${id}`, {
      token,
      body: { name: 'typed', configTypeId: other, data: { hostname: 't', port: 3 } },
    });
    expect(put.status, put.text).toBe(200);
    expect((await call('GET', `${srv.mgmt}/configs/${id}`, { token })).body.data).toMatchObject({
      configTypeId: typeId,
      data: { hostname: 't', port: 3 },
    });
    expectError(await createConfig('typed', typeId, { hostname: 't', port: 2 }), 400, 'COULD_NOT_VALIDATE', 'name');
  });

  it('permissions: config for configs, config-type for types; others are refused', async () => {
    const user = async (name: string, permissions: string[]) => {
      const u = await call('POST', `${srv.mgmt}/identities`, {
        token,
        body: { name, type: 'User', isAdmin: false, permissions },
      });
      await call('POST', `${srv.mgmt}/authenticators`, {
        token,
        body: { method: 'updb', identityId: u.body.data.id, username: name, password: `${name}-pass` },
      });
      return login(srv.base, name, `${name}-pass`);
    };
    const configUser = await user('config-user', ['config']);
    const typeReader = await user('type-reader', ['config-type.read']);
    expect((await call('GET', `${srv.mgmt}/configs`, { token: configUser })).status).toBe(200);
    expect((await createConfigAs(configUser, 'by-config-user')).status).toBe(201);
    expectError(await call('GET', `${srv.mgmt}/configs`, { token: typeReader }), 401, 'UNAUTHORIZED');
    expect((await call('GET', `${srv.mgmt}/config-types`, { token: typeReader })).status).toBe(200);
    expectError(
      await call('POST', `${srv.mgmt}/config-types`, { token: typeReader, body: { name: 'nope.v1' } }),
      401,
      'UNAUTHORIZED',
    );
    // the configs of a type are configs: listing them needs the config permission
    expectError(
      await call('GET', `${srv.mgmt}/config-types/${typeId}/configs`, { token: typeReader }),
      401,
      'UNAUTHORIZED',
    );
    expect((await call('GET', `${srv.mgmt}/config-types/${typeId}/configs`, { token: configUser })).status).toBe(200);
  });

  async function createConfigAs(t: string, name: string): Promise<Res> {
    return call('POST', `${srv.mgmt}/configs`, {
      token: t,
      body: { name, configTypeId: typeId, data: { hostname: 'h', port: 9 } },
    });
  }
});
