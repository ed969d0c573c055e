/**
 * Conformance: real HTTP requests against a started controller, every response body validated against the schema
 * OpenZiti's published spec declares for that operation and status (../shared/openziti-spec). Runs on both engines.
 */
import { createLocalJWKSet, decodeJwt, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEEL_VERSION } from '../../src/version.js';
import { type FakeMember, fakeClusterView, fakeMember } from '../support/cluster-view.js';
import { COVERED_IN_OWN_FILES, conformant, exercisedStatuses, partialRun } from '../support/conformance.js';
import { ADMIN_PASSWORD, call, login, startServer, type TestServer } from '../support/server.js';
import { loadSpec, SPEC_AVAILABLE } from '../support/spec.js';
import { checkResponse, specOperationOf } from '../support/spec-check.js';

describe.each(['uws', 'node'] as const)('conformance on the %s engine', (engine) => {
  let srv: TestServer;
  let token: string;

  beforeAll(async () => {
    srv = await startServer({ engine });
    token = await login(srv.base);
  });
  afterAll(async () => {
    // every operation Keel serves has been called, and each success status it documents checked, above
    const served = srv.ctl.ops
      .filter((o) => !o.undocumented)
      .filter((o) => !COVERED_IN_OWN_FILES.some((c) => c.paths.test(o.path)))
      .flatMap((o) =>
        o.apis.flatMap((api) => Object.keys(o.responses).map((status) => `${api} ${o.method} ${o.path} ${status}`)),
      );
    const missing = partialRun() ? [] : served.filter((k) => !exercisedStatuses.has(k));
    await srv.stop();
    if (SPEC_AVAILABLE) expect(missing).toEqual([]);
  });

  describe('informational', () => {
    for (const spec of ['client', 'management'] as const) {
      it(`${spec}: version, root, capabilities, specs`, async () => {
        const v = await conformant(spec, 'GET', '/version', srv.base);
        expect(v.status).toBe(200);
        expect(v.body.data.apiVersions['edge-management'].v1.path).toBe('/edge/management/v1');
        expect(v.body.data.apiVersions.edge.v1.path).toBe('/edge/client/v1');
        expect(v.body.data.capabilities).toEqual([]);
        const root = await conformant(spec, 'GET', '/', srv.base);
        expect(root.body).toEqual(v.body);
        const caps = await conformant(spec, 'GET', '/enumerated-capabilities', srv.base);
        expect(caps.body.data).toEqual(['OIDC_AUTH', 'HA_CONTROLLER']);
        const specs = await conformant(spec, 'GET', '/specs', srv.base);
        expect(specs.body.data.map((x: any) => x.id)).toEqual(['edge-client']);
        const detail = await conformant(spec, 'GET', '/specs/{id}', srv.base, { params: { id: `edge-${spec}` } });
        expect(detail.body.data._links.spec.href).toBe(`./specs/edge-${spec}/spec`);
        const missing = await conformant(spec, 'GET', '/specs/{id}', srv.base, { params: { id: 'nope' } });
        expect(missing.status).toBe(404);
        expect(missing.body.error.code).toBe('NOT_FOUND');
      });

      it(`${spec}: /.well-known/est/cacerts answers the PKCS#7 store the spec produces`, async () => {
        const res = await call('GET', `${srv.base}/edge/${spec}/v1/.well-known/est/cacerts`);
        expect(res.status).toBe(200);
        const produces = SPEC_AVAILABLE
          ? loadSpec(spec).paths['/.well-known/est/cacerts'].get.produces
          : ['application/pkcs7-mime'];
        expect(produces).toContain(res.headers.get('content-type'));
        // base64 in lines: decodes to a DER SEQUENCE (PKCS#7 ContentInfo)
        expect(res.text).toMatch(/^([A-Za-z0-9+/]{64}\n)*[A-Za-z0-9+/]+=*\n$/);
        expect(Buffer.from(res.text, 'base64')[0]).toBe(0x30);
      });

      it(`${spec}: /network-jwts lists the network JWT "default", signed with the enrollment key, cached`, async () => {
        const r = await conformant(spec, 'GET', '/network-jwts', srv.base);
        expect(r.status).toBe(200);
        expect(r.body.data.map((x: any) => x.name)).toEqual(['default']);
        const jwks = await call('GET', `${srv.base}/edge/client/v1/enroll/jwks`);
        const { payload, protectedHeader } = await jwtVerify(r.body.data[0].token, createLocalJWKSet(jwks.body));
        expect(protectedHeader.alg).toBe('ES256');
        expect(payload).toMatchObject({
          em: 'network',
          iss: `${srv.base}/`,
          sub: `${srv.base}/`,
          aud: 'openziti-enroller',
          ctrls: [srv.base],
        });
        expect(payload.jti).toMatch(/^[0-9a-f-]{36}$/);
        expect(payload.exp).toBeUndefined();
        // signed once: the same token for the next caller, on either API
        const again = await call(
          'GET',
          `${srv.base}/edge/${spec === 'client' ? 'management' : 'client'}/v1/network-jwts`,
        );
        expect(again.body.data[0].token).toBe(r.body.data[0].token);
      });

      it(`${spec}: serves its own OpenAPI document, generated from its routes`, async () => {
        const body = await call('GET', `${srv.base}/edge/${spec}/v1/specs/edge-${spec}/spec`);
        expect(body.status).toBe(200);
        expect(body.body.swagger).toBe('2.0');
        expect(body.body.basePath).toBe(`/edge/${spec}/v1`);
        expect(Object.keys(body.body.paths)).toContain('/version');
        const sw = await call('GET', `${srv.base}/edge/${spec}/v1/swagger.json`);
        expect(sw.body).toEqual(body.body);
      });
    }

    it('controllers: a single node lists itself, online, with its API addresses', async () => {
      for (const spec of ['client', 'management'] as const) {
        const r = await conformant(spec, 'GET', '/controllers', srv.base, { token });
        expect(r.status).toBe(200);
        expect(r.body.data).toHaveLength(1);
        expect(r.body.data[0].isOnline).toBe(true);
        expect(r.body.data[0].apiAddresses['edge-client'][0].url).toBe(`${srv.base}/edge/client/v1`);
        // the management API's address is for management callers only (OpenZiti's client view drops it)
        const management = r.body.data[0].apiAddresses['edge-management'];
        if (spec === 'management') expect(management[0].url).toBe(`${srv.base}/edge/management/v1`);
        else expect(management).toBeUndefined();
        expect(r.body.meta.pagination.totalCount).toBe(1);
        const bad = await conformant(spec, 'GET', '/controllers', srv.base, { token, query: 'filter=nope%20%3D' });
        expect(bad.status).toBe(400);
        expect((await conformant(spec, 'GET', '/controllers', srv.base)).status).toBe(401);
      }
    });

    it('the fabric cluster API on a single node: 400 SERVER_NOT_RUNNING_IN_HA_MODE (OpenZiti), for admins only', async () => {
      const fabric = `${srv.base}/fabric/v1/cluster`;
      const requests: [string, string, unknown][] = [
        ['GET', 'list-members', undefined],
        ['POST', 'add-member', { address: 'tls:ctl2:6262' }],
        ['POST', 'remove-member', { id: 'ctl2' }],
        ['POST', 'transfer-leadership', { newLeaderId: 'ctl2' }],
      ];
      for (const [method, path, body] of requests) {
        const r = await call(method, `${fabric}/${path}`, { token, body });
        expect([r.status, r.body.error.code], r.text).toEqual([400, 'SERVER_NOT_RUNNING_IN_HA_MODE']);
        expect(r.body.error.message).toBe('The server is not running in HA mode. HA operations are not permitted');
        expect((await call(method, `${fabric}/${path}`, { body })).status).toBe(401);
      }
    });

    it('controllers on a cluster member: the client API shows no peer address and no management endpoint', async () => {
      // ctrlAddress: where routers connect (a member's router control listener), else the member's peer address
      const withRouters = (m: FakeMember, routerAddress: string): FakeMember => ({
        ...m,
        status: { ...m.status!, routerAddress },
      });
      srv.ctl.svc.cluster = fakeClusterView('n2', () => [
        withRouters(fakeMember('n1', true, ['https://n1.example:1280']), 'routers1.example:3022'),
        withRouters(fakeMember('n2', true, [srv.base]), 'not an address/'),
        fakeMember('n3', false, []),
      ]);
      try {
        const [client, management] = [
          await conformant('client', 'GET', '/controllers', srv.base, { token }),
          await conformant('management', 'GET', '/controllers', srv.base, { token }),
        ];
        expect(management.body.data.map((c: any) => [c.id, c.ctrlAddress, Object.keys(c.apiAddresses)])).toEqual([
          ['n1', 'tls:routers1.example:3022', ['edge-client', 'edge-management']],
          // a router address not in host:port form is not shown
          ['n2', 'tcp:n2:6262', ['edge-client', 'edge-management']],
          ['n3', 'tcp:n3:6262', ['edge-client', 'edge-management']],
        ]);
        // members never seen online: dated when this node first listed them, the same on every request
        expect(management.body.data.map((c: any) => [c.lastJoinedAt, c.createdAt])).toEqual([
          ['2026-01-02T03:04:05.000Z', '2026-01-02T03:04:05.000Z'],
          ['2026-01-02T03:04:05.000Z', '2026-01-02T03:04:05.000Z'],
          ['2026-01-02T03:04:05.000Z', '2026-01-02T03:04:05.000Z'],
        ]);
        expect(client.body.data.map((c: any) => [c.id, c.ctrlAddress, c.apiAddresses])).toEqual([
          ['n1', null, { 'edge-client': [{ url: 'https://n1.example:1280/edge/client/v1', version: 'v1' }] }],
          ['n2', null, { 'edge-client': [{ url: `${srv.base}/edge/client/v1`, version: 'v1' }] }],
          ['n3', null, { 'edge-client': [] }],
        ]);
        // nor through a filter on it
        for (const term of ['6262', '3022']) {
          const filter = encodeURIComponent(`ctrlAddress contains "${term}"`);
          const r = await conformant('client', 'GET', '/controllers', srv.base, { token, query: `filter=${filter}` });
          expect(r.body.meta.pagination.totalCount).toBe(0);
        }
      } finally {
        srv.ctl.svc.cluster = null;
      }
    });

    it('network-jwts on a cluster member: ctrls names every live member, this one first; re-signed when that changes', async () => {
      let members = [
        fakeMember('n1', true, ['https://n1.example:1280']),
        fakeMember('n2', true, [srv.base]), // the answering node's own URL: listed once
        fakeMember('n3', false, ['https://n3.example:1280']),
        fakeMember('n4', true, ['https://n4.example:1280', 'https://n4.alt:1280']),
      ];
      srv.ctl.svc.cluster = fakeClusterView('n2', () => members);
      const ctrlsOf = async () => {
        const r = await conformant('client', 'GET', '/network-jwts', srv.base);
        return decodeJwt(r.body.data[0].token).ctrls;
      };
      try {
        // n3 does not answer its status polls: left out, so SDKs do not try it first
        expect(await ctrlsOf()).toEqual([
          srv.base,
          'https://n1.example:1280',
          'https://n4.example:1280',
          'https://n4.alt:1280',
        ]);
        members = [members[1]!, { ...members[2]!, online: true }];
        expect(await ctrlsOf()).toEqual([srv.base, 'https://n3.example:1280']);
        // a member refused for its peer protocol: not connected, its version the release it reported then
        const refusal = { reason: 'the peer (Keel 9.0.0) speaks peer protocol 9; …', release: '9.0.0' };
        members = [members[0]!, { ...members[1]!, online: false, status: { version: '0.1.0' } as any, refusal }];
        const listed = await call('GET', `${srv.base}/fabric/v1/cluster/list-members`, { token });
        expect(listed.body.data.map((m: any) => [m.id, m.connected, m.version])).toEqual([
          ['n2', true, KEEL_VERSION],
          ['n3', false, '9.0.0'],
        ]);
        members[1] = { ...members[1]!, refusal: { reason: 'no header', release: null } };
        const old = await call('GET', `${srv.base}/fabric/v1/cluster/list-members`, { token });
        expect(old.body.data[1].version).toBe('unknown');
        // a member this node never reached: no status, so no release to tell (not this node's own)
        members[1] = { ...fakeMember('n5', false, []), status: null, refusal: null };
        const never = await call('GET', `${srv.base}/fabric/v1/cluster/list-members`, { token });
        expect(never.body.data.map((m: any) => [m.id, m.connected, m.version])).toEqual([
          ['n2', true, KEEL_VERSION],
          ['n5', false, 'unknown'],
        ]);
      } finally {
        srv.ctl.svc.cluster = null;
      }
      expect(await ctrlsOf()).toEqual([srv.base]);
    });

    it('root aliases: / and /version answer the version', async () => {
      const a = await call('GET', `${srv.base}/`);
      const b = await call('GET', `${srv.base}/version`);
      const c = await call('GET', `${srv.base}/edge/client/v1/version`);
      expect(a.status).toBe(200);
      expect(a.body).toEqual(c.body);
      expect(b.body).toEqual(c.body);
    });

    it('client: protocols', async () => {
      const p = await conformant('client', 'GET', '/protocols', srv.base);
      expect(p.status).toBe(200);
      expect(Object.values<any>(p.body.data)[0].address).toMatch(/127\.0\.0\.1:\d+/);
    });
  });

  describe('authentication and the current session', () => {
    for (const spec of ['client', 'management'] as const) {
      it(`${spec}: password login, current-api-session, current-identity, logout`, async () => {
        const auth = await conformant(spec, 'POST', '/authenticate', srv.base, {
          query: 'method=password',
          body: { username: 'admin', password: ADMIN_PASSWORD },
        });
        expect(auth.status).toBe(200);
        const t = auth.headers.get('zt-session')!;
        expect(t).toMatch(/^[0-9a-f-]{36}$/);
        expect(auth.body.data.token).toBe(t);
        expect(auth.body.data.expirationSeconds).toBeGreaterThan(1700);
        expect(Date.parse(auth.body.data.expiresAt)).toBeGreaterThan(Date.now());
        expect(auth.body.data.identity.name).toBe('Default Admin');

        const cur = await conformant(spec, 'GET', '/current-api-session', srv.base, { token: t });
        expect(cur.status).toBe(200);
        expect(cur.body.data.id).toBe(auth.body.data.id);
        expect(cur.headers.get('expiration-seconds')).toMatch(/^\d+$/);
        expect(cur.headers.get('expires-at')).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? \+0000 UTC$/);

        const me = await conformant(spec, 'GET', '/current-identity', srv.base, { token: t });
        expect(me.status).toBe(200);
        expect(me.body.data.isDefaultAdmin).toBe(true);
        expect(me.body.data.authenticators.updb.username).toBe('admin');
        expect(me.body.data.hasApiSession).toBe(true);

        const out = await conformant(spec, 'DELETE', '/current-api-session', srv.base, { token: t });
        expect(out.status).toBe(200);
        expect(out.body).toEqual({ data: {}, meta: {} });
        const after = await conformant(spec, 'GET', '/current-api-session', srv.base, { token: t });
        expect(after.status).toBe(401);
        expect(after.body.error.code).toBe('UNAUTHORIZED');
      });

      it(`${spec}: bad credentials and methods`, async () => {
        const bad = await conformant(spec, 'POST', '/authenticate', srv.base, {
          query: 'method=password',
          body: { username: 'admin', password: 'wrong-password' },
        });
        expect(bad.status).toBe(401);
        expect(bad.body.error.code).toBe('INVALID_AUTH');
        const unknown = await conformant(spec, 'POST', '/authenticate', srv.base, {
          query: 'method=magic',
          body: { username: 'admin', password: ADMIN_PASSWORD },
        });
        expect(unknown.status).toBe(400);
        expect(unknown.body.error.code).toBe('INVALID_AUTH_METHOD');
        const noUser = await conformant(spec, 'POST', '/authenticate', srv.base, {
          query: 'method=password',
          body: { username: 'nobody-here', password: ADMIN_PASSWORD },
        });
        expect(noUser.status).toBe(401);
        const unauth = await conformant(spec, 'GET', '/current-identity', srv.base);
        expect(unauth.status).toBe(401);
        expect(unauth.headers.get('www-authenticate')).toContain('zt-session realm="zt-session" error="missing"');
      });
    }
  });

  describe('management: identities', () => {
    it('create, detail, list, update, patch, delete', async () => {
      const created = await conformant('management', 'POST', '/identities', srv.base, {
        token,
        body: {
          name: `conf-${engine}`,
          type: 'User',
          isAdmin: false,
          roleAttributes: ['web', 'db'],
          tags: { env: 'test' },
        },
      });
      expect(created.status).toBe(201);
      const id = created.body.data.id;
      expect(created.body.data._links.self.href).toBe(`./identities/${id}`);

      const detail = await conformant('management', 'GET', '/identities/{id}', srv.base, { token, params: { id } });
      expect(detail.body.data).toMatchObject({
        id,
        name: `conf-${engine}`,
        typeId: 'Default',
        isAdmin: false,
        isDefaultAdmin: false,
        roleAttributes: ['web', 'db'],
        authPolicyId: 'default',
        tags: { env: 'test' },
        hasApiSession: false,
        disabled: false,
      });
      expect(detail.body.data.type).toMatchObject({ entity: 'identity-types', id: 'Default', name: 'Default' });

      const list = await conformant('management', 'GET', '/identities', srv.base, {
        token,
        query: `filter=${encodeURIComponent(`name = "conf-${engine}"`)}`,
      });
      expect(list.body.data.map((x: any) => x.id)).toEqual([id]);
      expect(list.body.meta.pagination).toEqual({ limit: 10, offset: 0, totalCount: 1 });
      expect(list.body.meta.filterableFields).toContain('name');

      const upd = await conformant('management', 'PUT', '/identities/{id}', srv.base, {
        token,
        params: { id },
        body: { name: `conf-${engine}-2`, type: 'Device', isAdmin: false },
      });
      expect(upd.status).toBe(200);
      const afterPut = (await call('GET', `${srv.mgmt}/identities/${id}`, { token })).body.data;
      expect(afterPut.name).toBe(`conf-${engine}-2`);
      expect(afterPut.roleAttributes).toEqual([]); // PUT replaces every field
      expect(afterPut.tags).toEqual({});

      const patch = await conformant('management', 'PATCH', '/identities/{id}', srv.base, {
        token,
        params: { id },
        body: { roleAttributes: ['x'] },
      });
      expect(patch.status).toBe(200);
      const afterPatch = (await call('GET', `${srv.mgmt}/identities/${id}`, { token })).body.data;
      expect(afterPatch.name).toBe(`conf-${engine}-2`);
      expect(afterPatch.roleAttributes).toEqual(['x']);

      const ra = await conformant('management', 'GET', '/identity-role-attributes', srv.base, { token });
      expect(ra.body.data).toContain('x');

      const del = await conformant('management', 'DELETE', '/identities/{id}', srv.base, { token, params: { id } });
      expect(del.status).toBe(200);
      const gone = await conformant('management', 'GET', '/identities/{id}', srv.base, { token, params: { id } });
      expect(gone.status).toBe(404);
      expect(gone.body.error.cause).toEqual({ code: 'UNHANDLED', message: `identity with id ${id} not found` });
    });

    it('auth policies and config types (read-only for now)', async () => {
      const policies = await conformant('management', 'GET', '/auth-policies', srv.base, { token });
      expect(policies.body.data.map((p: any) => p.id)).toEqual(['default']);
      const def = await conformant('management', 'GET', '/auth-policies/{id}', srv.base, {
        token,
        params: { id: 'default' },
      });
      expect(def.body.data.primary.updb).toMatchObject({ allowed: true, minPasswordLength: 5, maxAttempts: 0 });
      const types = await conformant('management', 'GET', '/config-types', srv.base, { token, query: 'limit=-1' });
      expect(types.body.data.map((t: any) => t.name).sort()).toEqual(
        [
          'host.v1',
          'host.v2',
          'intercept.v1',
          'interfaces.v1',
          'proxy.v1',
          'router.link.v1',
          'ziti-tunneler-client.v1',
          'ziti-tunneler-server.v1',
        ].sort(),
      );
      const one = await conformant('management', 'GET', '/config-types/{id}', srv.base, {
        token,
        params: { id: 'g7cIWbcGg' },
      });
      expect(one.body.data).toMatchObject({ name: 'intercept.v1', target: 'service' });
    });

    it('identity types', async () => {
      const types = await conformant('management', 'GET', '/identity-types', srv.base, { token });
      expect(types.body.data.map((t: any) => t.id).sort()).toEqual(['Default', 'Router']);
      const one = await conformant('management', 'GET', '/identity-types/{id}', srv.base, {
        token,
        params: { id: 'Router' },
      });
      expect(one.body.data.name).toBe('Router');
    });
  });

  describe('management: authenticators and API sessions', () => {
    it('updb authenticator lifecycle, identity authenticators, login with it, API sessions', async () => {
      const ident = await call('POST', `${srv.mgmt}/identities`, {
        token,
        body: { name: `user-${engine}`, type: 'User', isAdmin: false },
      });
      const identityId = ident.body.data.id;
      const created = await conformant('management', 'POST', '/authenticators', srv.base, {
        token,
        body: { method: 'updb', identityId, username: `u-${engine}`, password: 'secret-1' },
      });
      expect(created.status).toBe(201);
      const aid = created.body.data.id;
      const detail = await conformant('management', 'GET', '/authenticators/{id}', srv.base, {
        token,
        params: { id: aid },
      });
      expect(detail.body.data).toMatchObject({ method: 'updb', identityId, username: `u-${engine}` });
      expect(JSON.stringify(detail.body)).not.toContain('argon2');
      const list = await conformant('management', 'GET', '/authenticators', srv.base, {
        token,
        query: 'filter=method%3D%22updb%22',
      });
      expect(list.body.data.length).toBeGreaterThanOrEqual(2);
      const byIdentity = await conformant('management', 'GET', '/identities/{id}/authenticators', srv.base, {
        token,
        params: { id: identityId },
      });
      expect(byIdentity.body.data.map((a: any) => a.id)).toEqual([aid]);

      const second = await conformant('management', 'POST', '/authenticators', srv.base, {
        token,
        body: { method: 'updb', identityId, username: `u2-${engine}`, password: 'secret-1' },
      });
      expect(second.status).toBe(409);
      expect(second.body.error.code).toBe('MAX_AUTHENTICATOR_METHODS_REACHED');

      const userToken = await login(srv.base, `u-${engine}`, 'secret-1');
      const put = await conformant('management', 'PUT', '/authenticators/{id}', srv.base, {
        token,
        params: { id: aid },
        body: { username: `u-${engine}`, password: 'secret-2' },
      });
      expect(put.status).toBe(200);
      await expect(login(srv.base, `u-${engine}`, 'secret-1')).rejects.toThrow(/401/);
      await login(srv.base, `u-${engine}`, 'secret-2');
      const patch = await conformant('management', 'PATCH', '/authenticators/{id}', srv.base, {
        token,
        params: { id: aid },
        body: { username: `v-${engine}` },
      });
      expect(patch.status).toBe(200);
      const userToken2 = await login(srv.base, `v-${engine}`, 'secret-2');

      const sessions = await conformant('management', 'GET', '/api-sessions', srv.base, {
        token,
        query: `filter=${encodeURIComponent(`identityId = "${identityId}"`)}`,
      });
      expect(sessions.body.data.length).toBe(3);
      const sid = sessions.body.data.find((s: any) => s.token === userToken2).id;
      const one = await conformant('management', 'GET', '/api-sessions/{id}', srv.base, { token, params: { id: sid } });
      expect(one.body.data.identityId).toBe(identityId);
      const nonAdmin = await conformant('management', 'GET', '/api-sessions', srv.base, { token: userToken });
      expect(nonAdmin.status).toBe(401);
      const del = await conformant('management', 'DELETE', '/api-sessions/{id}', srv.base, {
        token,
        params: { id: sid },
      });
      expect(del.status).toBe(200);
      expect((await call('GET', `${srv.client}/current-identity`, { token: userToken2 })).status).toBe(401);
      expect((await call('GET', `${srv.client}/current-identity`, { token: userToken })).status).toBe(200);

      const delAuth = await conformant('management', 'DELETE', '/authenticators/{id}', srv.base, {
        token,
        params: { id: aid },
      });
      expect(delAuth.status).toBe(200);
      // sessions created with a removed authenticator end with it
      expect((await call('GET', `${srv.client}/current-identity`, { token: userToken })).status).toBe(401);
    });
  });
});

