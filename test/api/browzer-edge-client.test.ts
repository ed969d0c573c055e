/**
 * OpenZiti's own generated Edge Client API client, `@openziti/ziti-browzer-edge-client` (what the browser SDK,
 * ziti-browzer-core, talks to the controller with), unmodified against Keel: the flows a browser endpoint performs
 * (version and API discovery, updb enrollment, password and ext-jwt login with its config types, the session
 * heartbeat, the current API session and identity, services with `configTypes`/filter/paging, a Dial session and its
 * edge routers, posture responses, an ephemeral session certificate, MFA, logout) and its error path (the error
 * envelope it hands back). The tests run in order: the first enrolls the identity the others log in as.
 *
 * The client resolves every answer with the parsed body, whatever the status (errors are `{error: {code, …}}`), and
 * fetches through `globalThis._ziti_realFetch` when one is defined: the test defines one that does what a browser
 * does around a cross-origin call (the CORS preflight and checks), records each status and checks each response
 * against OpenZiti's spec (test/support/spec-check.ts), then hands the response on untouched. What it found:
 * docs/compatibility.md.
 */
import { ZitiBrowzerEdgeClient } from '@openziti/ziti-browzer-edge-client';
import { importPKCS8, SignJWT } from 'jose';
import { generate } from 'otplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRootCa } from '../../src/pki/ca.js';
import { generateKeyPair, x509 } from '../../src/pki/crypto.js';
import { adminApi } from '../support/admin-api.js';
import { userWith } from '../support/api.js';
import { shiftedClock } from '../support/clock.js';
import { type ConnectedRouter, connectRouter, csr, DEFAULT_HELLO, enrolledRouter } from '../support/router-client.js';
import { call, login, startServer, type TestServer } from '../support/server.js';
import { checkResponse } from '../support/spec-check.js';

const clock = shiftedClock();
const PASSWORD = 'browzer-pass-1';
const MINUTE_MS = 60_000;
/** Keel's default idle timeout of API sessions. */
const SESSION_TIMEOUT_MS = 30 * MINUTE_MS;
/** A router whose listeners include the `ws` one the browser SDK dials (it keeps only routers with `urls.ws`). */
const HELLO = { ...DEFAULT_HELLO, listeners: ['tls:router1.example.test:3022', 'ws:router1.example.test:3023'] };

let srv: TestServer;
let admin: string;
let router: ConnectedRouter;
let identityId: string;
let username: string;
let serviceId: string;
let guardedId: string;
let osCheckId: string;
let interceptTypeId: string;
/** The statuses of the client's requests, in order: `<METHOD> <path> <status>`. */
const seen: string[] = [];

const { create } = adminApi(
  () => srv,
  () => admin,
);

/** What `_ziti_realFetch` is: the fetch the client calls (url, init) → Response. */
type Fetch = (url: string, init: RequestInit) => Promise<Response>;

/** The page the browser SDK runs on: another origin than the controller's, so every call is a CORS request. */
const PAGE_ORIGIN = 'https://app.example.test';
/** Request headers a browser sends without a preflight (with the values this client gives them). */
const SAFELISTED = new Set(['accept', 'accept-language', 'content-language']);

/** The client's headers as a browser sees them (it gives some values as one-element arrays). */
function headerNames(init: RequestInit): string[] {
  return Object.keys((init.headers ?? {}) as Record<string, unknown>).map((h) => h.toLowerCase());
}

/**
 * What a browser checks before and after a cross-origin call (Fetch standard, CORS): the client always sends
 * `Content-Type: application/json` (and `zt-session` once logged in), so every call is preflighted; the preflight
 * must answer 2xx, allow the origin, the method (unless GET/HEAD/POST) and each non-safelisted header; the answer
 * itself must allow the origin too. Throws what a browser would refuse.
 */
