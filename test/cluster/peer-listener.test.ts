/**
 * The peer listener against clients that are not members (in process): a certificate of the cluster's own signing
 * CA that names no member (what every enrolled identity and router holds) gets an answer and a closed connection on
 * every path, never a socket left open; and the mutual-TLS listeners bound what a client without a certificate can
 * hold (handshake timeout, connections per address and in all).
 */
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:https';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initClusterPki, loadPeerTlsOptions } from '../../src/pki/cluster.js';
import { issueServerCert } from '../../src/pki/index.js';
import { loadSigningCa } from '../../src/pki/pki-dir.js';
import {
  createMutualTlsServer,
  destroyConnections,
  listenOn,
  type MutualTlsLimits,
  PEER_LISTENER_LIMITS,
} from '../../src/util/mtls-server.js';
import { startServer, type TestServer } from '../support/server.js';
import { silentSocket } from '../support/silent-socket.js';

type ClientTls = { key: string; cert: string; ca: string };

/** What the server answered and whether it closed the connection, at the latest `wait_ms` after sending. */
function exchange(port: number, tls: ClientTls, payload: string, wait_ms: number) {
  return new Promise<{ answer: string; closed: boolean }>((resolve) => {
    let answer = '';
    const s = tlsConnect({ host: '127.0.0.1', port, ...tls, rejectUnauthorized: false }, () => s.write(payload));
    const timer = setTimeout(() => {
      resolve({ answer, closed: false });
      s.destroy();
    }, wait_ms);
    s.on('data', (d) => (answer += d));
    s.on('close', () => {
      clearTimeout(timer);
      resolve({ answer, closed: true });
    });
    s.on('error', () => {});
  });
}