describe('the conformance check itself', () => {
  it.skipIf(!SPEC_AVAILABLE)('maps concrete URLs to spec operations and rejects what the spec does not allow', () => {
    const m = 'http://127.0.0.1:1/edge/management/v1';
    expect(specOperationOf('GET', `${m}/identities/abc`)).toEqual({ spec: 'management', template: '/identities/{id}' });
    expect(specOperationOf('GET', `${m}/identity-types`)).toEqual({ spec: 'management', template: '/identity-types' });
    expect(specOperationOf('GET', 'http://127.0.0.1:1/version')).toEqual({ spec: 'client', template: '/version' });
    expect(specOperationOf('PATCH', `${m}/identities`)).toBeNull();
    expect(specOperationOf('GET', `${m}/no-such-thing`)).toBeNull();
    const meta = {};
    const check = (method: string, path: string, status: number, body: unknown) => () =>
      checkResponse(method, `${m}${path}`, { status, body, text: JSON.stringify(body) });
    // `empty.data` is an object, not anything
    expect(check('DELETE', '/identities/x', 200, { data: {}, meta })).not.toThrow();
    expect(check('DELETE', '/identities/x', 200, { data: 'x', meta })).toThrow(/empty/);
    const row = (createdAt: string, href: string) => ({
      data: { id: 'x', name: 'x', createdAt, updatedAt: createdAt, _links: { self: { href } } },
      meta,
    });
    expect(check('GET', '/identity-types/x', 200, row('2026-01-01T00:00:00.123Z', './identity-types/x'))).not.toThrow();
    // date-time needs the `T`
    expect(check('GET', '/identity-types/x', 200, row('2026-01-01 00:00:00Z', './identity-types/x'))).toThrow(
      /date-time/,
    );
    // relative hrefs are allowed in `_links` only
    expect(check('GET', '/identity-types/x', 200, row('2026-01-01T00:00:00Z', 'not a uri'))).toThrow(/uri/);
    // statuses the spec does not declare, and error bodies that are not the envelope
    expect(check('GET', '/identities', 418, { error: { code: 'X' }, meta })).toThrow(/not a status/);
    expect(check('GET', '/identities', 401, { message: 'nope' })).toThrow(/apiErrorEnvelope/);
  });
});

