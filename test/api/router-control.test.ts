/**
 * Router presence end to end: an enrolled edge router connects to the router control listener over mutual TLS with
 * its enrolled certificate, says hello over tRPC and is online (`isOnline`, `hostname`, `supportedProtocols`,
 * `syncStatus`, its version) on every view of it; sessions list it with its `urls` while it is online and the
 * policies allow it. Refusals (wrong certificate, disabled, second connection, other path, full listener, too many
 * unfinished handshakes from one address), the hello's limits (timeout, size, shape) and the disconnects that
 * disabling and re-enrolling cause.
 */

import type { Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFUSAL_LINGER_MS } from '../../raft/index.js';
import { createRootCa, issueLeaf } from '../../src/pki/ca.js';
import {
  CLOSE,
  MAX_HELLO_LISTENERS,
  ROUTER_CONTROL_DEFAULTS,
  ROUTER_CONTROL_PATH,
  ROUTER_HANDSHAKES_PER_ADDRESS,
} from '../../src/routers/control.js';
import { adminApi } from '../support/admin-api.js';
import { userWith } from '../support/api.js';
import { halfOpenClient } from '../support/half-open.js';
import {
  connectRouter,
  DEFAULT_HELLO,
  enrolledRouter,
  type Probe,
  probe,
  type RouterCreds,
  rawMutation,
} from '../support/router-client.js';
import { call, login, startServer, type TestServer } from '../support/server.js';
import { silentSocket } from '../support/silent-socket.js';
import { startTlsServer, trustCa } from '../support/tls-call.js';

const MAX_CONNECTIONS = 3;
const HELLO_TIMEOUT_MS = 1_500;

let srv: TestServer;
let admin: string;
let port: number;
let user: { id: string; token: string };
let serviceId: string;
let seq = 0;

const { mgmt, create } = adminApi(
  () => srv,
  () => admin,
);

beforeAll(async () => {
  srv = await startServer({
    routerControl: { host: '127.0.0.1', port: 0, maxConnections: MAX_CONNECTIONS, helloTimeout_ms: HELLO_TIMEOUT_MS },
  });
  admin = await login(srv.base);
  port = srv.ctl.routerControl!.port;
  user = await userWith(srv.base, admin, 'rc-user', { roleAttributes: ['rc'] });
  serviceId = await create('/services', { name: 'rc-svc', encryptionRequired: true, roleAttributes: ['rc-svc'] });
  await create('/service-policies', {
    name: 'rc-dial',
    type: 'Dial',
    semantic: 'AnyOf',
    identityRoles: ['#rc'],
    serviceRoles: ['#rc-svc'],
  });
  await create('/edge-router-policies', {
    name: 'rc-erp',
    semantic: 'AnyOf',
    identityRoles: ['#rc'],
    edgeRouterRoles: ['#rc-er'],
  });
  await create('/service-edge-router-policies', {
    name: 'rc-serp',
    semantic: 'AnyOf',
    serviceRoles: ['#rc-svc'],
    edgeRouterRoles: ['#rc-er'],
  });
});
afterAll(() => srv.stop());

/** A new enrolled edge router the test identity and service may use (or not: `roleAttributes: []`). */
const router = (roleAttributes = ['rc-er']) =>
  enrolledRouter(srv.mgmt, srv.client, admin, { name: `rc-r${++seq}`, roleAttributes });

const detail = async (id: string) => (await mgmt('GET', `/edge-routers/${id}`)).body.data;

async function session(): Promise<any> {
  const r = await call('POST', `${srv.client}/sessions`, { token: user.token, body: { serviceId } });
  expect(r.status, r.text).toBe(201);
  return r.body.data;
}

/** Polls until `check` holds (the control connection closes asynchronously), at most 5 s. */
async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('condition not met within 5 s');
}

const online = async (id: string) => (await detail(id)).isOnline === true;
const refused = (p: Probe) => ('refused' in p ? p.refused : 0);

const PROTOCOLS = { tls: 'tls:router1.example.test:3022', wss: 'wss:router1.example.test:3023' };