async function corsChecked(url: string, init: RequestInit): Promise<Response> {
  const method = init.method ?? 'GET';
  const unsafe = headerNames(init)
    .filter((h) => !SAFELISTED.has(h))
    .sort();
  const preflight = await fetch(url, {
    method: 'OPTIONS',
    headers: {
      origin: PAGE_ORIGIN,
      'access-control-request-method': method,
      ...(unsafe.length > 0 ? { 'access-control-request-headers': unsafe.join(',') } : {}),
    },
  });
  const allowOrigin = preflight.headers.get('access-control-allow-origin');
  if (preflight.status < 200 || preflight.status > 299 || (allowOrigin !== '*' && allowOrigin !== PAGE_ORIGIN)) {
    throw new Error(`CORS preflight of ${method} ${url} refused: ${preflight.status}, allow-origin ${allowOrigin}`);
  }
  const list = (name: string) =>
    (preflight.headers.get(name) ?? '')
      .split(',')
      .map((v) => v.trim().toLowerCase())
      .filter((v) => v !== '');
  const methods = list('access-control-allow-methods');
  if (!['GET', 'HEAD', 'POST'].includes(method) && !methods.includes(method.toLowerCase()) && !methods.includes('*')) {
    throw new Error(`CORS preflight of ${method} ${url} does not allow the method: ${methods}`);
  }
  const allowed = list('access-control-allow-headers');
  const missing = unsafe.filter((h) => !allowed.includes(h) && !(allowed.includes('*') && h !== 'authorization'));
  if (missing.length > 0) throw new Error(`CORS preflight of ${method} ${url} does not allow headers ${missing}`);
  const res = await fetch(url, {
    ...init,
    headers: { ...(init.headers as Record<string, string>), origin: PAGE_ORIGIN },
  });
  const answerOrigin = res.headers.get('access-control-allow-origin');
  if (answerOrigin !== '*' && answerOrigin !== PAGE_ORIGIN) {
    throw new Error(`CORS: the answer to ${method} ${url} does not allow the origin (${answerOrigin})`);
  }
  return res;
}

/** Whether the client runs in a browser (CORS applies) or in Node (as an SDK on a server would). */
let inBrowser = true;

const recordingFetch: Fetch = async (url, init) => {
  const res = inBrowser ? await corsChecked(url, init) : await fetch(url, init);
  const text = await res.clone().text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  const method = init.method ?? 'GET';
  seen.push(`${method} ${new URL(url).pathname} ${res.status}`);
  checkResponse(method, url, { status: res.status, body, text });
  return res;
};

/**
 * The client with its operations' parameters optional, as its code treats them (its bundled typings declare every
 * parameter required, and `limit`/`offset` numbers where ziti-browzer-core passes strings).
 */
type EdgeClient = {
  [K in keyof ZitiBrowzerEdgeClient]: ZitiBrowzerEdgeClient[K] extends (p: never) => Promise<unknown>
    ? (parameters: Record<string, unknown>) => Promise<any>
    : ZitiBrowzerEdgeClient[K];
};

/**
 * A client as ziti-browzer-core makes one: the domain is the client API's base URL; it logs through `logger`; with
 * an IdP's access token, `token_type` and `access_token` (sent as `Authorization` on every call).
 */
function newClient(domain: string, idp: { token_type: string; access_token: string } | null = null): EdgeClient {
  const quiet = () => {};
  const logger = { trace: quiet, debug: quiet, info: quiet, error: quiet };
  return new ZitiBrowzerEdgeClient({ domain, logger, ...idp }) as unknown as EdgeClient;
}

/** Runs `fn` with the client outside a browser (no CORS), then back in one. */
async function inNode<T>(fn: () => Promise<T>): Promise<T> {
  inBrowser = false;
  try {
    return await fn();
  } finally {
    inBrowser = true;
  }
}

/** The status of the client's last request (the client itself does not expose it). */
const lastStatus = () => Number(seen.at(-1)?.split(' ').at(-1));

/** ziti-browzer-core's login: password, its config types, its environment and SDK info; the token goes in `zt-session`. */
async function browzerLogin(c: EdgeClient, password = PASSWORD): Promise<any> {
  const res = await c.authenticate({
    method: 'password',
    auth: {
      username,
      password,
      configTypes: ['ziti-tunneler-client.v1', 'intercept.v1'],
      envInfo: { arch: 'n/a', os: 'n/a' },
      sdkInfo: { type: 'ziti-browzer-core', version: '0.51.1', branch: 'main', revision: 'abc' },
    },
  });
  if (res.data?.token) c.setApiKey(res.data.token, 'zt-session', false);
  return res;
}