describe('identity enrollments on create', () => {
  let srv: TestServer;
  let token: string;
  beforeAll(async () => {
    srv = await startServer();
    token = await login(srv.base);
  });
  afterAll(() => srv.stop());

  it('an ott enrollment is created with the identity, with a signed JWT; one enrollment per create', async () => {
    const r = await conformant('management', 'POST', '/identities', srv.base, {
      token,
      body: { name: 'enrollee', type: 'Device', isAdmin: false, enrollment: { ott: true, updb: 'enrollee-user' } },
    });
    expect(r.status).toBe(201);
    const d = await conformant('management', 'GET', '/identities/{id}', srv.base, {
      token,
      params: { id: r.body.data.id },
    });
    const { ott, updb } = d.body.data.enrollment;
    expect(updb).toBeUndefined(); // as OpenZiti: the first of ott → ottca → updb
    expect(ott.token).toMatch(/^[0-9a-f-]{36}$/);
    const claims = JSON.parse(Buffer.from(ott.jwt.split('.')[1], 'base64url').toString());
    expect(claims).toMatchObject({ sub: r.body.data.id, jti: ott.token, em: 'ott', iss: srv.base });
    expect(claims.exp * 1000).toBe(Math.floor(Date.parse(ott.expiresAt) / 1000) * 1000);
    const header = JSON.parse(Buffer.from(ott.jwt.split('.')[0], 'base64url').toString());
    expect(header.alg).toBe('ES256');
    // deleting the identity removes its enrollments with it
    await call('DELETE', `${srv.mgmt}/identities/${r.body.data.id}`, { token });
    expect(srv.ctl.svc.store.collection('enrollments').size).toBe(0);
  });

  it('an updb enrollment carries the username; an empty one is ignored', async () => {
    const r = await call('POST', `${srv.mgmt}/identities`, {
      token,
      body: { name: 'updb-enrollee', type: 'User', isAdmin: false, enrollment: { updb: 'future-user' } },
    });
    const d = (await call('GET', `${srv.mgmt}/identities/${r.body.data.id}`, { token })).body.data;
    expect(Object.keys(d.enrollment)).toEqual(['updb']);
    const claims = JSON.parse(Buffer.from(d.enrollment.updb.jwt.split('.')[1], 'base64url').toString());
    expect(claims.em).toBe('updb');
    const e = await call('POST', `${srv.mgmt}/identities`, {
      token,
      body: { name: 'no-enrollee', type: 'User', isAdmin: false, enrollment: { updb: '' } },
    });
    expect((await call('GET', `${srv.mgmt}/identities/${e.body.data.id}`, { token })).body.data.enrollment).toEqual({});
  });

  it('refuses ottca without a CA and a taken updb username, creating nothing', async () => {
    const before = srv.ctl.svc.store.collection('identities').size;
    const a = await conformant('management', 'POST', '/identities', srv.base, {
      token,
      body: { name: 'ca-enrollee', type: 'Device', isAdmin: false, enrollment: { ottca: 'no-such-ca' } },
    });
    expect(a.status).toBe(400);
    expect(a.body.error.cause.field).toBe('enrollment.ottca');
    const b = await conformant('management', 'POST', '/identities', srv.base, {
      token,
      body: { name: 'dup-enrollee', type: 'Device', isAdmin: false, enrollment: { updb: 'admin' } },
    });
    expect(b.status).toBe(400);
    expect(srv.ctl.svc.store.collection('identities').size).toBe(before);
  });
});