describe('router presence', () => {
  it('an enrolled router says hello and is online everywhere; sessions list it with its urls until it goes', async () => {
    const r1 = await router();
    const stranger = await router([]);
    expect(await detail(r1.id)).toMatchObject({ isOnline: false, syncStatus: 'SYNC_NEW', hostname: '' });
    expect((await session()).edgeRouters).toEqual([]);

    const conn = await connectRouter(port, r1);
    const other = await connectRouter(port, stranger);
    expect(conn.answer).toEqual({ routerId: r1.id, name: (await detail(r1.id)).name });
    expect(await detail(r1.id)).toMatchObject({
      isOnline: true,
      hostname: 'router1.example.test',
      supportedProtocols: PROTOCOLS,
      syncStatus: 'SYNC_DONE',
      version: 'v1.1.0',
      revision: 'abc123',
      buildDate: '2026-11-26',
      os: 'linux',
      arch: 'amd64',
    });
    expect((await mgmt('GET', `/routers/${r1.id}`)).body.data.isOnline).toBe(true);
    // the fabric API's view (ZAC's network map, `ziti fabric list routers`)
    const fabric = await call('GET', `${srv.base}/fabric/v1/routers/${r1.id}`, { token: admin });
    expect(fabric.body.data).toMatchObject({
      id: r1.id,
      connected: true,
      listenerAddresses: [
        { protocol: 'tls', address: PROTOCOLS.tls },
        { protocol: 'wss', address: PROTOCOLS.wss },
      ],
      versionInfo: { version: 'v1.1.0', revision: 'abc123', buildDate: '2026-11-26', os: 'linux', arch: 'amd64' },
    });
    // the client's listings
    const mine = await call('GET', `${srv.client}/current-identity/edge-routers`, { token: user.token });
    expect(mine.body.data.map((r: any) => [r.id, r.isOnline, r.supportedProtocols])).toEqual([
      [r1.id, true, PROTOCOLS],
    ]);
    const viaService = await call('GET', `${srv.client}/services/${serviceId}/edge-routers`, { token: user.token });
    expect(viaService.body.data.edgeRouters.map((r: any) => [r.name, r.isOnline])).toEqual([[`rc-r${seq - 1}`, true]]);
    const advice = await mgmt('GET', `/identities/${user.id}/policy-advice/${serviceId}`);
    expect(advice.body.data.commonRouters.map((r: any) => [r.id, r.isOnline])).toEqual([[r1.id, true]]);

    // a session lists the online router its policies allow (not the one they do not), with its urls
    const s = await session();
    expect(s.edgeRouters).toEqual([
      {
        name: `rc-r${seq - 1}`,
        hostname: 'router1.example.test',
        isOnline: true,
        supportedProtocols: PROTOCOLS,
        urls: PROTOCOLS,
        syncStatus: 'SYNC_DONE',
        cost: 0,
        noTraversal: false,
        disabled: false,
        appData: {},
      },
    ]);
    const read = await call('GET', `${srv.client}/sessions/${s.id}`, { token: user.token });
    expect(read.body.data.edgeRouters.map((r: any) => r.urls)).toEqual([PROTOCOLS]);

    conn.close();
    other.close();
    await until(async () => !(await online(r1.id)) && !(await online(stranger.id)));
    expect(await detail(r1.id)).toMatchObject({ syncStatus: 'SYNC_DISCONNECTED', supportedProtocols: {}, version: '' });
    expect((await mgmt('GET', `/routers/${r1.id}`)).body.data.isOnline).toBe(false);
    const gone = (await call('GET', `${srv.base}/fabric/v1/routers/${r1.id}`, { token: admin })).body.data;
    expect([gone.connected, gone.listenerAddresses, 'versionInfo' in gone]).toEqual([false, [], false]);
    expect((await session()).edgeRouters).toEqual([]);
    // and it may come back
    const again = await connectRouter(port, r1);
    expect(await online(r1.id)).toBe(true);
    again.close();
    await until(async () => !(await online(r1.id)));
  });

  it('refused: a certificate not the enrolled one (closed after its handshake), another CA, another path, a second connection', async () => {
    const r = await router();
    // a certificate of the same signing CA naming the router, but not the one it enrolled
    const forged = await issueLeaf(srv.ctl.svc.pki!.signing!, { commonName: r.id, usage: 'client' });
    const forgedCreds = { key: forged.keyPem, cert: forged.certPem, ca: r.ca };
    // like an identity's client certificate of the same CA: closed once its handshake is done, no request read, so
    // such certificates cannot hold the listener's connections (not after the 10 s upgrade deadline)
    await expect(probe(port, forgedCreds)).rejects.toThrow();
    const sockets: Socket[] = [];
    try {
      const upgrade =
        `GET ${ROUTER_CONTROL_PATH} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n';
      const held = await halfOpenClient(port, upgrade, 5_000, sockets, forgedCreds);
      expect(held.answer).toBe('');
      expect(held.closedAfter_ms).toBeLessThan(2_000);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
    // a certificate of another CA fails the TLS handshake
    const foreignCa = await createRootCa({ commonName: 'foreign' });
    const foreign = await issueLeaf(foreignCa, { commonName: r.id, usage: 'client' });
    await expect(probe(port, { key: foreign.keyPem, cert: foreign.certPem, ca: r.ca })).rejects.toThrow();
    expect(refused(await probe(port, r, '/other'))).toBe(404);
    const conn = await connectRouter(port, r);
    expect(refused(await probe(port, r))).toBe(409);
    await expect(connectRouter(port, forgedCreds as RouterCreds)).rejects.toThrow();
    expect(await online(r.id)).toBe(true);
    conn.close();
    await until(async () => !(await online(r.id)));
  });

  it('a refused upgrade is closed within REFUSAL_LINGER_MS even when the client never closes its side', async () => {
    const r = await router();
    const sockets: Socket[] = [];
    const bound_ms = REFUSAL_LINGER_MS + 2_000;
    const request =
      'GET /other HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n';
    try {
      const { answer, closedAfter_ms } = await halfOpenClient(port, request, bound_ms, sockets, r);
      expect(answer).toMatch(/^HTTP\/1\.1 404 Not Found\r\n/);
      expect(closedAfter_ms).toBeLessThan(bound_ms);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  });

  it('a disabled router is refused, and disconnected when disabled; a re-enrolled one is disconnected', async () => {
    const r = await router();
    const conn = await connectRouter(port, r);
    expect((await mgmt('PATCH', `/edge-routers/${r.id}`, { disabled: true })).status).toBe(200);
    // offline as soon as the change is applied
    expect(await detail(r.id)).toMatchObject({ isOnline: false, disabled: true });
    expect((await session()).edgeRouters).toEqual([]);
    await until(async () => srv.ctl.routerControl!.connectionCount === 0);
    expect(refused(await probe(port, r))).toBe(403);
    // disabled through /routers too
    expect((await mgmt('PATCH', `/edge-routers/${r.id}`, { disabled: false })).status).toBe(200);
    const back = await connectRouter(port, r);
    expect((await mgmt('PATCH', `/routers/${r.id}`, { disabled: true })).status).toBe(200);
    expect(await online(r.id)).toBe(false);
    expect(refused(await probe(port, r))).toBe(403);
    expect((await mgmt('PATCH', `/routers/${r.id}`, { disabled: false })).status).toBe(200);

    // re-enrolled: the old certificate is no longer the router's
    const third = await connectRouter(port, r);
    expect((await mgmt('POST', `/edge-routers/${r.id}/re-enroll`)).status).toBe(200);
    expect(await online(r.id)).toBe(false);
    await expect(probe(port, r)).rejects.toThrow();
    for (const c of [conn, back, third]) c.close();
    await until(async () => srv.ctl.routerControl!.connectionCount === 0);
  });

  it(`limits: a hello within ${HELLO_TIMEOUT_MS} ms, at most ${ROUTER_CONTROL_DEFAULTS.maxHello_bytes} bytes, well-formed; ${MAX_CONNECTIONS} connections`, async () => {
    const r = await router();
    const opened = async (): Promise<Extract<Probe, { ws: unknown }>> => {
      const p = await probe(port, r);
      if ('refused' in p) throw new Error(`refused ${p.refused}`);
      return p;
    };
    // no hello: closed after the timeout, never online (waiting for its hello meanwhile)
    const silent = await opened();
    expect((await detail(r.id)).syncStatus).toBe('SYNC_HELLO_WAIT');
    expect(await silent.closed).toBe(CLOSE.helloTimeout);
    expect(await online(r.id)).toBe(false);
    // a message beyond the hello size: closed (1009, message too big)
    const big = await opened();
    big.ws.send('x'.repeat(ROUTER_CONTROL_DEFAULTS.maxHello_bytes + 1));
    expect(await big.closed).toBe(1009);
    // malformed hellos: BAD_REQUEST; a bad listener address also closes the connection
    const shapes = await opened();
    const tooMany = Array.from({ length: MAX_HELLO_LISTENERS + 1 }, (_, i) => `tls:h${i}:3022`);
    for (const input of [{ ...DEFAULT_HELLO, version: '' }, { ...DEFAULT_HELLO, listeners: tooMany }, 'hello']) {
      const answer = await rawMutation(shapes.ws, 'hello', input);
      expect(answer.error?.data?.code).toBe('BAD_REQUEST');
      // no stack trace on the wire (it names the server's files), whatever NODE_ENV is
      expect(answer.error?.data?.stack).toBeUndefined();
      expect(JSON.stringify(answer)).not.toMatch(/\.js:\d+|node_modules/);
    }
    const dup = await rawMutation(shapes.ws, 'hello', { ...DEFAULT_HELLO, listeners: ['tls:a:1', 'tls:b:2'] });
    expect(dup.error?.data?.code).toBe('BAD_REQUEST');
    expect(await shapes.closed).toBe(CLOSE.badHello);
    const badAddress = await opened();
    const res = await rawMutation(badAddress.ws, 'hello', { ...DEFAULT_HELLO, listeners: ['tls:host:99999'] });
    expect(res.error?.data?.code).toBe('BAD_REQUEST');
    expect(await badAddress.closed).toBe(CLOSE.badHello);
    expect(await online(r.id)).toBe(false);
    // a good hello over the raw socket; a second one is refused
    const good = await opened();
    expect((await rawMutation(good.ws, 'hello', DEFAULT_HELLO)).result?.data).toEqual({
      routerId: r.id,
      name: (await detail(r.id)).name,
    });
    expect((await rawMutation(good.ws, 'hello', DEFAULT_HELLO)).error?.data?.code).toBe('BAD_REQUEST');
    expect(await online(r.id)).toBe(true);
    // the listener is full at MAX_CONNECTIONS (waiting ones count): the next router is refused with 503
    const more = await Promise.all([router(), router(), router()]);
    const held = [good.ws];
    for (const m of more.slice(0, MAX_CONNECTIONS - 1)) {
      const p = await probe(port, m);
      if ('ws' in p) held.push(p.ws);
    }
    expect(held.length).toBe(MAX_CONNECTIONS);
    expect(refused(await probe(port, more[MAX_CONNECTIONS - 1]!))).toBe(503);
    for (const ws of held) ws.close();
    await until(async () => srv.ctl.routerControl!.connectionCount === 0);
    expect(await online(r.id)).toBe(false);
  });
});

describe('the controllers list names where routers connect', () => {
  it('ctrlAddress: the router control listener (tls:host:port) on the management API; the client API hides it', async () => {
    const listed = async (api: string) => (await call('GET', `${api}/controllers`, { token: admin })).body.data;
    expect((await listed(srv.mgmt)).map((c: any) => c.ctrlAddress)).toEqual([`tls:127.0.0.1:${port}`]);
    expect((await listed(srv.client)).map((c: any) => c.ctrlAddress)).toEqual([null]);
  });

  it('an advertised address is listed, and the certificate the listener serves names its host', async () => {
    const other = await startServer({
      routerControl: { host: '127.0.0.1', port: 0, advertise: 'routers.example.com:3022' },
    });
    try {
      const token = await login(other.base);
      const rows = (await call('GET', `${other.mgmt}/controllers`, { token })).body.data;
      expect(rows.map((c: any) => c.ctrlAddress)).toEqual(['tls:routers.example.com:3022']);
      const names = await new Promise<string>((resolve, reject) => {
        const s = tlsConnect(
          { host: '127.0.0.1', port: other.ctl.routerControl!.port, rejectUnauthorized: false },
          () => {
            resolve(s.getPeerCertificate().subjectaltname ?? '');
            s.destroy();
          },
        );
        s.on('error', reject);
      });
      expect(names.split(', ')).toEqual(expect.arrayContaining(['DNS:routers.example.com', 'IP Address:127.0.0.1']));
    } finally {
      await other.stop();
    }
  });
});

describe('router presence with API TLS', () => {
  it("the listener serves the API's certificate; a router answering pings stays online, a mute one is dropped", async () => {
    const tls = await startTlsServer({
      routerControl: { host: '127.0.0.1', port: 0, ping_ms: 200, pongWait_ms: 1_000 },
    });
    try {
      trustCa(tls.ca);
      const port = tls.srv.ctl.routerControl!.port;
      const enroll = (name: string) => enrolledRouter(tls.srv.mgmt, tls.srv.client, tls.admin, { name });
      const view = async (id: string) =>
        (await call('GET', `${tls.srv.mgmt}/edge-routers/${id}`, { token: tls.admin })).body.data;
      const creds = await enroll('tls-router');
      const conn = await connectRouter(port, creds);
      expect(await view(creds.id)).toMatchObject({ isOnline: true, supportedProtocols: PROTOCOLS });
      // a router that stops answering the keep-alive pings is dropped; the tRPC client answers them
      const mute = await enroll('tls-mute');
      const p = await probe(port, mute);
      if (!('ws' in p)) throw new Error(`refused ${p.refused}`);
      expect((await rawMutation(p.ws, 'hello', DEFAULT_HELLO)).result?.data?.routerId).toBe(mute.id);
      expect(await p.closed).toBe(1006);
      await until(async () => (await view(mute.id)).isOnline === false);
      expect((await view(creds.id)).isOnline).toBe(true);
      conn.close();
    } finally {
      await tls.srv.stop();
    }
  });
});

describe('router control listener: handshakes per address', () => {
  it(`one address holds at most ${ROUTER_HANDSHAKES_PER_ADDRESS} unfinished handshakes; routers still connect`, async () => {
    // room for more connections than the per-address bound, so only that bound can close one
    const own = await startServer({
      routerControl: { host: '127.0.0.1', port: 0, maxConnections: ROUTER_HANDSHAKES_PER_ADDRESS },
    });
    const sockets: Socket[] = [];
    try {
      const ownAdmin = await login(own.base);
      const ownPort = own.ctl.routerControl!.port;
      const held = [];
      for (let i = 0; i < ROUTER_HANDSHAKES_PER_ADDRESS; i++)
        held.push(await silentSocket(ownPort, '127.0.0.3', sockets));
      const over = await silentSocket(ownPort, '127.0.0.3', sockets);
      const never = new Promise<number>((r) => setTimeout(() => r(Number.POSITIVE_INFINITY), 3_000).unref());
      expect(await Promise.race([over.closedAfter, never])).toBeLessThan(3_000);
      expect(held.filter((c) => c.closed())).toEqual([]);
      // a router from another address still connects and says hello
      const creds = await enrolledRouter(own.mgmt, own.client, ownAdmin, { name: 'nat-router' });
      const conn = await connectRouter(ownPort, creds);
      expect(conn.answer.routerId).toBe(creds.id);
      conn.close();
    } finally {
      for (const socket of sockets) socket.destroy();
      await own.stop();
    }
  });
});

describe('router control listener: stopping', () => {
  it("a router that never answers the close frame does not hold the controller's stop up", async () => {
    const own = await startServer({ routerControl: { host: '127.0.0.1', port: 0 } });
    const ownAdmin = await login(own.base);
    const r = await enrolledRouter(own.mgmt, own.client, ownAdmin, { name: 'mute-on-close', roleAttributes: [] });
    const sockets: Socket[] = [];
    try {
      // a WebSocket client by hand: upgrade, one masked text frame (the hello), then silence (no close answered)
      const c = tlsConnect({
        host: '127.0.0.1',
        port: own.ctl.routerControl!.port,
        key: r.key,
        cert: r.cert,
        ca: r.ca,
        rejectUnauthorized: false,
      });
      sockets.push(c);
      c.on('error', () => {});
      await new Promise<void>((resolve) => c.once('secureConnect', () => resolve()));
      const upgraded = new Promise<void>((resolve) => c.once('data', () => resolve()));
      c.write(
        `GET ${ROUTER_CONTROL_PATH} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
      );
      await upgraded;
      c.write(
        maskedText(JSON.stringify({ id: 1, method: 'mutation', params: { path: 'hello', input: DEFAULT_HELLO } })),
      );
      await until(
        async () =>
          (await call('GET', `${own.mgmt}/edge-routers/${r.id}`, { token: ownAdmin })).body.data.isOnline === true,
      );
      const other = await enrolledRouter(own.mgmt, own.client, ownAdmin, { name: 'comes-back', roleAttributes: [] });
      const started = performance.now();
      const stopping = own.stop();
      // a router connecting while the stop waits for the close answers is refused: it would hold the close up
      await new Promise((r) => setTimeout(r, 200));
      expect(refused(await probe(own.ctl.routerControl!.port, other))).toBe(503);
      await stopping;
      // about the close grace (2 s), not ws's 30 s close timeout
      expect(performance.now() - started).toBeLessThan(6_000);
    } finally {
      for (const s of sockets) s.destroy();
    }
  }, 20_000);
});

/** A client's masked WebSocket text frame (RFC 6455 5.2; a payload under 64 KiB). */
function maskedText(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = Buffer.from([1, 2, 3, 4]);
  const head =
    payload.length < 126
      ? Buffer.from([0x81, 0x80 | payload.length])
      : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 255]);
  const body = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!));
  return Buffer.concat([head, mask, body]);
}