beforeAll(async () => {
  (globalThis as { _ziti_realFetch?: Fetch })._ziti_realFetch = recordingFetch;
  // no idle sweep on a timer: one falling inside a shifted-clock call would end every other session
  srv = await startServer({ clock, sessionSweep_ms: 3_600_000, routerControl: { host: '127.0.0.1', port: 0 } });
  admin = await login(srv.base);
  // the endpoint's identity, enrolled below through the client (updb)
  username = 'browzer-user';
  const identity = await call('POST', `${srv.mgmt}/identities`, {
    token: admin,
    body: {
      name: 'browzer-identity',
      type: 'User',
      isAdmin: false,
      roleAttributes: ['web'],
      enrollment: { updb: username },
    },
  });
  expect(identity.status, identity.text).toBe(201);
  identityId = identity.body.data.id;
  const types = await call('GET', `${srv.mgmt}/config-types?filter=${encodeURIComponent('name="intercept.v1"')}`, {
    token: admin,
  });
  interceptTypeId = types.body.data[0].id;
  const config = await create('/configs', {
    name: 'web-intercept',
    configTypeId: interceptTypeId,
    data: { protocols: ['tcp'], addresses: ['web.ziti'], portRanges: [{ low: 80, high: 80 }] },
  });
  serviceId = await create('/services', {
    name: 'web',
    encryptionRequired: true,
    roleAttributes: ['web-svc'],
    configs: [config],
  });
  for (let i = 0; i < 3; i++)
    await create('/services', { name: `web-extra-${i}`, encryptionRequired: true, roleAttributes: ['web-svc'] });
  osCheckId = await create('/posture-checks', {
    name: 'linux-only',
    typeId: 'OS',
    operatingSystems: [{ type: 'Linux', versions: ['>=5.0.0'] }],
  });
  guardedId = await create('/services', { name: 'guarded', encryptionRequired: true, roleAttributes: ['guarded-svc'] });
  await create('/service-policies', {
    name: 'web-dial',
    type: 'Dial',
    semantic: 'AnyOf',
    identityRoles: ['#web'],
    serviceRoles: ['#web-svc'],
  });
  await create('/service-policies', {
    name: 'guarded-dial',
    type: 'Dial',
    semantic: 'AnyOf',
    identityRoles: ['#web'],
    serviceRoles: ['#guarded-svc'],
    postureCheckRoles: [`@${osCheckId}`],
  });
  await create('/edge-router-policies', {
    name: 'web-erp',
    semantic: 'AnyOf',
    identityRoles: ['#web'],
    edgeRouterRoles: ['#web-er'],
  });
  await create('/service-edge-router-policies', {
    name: 'web-serp',
    semantic: 'AnyOf',
    serviceRoles: ['#web-svc', '#guarded-svc'],
    edgeRouterRoles: ['#web-er'],
  });
  const creds = await enrolledRouter(srv.mgmt, srv.client, admin, { name: 'web-er1', roleAttributes: ['web-er'] });
  router = await connectRouter(srv.ctl.routerControl!.port, creds, HELLO);
});
afterAll(async () => {
  router?.close();
  delete (globalThis as { _ziti_realFetch?: Fetch })._ziti_realFetch;
  await srv?.stop();
});