const upgrade = (path: string, headers = '') =>
  `GET ${path} HTTP/1.1\r\nHost: peer\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
  `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${headers}\r\n`;

describe('a member refuses certificates that name no member, on every path', () => {
  let srv: TestServer;
  let port: number;
  let identity: ClientTls;
  let memberTls: ClientTls;
  let peerCert: string;
  let dataDir = '';
  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'keel-peer-listener-'));
    const pkiDir = join(dataDir, 'pki');
    await initClusterPki(pkiDir, { nodeId: 'n1', hosts: ['127.0.0.1'] });
    const tls = await loadPeerTlsOptions(pkiDir);
    peerCert = tls.cert;
    memberTls = { key: tls.key, cert: tls.cert, ca: tls.ca };
    srv = await startServer({
      dataDir,
      cluster: { nodeId: 'n1', peerListen: { host: '127.0.0.1', port: 0 }, init: true, tls },
    });
    port = Number(srv.ctl.cluster!.peerAddress.split(':').at(-1));
    // an identity's certificate: the cluster's signing CA, client usage, no node URI
    const signing = await loadSigningCa(pkiDir);
    const leaf = await issueServerCert(signing, { commonName: 'an-identity', usage: 'client' });
    identity = { key: leaf.keyPem, cert: `${leaf.certPem.trim()}\n${signing.certPem}`, ca: tls.ca };
  }, 60_000);
  afterAll(async () => {
    await srv?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("peerCertPem: the node's own certificate alone, without its chain", () => {
    const pem = srv.ctl.cluster!.peerCertPem!;
    expect(pem.match(/-----BEGIN CERTIFICATE-----/g)).toHaveLength(1);
    expect(pem.endsWith('-----END CERTIFICATE-----')).toBe(true);
    expect(new X509Certificate(pem).fingerprint256).toBe(new X509Certificate(peerCert).fingerprint256);
  });

  it('closes a connection whose certificate names no node right after its handshake, on every path: no answer', async () => {
    const claimed = 'x-keel-raft-cluster: keel\r\nx-keel-raft-from: n0\r\nx-keel-raft-to: n1\r\n';
    for (const [path, headers] of [
      ['/', ''],
      ['/nope', ''],
      ['/peer-api', ''],
      ['/peer-forward', ''],
      ['/raft', claimed],
    ]) {
      const r = await exchange(port, identity, upgrade(path!, headers), 2_000);
      expect(r, path).toEqual({ answer: '', closed: true });
    }
    // and an idle one too: it cannot hold one of the listener's connections
    const idle = await exchange(port, identity, '', 2_000);
    expect(idle).toEqual({ answer: '', closed: true });
  });

  it("a member's certificate: other paths answer 404 and close (an upgrade nobody answers would hold its socket)", async () => {
    const member = { key: memberTls.key, cert: memberTls.cert, ca: memberTls.ca };
    for (const path of ['/', '/nope', '/raft/x', '/peer-api/']) {
      const r = await exchange(port, member, upgrade(path), 2_000);
      expect(r.answer, path).toMatch(/^HTTP\/1\.1 404 /);
      expect(r.closed, path).toBe(true);
    }
  });

  it('the peer listener has finite bounds', () => {
    const { handshakeTimeout_ms, maxConnections, maxHandshakesPerAddress, upgradeTimeout_ms } = PEER_LISTENER_LIMITS;
    expect(handshakeTimeout_ms).toBeLessThanOrEqual(10_000);
    expect(upgradeTimeout_ms).toBeLessThanOrEqual(10_000);
    // clients that never finish a handshake need many addresses to fill the listener
    expect(maxConnections / maxHandshakesPerAddress).toBeGreaterThanOrEqual(32);
    expect(maxConnections).toBeLessThanOrEqual(1_024);
  });
});

describe('mutual-TLS listener bounds before any certificate is shown', () => {
  const LIMITS = {
    handshakeTimeout_ms: 1_000,
    maxConnections: 5,
    maxHandshakesPerAddress: 3,
    upgradeTimeout_ms: 10_000,
  };
  let tls: ClientTls;
  let dir = '';
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'keel-mtls-bounds-'));
    await initClusterPki(dir, { nodeId: 'b1', hosts: ['127.0.0.1'] });
    const peer = await loadPeerTlsOptions(dir);
    tls = { key: peer.key, cert: peer.cert, ca: peer.ca };
  });
  const servers: Server[] = [];
  const sockets: Socket[] = [];
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
    rmSync(dir, { recursive: true, force: true });
  });
  /** A listener within `limits`; resolves with its port. */
  const bounded = async (limits: MutualTlsLimits) => {
    const server = createMutualTlsServer(tls, limits);
    servers.push(server);
    await listenOn(server, 0, '127.0.0.1');
    return (server.address() as { port: number }).port;
  };

  /** A TCP connection from `localAddress` that never starts TLS; resolves once connected. */
  const silent = (port: number, localAddress: string) => silentSocket(port, localAddress, sockets);

  /**
   * A member from `localAddress`: its handshake done and a request answered (so the server has seen the handshake
   * succeed), the connection kept open; resolves with the status line, or '' when the connection was closed.
   */
  const member = (port: number, localAddress: string) =>
    new Promise<string>((resolve) => {
      let answer = '';
      const tcp = netConnect({ host: '127.0.0.1', port, localAddress });
      sockets.push(tcp);
      tcp.on('error', () => {});
      const socket = tlsConnect({ socket: tcp, ...tls, rejectUnauthorized: false }, () =>
        socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'),
      );
      sockets.push(socket);
      socket.on('error', () => {});
      socket.on('data', (d) => {
        answer += d;
        if (answer.includes('\r\n')) resolve(answer.split('\r\n')[0]!);
      });
      socket.once('close', () => resolve(''));
    });

  it('an unfinished handshake is dropped after the timeout; one address holds at most maxHandshakesPerAddress, all at most maxConnections', async () => {
    const port = await bounded(LIMITS);
    const a = [await silent(port, '127.0.0.1'), await silent(port, '127.0.0.1'), await silent(port, '127.0.0.1')];
    const overAddress = await silent(port, '127.0.0.1');
    const b = [await silent(port, '127.0.0.2'), await silent(port, '127.0.0.2')];
    const overAll = await silent(port, '127.0.0.2');
    // the ones beyond a bound are closed at once, while the others still wait for their handshake
    await overAddress.closedAfter;
    await overAll.closedAfter;
    expect([...a, ...b].map((c) => c.closed())).toEqual([false, false, false, false, false]);
    // which are dropped by the handshake timeout, not sooner
    const never = new Promise<number>((r) => setTimeout(() => r(Number.POSITIVE_INFINITY), 5_000).unref());
    const held = await Promise.all([...a, ...b].map((c) => Promise.race([c.closedAfter, never])));
    for (const ms of held) expect(ms).toBeGreaterThanOrEqual(LIMITS.handshakeTimeout_ms - 50);
    for (const ms of held) expect(ms).toBeLessThan(5_000);
    // and the slots are free again: a client with a certificate gets its answer
    const r = await exchange(port, tls, 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 2_000);
    expect(r.answer).toMatch(/^HTTP\/1\.1 426 /);
  });

  it('only unfinished handshakes count per address: clients that never start TLS do not keep members out', async () => {
    const port = await bounded({
      handshakeTimeout_ms: 10_000,
      maxConnections: 32,
      maxHandshakesPerAddress: 3,
      upgradeTimeout_ms: 10_000,
    });
    // an address that never starts TLS: three held, the rest closed at once
    const held = [];
    for (let i = 0; i < 3; i++) held.push(await silent(port, '127.0.0.2'));
    for (let i = 0; i < 3; i++) await (await silent(port, '127.0.0.2')).closedAfter;
    // members sharing one address hold more established connections than the per-address bound
    const answers: string[] = [];
    for (let i = 0; i < 6; i++) answers.push(await member(port, '127.0.0.1'));
    expect(answers).toEqual(Array(6).fill('HTTP/1.1 426 Upgrade Required'));
    // and a finished handshake frees its slot: the silent address's slots stay its own, still held
    expect(held.map((c) => c.closed())).toEqual([false, false, false]);
  });

  it('a connection with a good certificate that does not ask for its upgrade in time is closed; one that asked is not', async () => {
    const port = await bounded({ ...LIMITS, upgradeTimeout_ms: 500 });
    const started = Date.now();
    const idle = await exchange(port, tls, '', 3_000);
    expect(idle).toEqual({ answer: '', closed: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
    // an upgrade request (nobody answers it on this bare listener): past the deadline, still open
    const asked = await exchange(port, tls, upgrade('/raft'), 1_500);
    expect(asked.closed).toBe(false);
  });

  it('destroyConnections ends what close() waits for: an upgrade nobody answered', async () => {
    const server = createMutualTlsServer(tls, LIMITS);
    await listenOn(server, 0, '127.0.0.1');
    const port = (server.address() as { port: number }).port;
    const held = exchange(port, tls, upgrade('/raft'), 3_000);
    await new Promise((r) => setTimeout(r, 300)); // its upgrade request arrived
    let closed = false;
    server.close(() => {
      closed = true;
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(closed).toBe(false); // the held connection keeps the server open
    destroyConnections(server);
    expect((await held).closed).toBe(true);
    await new Promise((r) => setTimeout(r, 50));
    expect(closed).toBe(true);
  });

  it('admits: a certificate it refuses is closed after its handshake, before any answer', async () => {
    const server = createMutualTlsServer(tls, LIMITS, () => false);
    servers.push(server);
    await listenOn(server, 0, '127.0.0.1');
    const port = (server.address() as { port: number }).port;
    const r = await exchange(port, tls, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n', 2_000);
    expect(r).toEqual({ answer: '', closed: true });
  });

  it('admits later: a late refusal closes the connection, a late admission keeps it, no answer by the upgrade deadline refuses', async () => {
    const answerIn = (ms: number, ok: boolean) => () => new Promise<boolean>((r) => setTimeout(() => r(ok), ms));
    const refusing = createMutualTlsServer(tls, LIMITS, answerIn(300, false));
    const admitting = createMutualTlsServer(tls, LIMITS, answerIn(300, true));
    // never answers: its upgrade request, read meanwhile, would end the upgrade deadline of an admitted connection
    const silent = createMutualTlsServer(tls, { ...LIMITS, upgradeTimeout_ms: 500 }, () => new Promise(() => {}));
    const ports: number[] = [];
    for (const server of [refusing, admitting, silent]) {
      servers.push(server);
      await listenOn(server, 0, '127.0.0.1');
      ports.push((server.address() as { port: number }).port);
    }
    const [refused, admitted, unanswered] = await Promise.all(
      ports.map((port) => exchange(port, tls, upgrade('/raft'), 2_000)),
    );
    expect(refused).toEqual({ answer: '', closed: true });
    expect(admitted).toEqual({ answer: '', closed: false }); // its upgrade request waits for an owner (none here)
    expect(unanswered).toEqual({ answer: '', closed: true });
    destroyConnections(admitting);
  });
});