describe('ziti-browzer-edge-client against Keel', () => {
  it('discovers the client API from /version and enrolls the identity (updb)', async () => {
    const bootstrap = newClient(srv.base);
    const version = await bootstrap.listVersion({});
    expect(lastStatus()).toBe(200);
    expect(version.data.version).toMatch(/^v\d+\.\d+\.\d+/);
    expect(typeof version.data.revision).toBe('string');
    expect(typeof version.data.buildDate).toBe('string');
    const edgeClient = version.data.apiVersions['edge-client'].v1;
    expect(edgeClient.path).toBe('/edge/client/v1');
    expect(edgeClient.apiBaseUrls).toEqual([srv.client]);
    const c = newClient(edgeClient.apiBaseUrls[0]);
    // the client API's root answers the same document
    expect((await c.listRoot({})).data.apiVersions).toEqual(version.data.apiVersions);
    const caps = await c.listEnumeratedCapabilities({});
    expect(caps.data).toEqual(expect.arrayContaining(['HA_CONTROLLER']));
    const protocols = await c.listProtocols({});
    expect(Object.keys(protocols.data)).toContain('http');
    const signers = await c.listExternalJwtSigners({});
    expect(signers.data).toEqual([]);

    const detail = await call('GET', `${srv.mgmt}/identities/${identityId}`, { token: admin });
    const enrollToken = detail.body.data.enrollment.updb.token as string;
    const enrolled = await c.enrollUpdb({ token: enrollToken, updbCredentials: { password: PASSWORD } });
    expect(lastStatus()).toBe(200);
    expect(enrolled.error).toBeUndefined();
    // single use
    const again = await c.enrollUpdb({ token: enrollToken, updbCredentials: { password: PASSWORD } });
    expect(again.error.code).toBe('INVALID_ENROLLMENT_TOKEN');
  });

  it('logs in as the browser SDK does; the heartbeat re-reads the token and keeps the session alive', async () => {
    const c = newClient(srv.client);
    const auth = await browzerLogin(c);
    expect(lastStatus()).toBe(200);
    const session = auth.data;
    expect(session).toMatchObject({ identityId, authQueries: [], isMfaRequired: false, isMfaComplete: false });
    expect(typeof session.token).toBe('string');
    expect(session.token.length).toBeGreaterThan(0);
    expect(session.identity).toMatchObject({ id: identityId, name: 'browzer-identity' });
    expect(session.expirationSeconds).toBe(SESSION_TIMEOUT_MS / 1000);
    expect(Date.parse(session.expiresAt)).toBeGreaterThan(Date.now());
    // the config types were named; the session holds their ids
    expect(session.configTypes).toContain(interceptTypeId);

    // ziti-browzer-core's heartbeat: GET /current-api-session, then the token from its answer goes on
    const beat = await clock.during(20 * MINUTE_MS, () => c.getCurrentAPISession({}));
    expect(beat.data).toMatchObject({ id: session.id, token: session.token, identityId });
    expect(Date.parse(beat.data.expiresAt)).toBeGreaterThan(Date.parse(session.expiresAt));
    c.setApiKey(beat.data.token, 'zt-session', false);
    // 45 minutes after login, 25 after the heartbeat: alive (without the heartbeat it would have expired)
    const me = await clock.during(45 * MINUTE_MS, () => c.getCurrentIdentity({}));
    expect(lastStatus()).toBe(200);
    expect(me.data).toMatchObject({ id: identityId, name: 'browzer-identity', isAdmin: false, typeId: 'Default' });
    expect(me.data.envInfo).toMatchObject({ arch: 'n/a', os: 'n/a' });
    expect(me.data.sdkInfo).toMatchObject({ type: 'ziti-browzer-core', version: '0.51.1' });

    // a session without heartbeat expires: the client gets the unauthorized envelope
    const idle = newClient(srv.client);
    await browzerLogin(idle);
    const late = await clock.during(SESSION_TIMEOUT_MS + MINUTE_MS, () => idle.getCurrentIdentity({}));
    expect(lastStatus()).toBe(401);
    expect(late.error.code).toBe('UNAUTHORIZED');
    expect(late.data).toBeUndefined();
  });

  it("logs in with an IdP's token (ext-jwt), as ziti-browzer-core does in production", async () => {
    const ISSUER = 'https://idp.example.test';
    const AUDIENCE = 'browzer';
    const ca = await createRootCa({ commonName: 'browzer-idp' });
    await create('/external-jwt-signers', {
      name: 'browzer-idp',
      enabled: true,
      certPem: ca.certPem,
      kid: 'idp-1',
      issuer: ISSUER,
      audience: AUDIENCE,
      useExternalId: true,
      claimsProperty: 'email',
    });
    const patched = await call('PATCH', `${srv.mgmt}/identities/${identityId}`, {
      token: admin,
      body: { externalId: 'browzer@example.test' },
    });
    expect(patched.status, patched.text).toBe(200);
    const c = newClient(srv.client);
    const signers = await c.listExternalJwtSigners({});
    // a signer without externalAuthUrl: null, as OpenZiti sends it (and as Keel's own document declares it)
    expect(signers.data).toEqual([
      expect.objectContaining({
        name: 'browzer-idp',
        audience: AUDIENCE,
        externalAuthUrl: null,
        targetToken: 'ACCESS',
      }),
    ]);
    const doc = (await call('GET', `${srv.client}/swagger.json`)).body;
    const declared = doc.definitions.clientExternalJwtSignerDetail.allOf[1].properties.externalAuthUrl;
    expect(declared).toMatchObject({ type: 'string', 'x-nullable': true });
    const detail = await call('GET', `${srv.mgmt}/external-jwt-signers/${signers.data[0].id}`, { token: admin });
    expect(detail.body.data.externalAuthUrl).toBeNull();
    const key = await importPKCS8(ca.keyPem, 'ES256');
    const signed = (email: string) =>
      new SignJWT({ email })
        .setProtectedHeader({ alg: 'ES256', kid: 'idp-1' })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(key);
    const idp = newClient(srv.client, { token_type: 'Bearer', access_token: await signed('browzer@example.test') });
    // ziti-browzer-core's body for ext-jwt: the same as for a password, without username and password
    const auth = await idp.authenticate({
      method: 'ext-jwt',
      auth: {
        configTypes: ['intercept.v1'],
        envInfo: { arch: 'n/a', os: 'n/a' },
        sdkInfo: { type: 'ziti-browzer-core' },
      },
    });
    expect(lastStatus()).toBe(200);
    expect(auth.data).toMatchObject({ identityId, isMfaRequired: false });
    idp.setApiKey(auth.data.token, 'zt-session', false);
    expect((await idp.getCurrentIdentity({})).data.id).toBe(identityId);
    const stranger = newClient(srv.client, { token_type: 'Bearer', access_token: await signed('nobody@example.test') });
    const refused = await stranger.authenticate({ method: 'ext-jwt', auth: {} });
    expect(lastStatus()).toBe(401);
    expect(refused.error.code).toBe('INVALID_AUTH');
  });

  it('lists services with configTypes, filter and paging as the client passes them', async () => {
    const c = newClient(srv.client);
    await browzerLogin(c);
    // ziti-browzer-core's fetchServices: limit as a string, the session's config types
    const all = await c.listServices({ limit: '100' });
    expect(lastStatus()).toBe(200);
    expect(all.meta.pagination).toEqual({ limit: 100, offset: 0, totalCount: 5 });
    const web = all.data.find((s: { name: string }) => s.name === 'web');
    expect(web).toMatchObject({ id: serviceId, encryptionRequired: true, permissions: ['Dial'] });
    expect(web.config['intercept.v1']).toEqual({
      protocols: ['tcp'],
      addresses: ['web.ziti'],
      portRanges: [{ low: 80, high: 80 }],
    });
    expect(all.data.map((s: { name: string }) => s.name).sort()).toEqual([
      'guarded',
      'web',
      'web-extra-0',
      'web-extra-1',
      'web-extra-2',
    ]);

    const page = await c.listServices({ limit: 2, offset: 1, filter: 'name contains "web-extra"' });
    expect(page.meta.pagination).toEqual({ limit: 2, offset: 1, totalCount: 3 });
    expect(page.data).toHaveLength(2);
    // one config type asked for (an array of one: the client joins arrays with commas)
    const none = await c.listServices({ filter: `id = "${serviceId}"`, configTypes: ['host.v1'] });
    expect(none.data[0].config).toEqual({});
    const asked = await c.listServices({ filter: `id = "${serviceId}"`, configTypes: ['all'] });
    expect(Object.keys(asked.data[0].config)).toEqual(['intercept.v1']);
    // two types: the client sends `configTypes=intercept.v1%2Chost.v1`, one value, where the spec's parameter is
    // `collectionFormat: multi` (repeated); OpenZiti's client API takes the value as one name, which names no type
    const joined = await c.listServices({ filter: `id = "${serviceId}"`, configTypes: ['intercept.v1', 'host.v1'] });
    expect(seen.at(-1)).toBe('GET /edge/client/v1/services 200');
    expect(joined.data[0].config).toEqual({});

    const one = await c.detailService({ id: serviceId });
    expect(one.data).toMatchObject({ id: serviceId, name: 'web', permissions: ['Dial'] });
    const updates = await c.listServiceUpdates({});
    expect(Number.isNaN(Date.parse(updates.data.lastChangeAt))).toBe(false);
  });

  it("creates a Dial session, reads it back; the session's and the identity's edge routers carry the ws url", async () => {
    const c = newClient(srv.client);
    const auth = await browzerLogin(c);
    const created = await c.createSession({ session: { serviceId, type: 'Dial' } });
    expect(lastStatus()).toBe(201);
    const session = created.data;
    expect(session).toMatchObject({ serviceId, type: 'Dial', apiSessionId: auth.data.id, identityId });
    expect(typeof session.token).toBe('string');
    // what the browser SDK connects to: the routers with a ws url
    const ws = session.edgeRouters.filter((r: { urls: Record<string, string> }) => r.urls.ws !== undefined);
    expect(ws).toEqual([
      expect.objectContaining({
        name: 'web-er1',
        hostname: 'router1.example.test',
        isOnline: true,
        // the addresses the router advertised, verbatim (docs/routers.md)
        urls: { tls: 'tls:router1.example.test:3022', ws: 'ws:router1.example.test:3023' },
      }),
    ]);
    // ziti-browzer-core opens `urls.ws + '/ws'` as its WebSocket (WHATWG URL parsing, as browsers do)
    expect(new URL(`${ws[0].urls.ws}/ws`).href).toBe('ws://router1.example.test:3023/ws');
    const read = await c.detailSession({ id: session.id });
    expect(read.data).toMatchObject({ id: session.id, token: session.token, serviceId, type: 'Dial' });
    const listed = await c.listSessions({ filter: `serviceId = "${serviceId}"` });
    expect(listed.data.map((s: { id: string }) => s.id)).toEqual([session.id]);

    const mine = await c.getCurrentIdentityEdgeRouters({});
    expect(mine.data.map((r: any) => [r.name, r.isOnline, r.supportedProtocols.ws])).toEqual([
      ['web-er1', true, 'ws:router1.example.test:3023'],
    ]);
    const forService = await c.listServiceEdgeRouters({ id: serviceId });
    expect(forService.data.edgeRouters.map((r: any) => [r.name, r.isOnline])).toEqual([['web-er1', true]]);

    const gone = await c.deleteSession({ id: session.id });
    expect(gone.error).toBeUndefined();
    expect((await c.detailSession({ id: session.id })).error.code).toBe('NOT_FOUND');
  });

  it("session-token on the edge routers of a service: a live session of the caller's API session, else 401", async () => {
    const c = newClient(srv.client);
    const auth = await browzerLogin(c);
    const other = newClient(srv.client);
    await browzerLogin(other);
    const mine = (await c.createSession({ session: { serviceId, type: 'Dial' } })).data;
    const theirs = (await other.createSession({ session: { serviceId, type: 'Dial' } })).data;
    const routers = (sessionToken: string) => inNode(() => c.listServiceEdgeRouters({ id: serviceId, sessionToken }));

    const ok = await routers(mine.token);
    expect(lastStatus()).toBe(200);
    expect(ok.data.edgeRouters.map((r: { name: string }) => r.name)).toEqual(['web-er1']);
    for (const token of ['not-a-token', theirs.token]) {
      const refused = await routers(token);
      expect(lastStatus()).toBe(401);
      expect(refused.error.code).toBe('UNAUTHORIZED');
    }
    await c.deleteSession({ id: mine.id });
    expect((await routers(mine.token)).error.code).toBe('UNAUTHORIZED');
    // an empty header is no header (go-openapi binds it as absent)
    expect((await routers('')).data.edgeRouters).toHaveLength(1);
    // a browser cannot send the header at all: CORS allows content-type, accept, authorization and zt-session
    // only, and refuses the preflight asking for another (403, as OpenZiti's controller/api/cors.go)
    await expect(c.listServiceEdgeRouters({ id: serviceId, sessionToken: mine.token })).rejects.toThrow(
      /edge-routers refused: 403/,
    );
    expect(auth.data.id).not.toBe(theirs.apiSessionId);
  });

  it('posture: a failing check refuses the session until the client posts a passing response', async () => {
    const c = newClient(srv.client);
    await browzerLogin(c);
    const refused = await c.createSession({ session: { serviceId: guardedId, type: 'Dial' } });
    expect(lastStatus()).toBe(409);
    expect(refused.error.code).toBe('INVALID_POSTURE');
    const before = await c.detailService({ id: guardedId });
    expect(before.data.postureQueries[0]).toMatchObject({ isPassing: false, policyType: 'Dial' });

    const posted = await c.createPostureResponse({
      postureResponse: { id: osCheckId, typeId: 'OS', type: 'Linux', version: '6.1.0' },
    });
    expect(lastStatus()).toBe(201);
    expect(posted.data.services).toEqual([]);
    const after = await c.detailService({ id: guardedId });
    expect(after.data.postureQueries[0].isPassing).toBe(true);
    expect(after.data.postureQueries[0].postureQueries[0]).toMatchObject({ id: osCheckId, queryType: 'OS' });
    const allowed = await c.createSession({ session: { serviceId: guardedId, type: 'Dial' } });
    expect(lastStatus()).toBe(201);
    expect(allowed.data.serviceId).toBe(guardedId);

    const bulk = await c.createPostureResponseBulk({
      postureResponse: [{ id: osCheckId, typeId: 'OS', type: 'Linux', version: '4.19.0' }],
    });
    expect(lastStatus()).toBe(200);
    expect(bulk.error).toBeUndefined();
    expect((await c.createSession({ session: { serviceId: guardedId } })).error.code).toBe('INVALID_POSTURE');
  });

  it("an ephemeral session certificate, as ziti-browzer-core's enroller asks for one", async () => {
    const c = newClient(srv.client);
    await browzerLogin(c);
    const keys = await generateKeyPair();
    const made = await c.createCurrentApiSessionCertificate({
      sessionCertificate: { csr: await csr('ziti-browzer-core', keys) },
    });
    expect(lastStatus()).toBe(201);
    const cert = new x509.X509Certificate(made.data.certificate);
    expect(Date.parse(made.data.expirationDate ?? cert.notAfter.toISOString())).toBeGreaterThan(Date.now());
    expect(made.data.cas).toContain('-----BEGIN CERTIFICATE-----');
    const listed = await c.listCurrentApiSessionCertificates({});
    expect(listed.data.map((x: { id: string }) => x.id)).toEqual([made.data.id]);
    expect((await c.deleteCurrentApiSessionCertificate({ id: made.data.id })).error).toBeUndefined();
    expect((await c.listCurrentApiSessionCertificates({})).data).toEqual([]);
  });

  it('MFA: enroll and verify TOTP; a later login is partial until POST /authenticate/mfa', async () => {
    const name = 'browzer-mfa';
    await userWith(srv.base, admin, name);
    const c = newClient(srv.client);
    const login1 = await c.authenticate({ method: 'password', auth: { username: name, password: `${name}-pass` } });
    c.setApiKey(login1.data.token, 'zt-session', false);
    const enrolled = await c.enrollMfa({});
    expect(lastStatus()).toBe(201);
    expect(typeof enrolled.data.id).toBe('string');
    const mfa = (await c.detailMfa({})).data;
    expect(mfa).toMatchObject({ isVerified: false });
    expect(mfa.recoveryCodes.length).toBeGreaterThan(0);
    const secret = new URL(mfa.provisioningUrl).searchParams.get('secret')!;
    const totp = (offset_ms: number) => generate({ secret, epoch: Math.floor((Date.now() + offset_ms) / 1000) });
    expect((await c.verifyMfa({ mfaValidation: { code: await totp(0) } })).error).toBeUndefined();
    expect((await c.detailMfa({})).data.isVerified).toBe(true);

    // a new login: partial, with the MFA auth query the SDK answers
    const b = newClient(srv.client);
    const login2 = await b.authenticate({ method: 'password', auth: { username: name, password: `${name}-pass` } });
    expect(login2.data).toMatchObject({ isMfaRequired: true, isMfaComplete: false });
    expect(login2.data.authQueries).toEqual([
      expect.objectContaining({ typeId: 'MFA', provider: 'ziti', httpMethod: 'POST', httpUrl: './authenticate/mfa' }),
    ]);
    b.setApiKey(login2.data.token, 'zt-session', false);
    expect((await b.listServices({})).error.code).toBe('UNAUTHORIZED');
    // a wrong code is refused; verification spent the current time step's code, so the login answers with the
    // next step's (a TOTP completes one login only, RFC 6238 §5.2)
    const wrong = await b.authenticateMfa({ mfaAuth: { code: '000000' } });
    expect(wrong.error.code).toBe('MFA_INVALID_TOKEN');
    const done = await clock.during(30_000, async () => b.authenticateMfa({ mfaAuth: { code: await totp(30_000) } }));
    expect(lastStatus()).toBe(200);
    expect(done.error).toBeUndefined();
    expect((await b.getCurrentAPISession({})).data).toMatchObject({ isMfaRequired: true, isMfaComplete: true });
    expect((await b.listServices({})).data).toEqual([]);
    // new recovery codes (the code in the body: a browser may not send the mfa-validation-code header)
    const renewed = await clock.during(30_000, async () =>
      b.createMfaRecoveryCodes({ mfaValidation: { code: await totp(30_000) } }),
    );
    expect(renewed.error).toBeUndefined();
  });

  it('logout: DELETE /current-api-session, then every call gets the unauthorized envelope', async () => {
    const c = newClient(srv.client);
    const auth = await browzerLogin(c);
    const out = await c.deleteCurrentApiSession({});
    expect(lastStatus()).toBe(200);
    expect(out).toEqual({ data: {}, meta: {} });
    const after = await c.getCurrentAPISession({});
    expect(lastStatus()).toBe(401);
    expect(after.error).toMatchObject({ code: 'UNAUTHORIZED' });
    expect(typeof after.error.requestId).toBe('string');
    expect((await c.listServices({})).error.code).toBe('UNAUTHORIZED');
    expect((await c.createSession({ session: { serviceId } })).error.code).toBe('UNAUTHORIZED');
    // the token is gone on the management side too
    const sessions = await call(
      'GET',
      `${srv.mgmt}/api-sessions?filter=${encodeURIComponent(`id = "${auth.data.id}"`)}`,
      {
        token: admin,
      },
    );
    expect(sessions.body.data).toEqual([]);
  });

  it('errors: a wrong password and an invalid filter answer the envelope the client parses', async () => {
    const c = newClient(srv.client);
    const bad = await browzerLogin(c, 'not-the-password');
    expect(lastStatus()).toBe(401);
    expect(bad.data).toBeUndefined();
    expect(bad.error).toMatchObject({ code: 'INVALID_AUTH' });
    expect(typeof bad.error.message).toBe('string');
    expect(bad.meta).toBeDefined();
    const unknownMethod = await c.authenticate({ method: 'magic', auth: { username, password: PASSWORD } });
    expect(unknownMethod.error.code).toBe('INVALID_AUTH_METHOD');

    await browzerLogin(c);
    const badFilter = await c.listServices({ filter: 'name = ' });
    expect(lastStatus()).toBe(400);
    expect(badFilter.error).toMatchObject({ code: 'INVALID_FILTER', cause: { field: 'filter' } });
    const unknownField = await c.listServices({ filter: 'secret = "x"' });
    expect(unknownField.error.code).toBe('INVALID_FILTER');
    const missing = await c.detailService({ id: 'no-such-service' });
    expect(lastStatus()).toBe(404);
    expect(missing.error.code).toBe('NOT_FOUND');
  });
});
