/**
 * A Keel cluster as operators run it: three `keel run` OS processes. Writes through any node, sessions across
 * nodes, a minority without a leader, kill -9 of the leader under load, catch-up by snapshot, rolling restart.
 */
import { X509Certificate } from 'node:crypto';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { createLocalJWKSet, decodeJwt, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { WebSocketTransport } from '../../raft/index.js';
import { LOCAL_HOSTS, preparePeerPki } from '../../src/cluster/local.js';
import { PEER_LINK, PEER_PROTOCOL_HEADER, PEER_REFUSAL_HEADER } from '../../src/cluster/peer-protocol.js';
import { type NodeProcess, startNode, stopNode } from '../../src/cluster/processes.js';
import { issueNodeBundle, loadPeerTlsOptions } from '../../src/pki/index.js';
import { withTimeout } from '../../src/util/timeout.js';
import { openssl, opensslCsr, Scratch } from '../pki/helpers.js';
import { tlsCall } from '../support/tls-call.js';
import {
  alive,
  buildOnce,
  call,
  leaderIndex,
  login,
  memberStatus,
  mgmt,
  namesOn,
  postUntilNot503,
  startCluster,
  type TestCluster,
  until,
  writeLoad,
} from './support.js';

const create = (n: NodeProcess, token: string, name: string) =>
  call('POST', `${mgmt(n)}/identities`, { token, body: { name, type: 'User', isAdmin: false } });

/** The API certificate a node presents (PEM), read from its TLS handshake. */
function apiCertOf(n: NodeProcess): Promise<string> {
  const { hostname, port } = new URL(n.base);
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: hostname, port: Number(port), ca: n.ca! }, () => {
      const der = socket.getPeerCertificate().raw;
      socket.end();
      resolve(new X509Certificate(der).toString());
    });
    socket.on('error', reject);
  });
}

/** Whether a WebSocket to `url` opens (within 5 s) with these TLS options. */
function wsOpens(url: string, tls: { key?: string | Buffer; cert?: string | Buffer; ca?: unknown }): Promise<boolean> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { ...(tls as object), handshakeTimeout: 5_000 });
    ws.on('open', () => {
      ws.close();
      resolve(true);
    });
    ws.on('error', () => resolve(false));
    ws.on('unexpected-response', (req) => {
      req.destroy();
      resolve(false);
    });
  });
}

/** The answer to a WebSocket upgrade to `url`: 101 when it opens, else the status and the peer refusal header. */
function upgradeAnswer(
  url: string,
  opts: { key?: string | Buffer; cert?: string | Buffer; ca?: unknown; headers?: Record<string, string> },
): Promise<{ status: number; refusal: string | null }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { ...(opts as object), handshakeTimeout: 5_000 });
    ws.on('open', () => {
      resolve({ status: 101, refusal: null });
      ws.close();
    });
    ws.on('unexpected-response', (_req, res) => {
      res.resume();
      const refusal = res.headers[PEER_REFUSAL_HEADER];
      resolve({ status: res.statusCode ?? 0, refusal: typeof refusal === 'string' ? refusal : null });
      ws.terminate();
    });
    ws.on('error', () => resolve({ status: 0, refusal: null }));
  });
}

/** Each name in `expected` exactly once among `names`. */
function exactlyOnce(names: string[], expected: string[]): string[] {
  const count = new Map<string, number>();
  for (const n of names) count.set(n, (count.get(n) ?? 0) + 1);
  return expected.filter((n) => count.get(n) !== 1);
}

describe('a 3-node cluster of keel processes', () => {
  let c: TestCluster;
  let token: string;

  beforeAll(async () => {
    buildOnce();
    // small snapshot interval: a node that misses a few hundred writes must catch up by snapshot
    c = await startCluster(3, ['--snapshot-every', '200']);
    token = await login(c.nodes[1]!.base);
  }, 120_000);

  afterAll(() => {
    for (const n of c?.nodes ?? []) if (alive(n)) n.child.kill('SIGKILL');
    if (c) rmSync(c.dir, { recursive: true, force: true });
  });

  it('a write through any node is read back at once on that node and shows up on every node', async () => {
    for (const [i, n] of c.nodes.entries()) {
      const r = await create(n, token, `any-node-${i}`);
      expect(r.status).toBe(201);
      const here = await call('GET', `${mgmt(n)}/identities/${r.body.data.id}`, { token });
      expect(here.status).toBe(200);
    }
    for (const n of c.nodes) {
      await until(async () => (await namesOn(n, token, 'any-node-')).length === 3, 5_000, `writes on ${n.spec.id}`);
    }
  }, 30_000);

  it('a session created on one node is accepted by every other node immediately', async () => {
    for (const from of c.nodes) {
      const t = await login(from.base);
      const others = c.nodes.filter((n) => n !== from);
      const rs = await Promise.all(others.map((n) => call('GET', `${mgmt(n)}/current-identity`, { token: t })));
      expect(rs.map((r) => r.status)).toEqual([200, 200]);
      // an unknown token is still refused (after the read barrier)
      const bad = await call('GET', `${mgmt(others[0]!)}/current-identity`, { token: `${t.slice(0, -4)}0000` });
      expect(bad.status).toBe(401);
      // logout on one node revokes it everywhere
      expect((await call('DELETE', `${mgmt(from)}/current-api-session`, { token: t })).status).toBe(200);
      for (const n of others) {
        await until(
          async () => (await call('GET', `${mgmt(n)}/current-identity`, { token: t })).status === 401,
          5_000,
          'revocation',
        );
      }
    }
  }, 30_000);

  it('the controllers list and the fabric cluster API report live members; leadership moves on request', async () => {
    const fabric = (n: NodeProcess) => `${n.base}/fabric/v1/cluster`;
    const listed = () => call('GET', `${fabric(c.nodes[0]!)}/list-members`, { token });
    // members are polled once a second: right after a start the first poll may not have answered yet
    await until(async () => (await listed()).body.data.every((x: any) => x.connected), 5_000, 'all connected');
    const m = await listed();
    expect(m.status).toBe(200);
    expect(m.body.data.map((x: any) => [x.id, x.voter, x.connected])).toEqual([
      ['n1', true, true],
      ['n2', true, true],
      ['n3', true, true],
    ]);
    expect(m.body.data.filter((x: any) => x.leader)).toHaveLength(1);
    const onlineOn = async (n: NodeProcess) => {
      const r = await call('GET', `${n.base}/edge/client/v1/controllers`, { token });
      return Object.fromEntries(r.body.data.map((x: any) => [x.name, x.isOnline]));
    };
    await until(async () => Object.values(await onlineOn(c.nodes[2]!)).every(Boolean), 5_000, 'all online');
    const ctls = (await call('GET', `${c.nodes[2]!.base}/edge/management/v1/controllers`, { token })).body.data;
    expect(ctls[0].apiAddresses['edge-client'][0].url).toBe(`${c.nodes[0]!.base}/edge/client/v1`);
    expect(ctls[0].ctrlAddress).toBe(`tls:${c.nodes[0]!.peerAddress}`);
    // every member's peer certificate (mutual TLS is on): the answering member's own, the others' as they showed it
    // on its peer links, each the certificate that member reports for itself
    for (const [i, n] of c.nodes.entries()) {
      const own = (await call('GET', `${n.base}/edge/management/v1/controllers`, { token })).body.data;
      const self = own.find((x: any) => x.name === n.spec.id);
      expect(self.certPem).toContain('BEGIN CERTIFICATE');
      expect(self.fingerprint).toMatch(/^[0-9a-f]{40}$/);
      expect(ctls[i].name).toBe(n.spec.id);
      expect([ctls[i].certPem, ctls[i].fingerprint]).toEqual([self.certPem, self.fingerprint]);
    }
    expect(new Set(ctls.map((x: any) => x.fingerprint)).size).toBe(3);
    // a member going down is reported within seconds, and so is its return
    const L = await leaderIndex(c.nodes);
    const down = c.nodes[(L + 1) % 3]!;
    const observer = c.nodes[(L + 2) % 3]!;
    down.child.kill('SIGSTOP');
    try {
      await until(async () => (await onlineOn(observer))[down.spec.id] === false, 5_000, 'reported offline');
    } finally {
      down.child.kill('SIGCONT');
    }
    await until(async () => (await onlineOn(observer))[down.spec.id] === true, 5_000, 'reported online');
    // the network JWT names every live member's API, the answering one first (SDKs fail over through ctrls)
    const networkJwt = (await call('GET', `${observer.base}/edge/client/v1/network-jwts`)).body.data[0].token;
    const ctrls = JSON.parse(Buffer.from(networkJwt.split('.')[1], 'base64url').toString()).ctrls;
    expect(ctrls).toEqual([observer.base, ...c.nodes.filter((n) => n !== observer).map((n) => n.base)]);
    // transfer-leadership through any member; asked again on Retry-After (the member just thawed may still be catching
    // up: a transfer not done within its bound answers 500 TRANSFER_LEADERSHIP_ERROR with Retry-After), as a client
    // told Retry-After would
    const t = await postUntilNot503(
      `${fabric(observer)}/transfer-leadership`,
      token,
      { newLeaderId: down.spec.id },
      12_000,
      'the transfer to be taken',
    );
    expect(t.status, t.text).toBe(200);
    expect(await leaderIndex(c.nodes)).toBe(c.nodes.indexOf(down));
    const bad = await call('POST', `${fabric(observer)}/transfer-leadership`, { token, body: { newLeaderId: 'nope' } });
    expect(bad.status).toBe(400);
    const anon = await call('GET', `${fabric(observer)}/list-members`);
    expect(anon.status).toBe(401);
  }, 40_000);

  it('one PKI: every API answers HTTPS under the one root with SANs of its own; a certificate enrolled through n1 logs in on n2 and n3', async () => {
    const root = c.nodes[0]!.ca!;
    for (const n of c.nodes) {
      expect(n.base.startsWith('https://127.0.0.1:')).toBe(true);
      // the node's own API certificate, checked against the root and its address by node:tls (tlsCall)
      expect(n.ca).toBe(root);
      expect((await tlsCall('GET', `${n.base}/version`, { ca: root })).status).toBe(200);
      const served = openssl(['x509', '-noout', '-ext', 'subjectAltName'], await apiCertOf(n)).stdout;
      expect(served).toContain('IP Address:127.0.0.1');
      // the signing CA every member signs with is the same one: the same CA bundle everywhere
      const cacerts = await call('GET', `${n.base}/.well-known/est/cacerts`);
      expect(cacerts.text).toBe((await call('GET', `${c.nodes[0]!.base}/.well-known/est/cacerts`)).text);
    }
    // enroll by OTT with an openssl CSR through n1
    const created = await call('POST', `${mgmt(c.nodes[0]!)}/identities`, {
      token,
      body: { name: 'cross-node-cert', type: 'Device', isAdmin: false, enrollment: { ott: true } },
    });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    const detail = await call('GET', `${mgmt(c.nodes[0]!)}/identities/${id}`, { token });
    const ott = detail.body.data.enrollment.ott.token as string;
    // its JWT names n1, which created it, as its issuer and first, and only members' APIs; it is signed with the key
    // of the certificate n1's API serves, which is what OpenZiti's SDKs verify it against (their enroll.ValidateToken)
    const ottJwt = detail.body.data.enrollment.ott.jwt as string;
    const claims = decodeJwt(ottJwt);
    expect(claims.iss).toBe(c.nodes[0]!.base);
    const enrollCtrls = claims.ctrls as string[];
    expect(enrollCtrls[0]).toBe(c.nodes[0]!.base);
    expect(c.nodes.map((n) => n.base)).toEqual(expect.arrayContaining(enrollCtrls));
    await jwtVerify(ottJwt, new X509Certificate(await apiCertOf(c.nodes[0]!)).publicKey);
    await jwtVerify(
      ottJwt,
      createLocalJWKSet((await call('GET', `${c.nodes[0]!.base}/edge/client/v1/enroll/jwks`)).body),
    );
    // another member's certificate does not verify it: each member signs with its own API key
    await expect(jwtVerify(ottJwt, new X509Certificate(await apiCertOf(c.nodes[1]!)).publicKey)).rejects.toThrow();
    const s = new Scratch();
    try {
      const clientCsr = opensslCsr(s, 'cross', 'ec', '/CN=cross');
      const enrolled = await tlsCall('POST', `${c.nodes[0]!.base}/edge/client/v1/enroll/ott`, {
        ca: root,
        body: { token: ott, clientCsr },
      });
      expect(enrolled.status).toBe(200);
      const key = s.read('cross.key');
      const cert = enrolled.body.data.cert as string;
      // authenticate with that certificate over mutual TLS on the other members, and list services there
      for (const n of c.nodes.slice(1)) {
        const login = await until(
          async () => {
            const r = await tlsCall('POST', `${n.base}/edge/client/v1/authenticate?method=cert`, {
              ca: root,
              key,
              cert,
              body: {},
            });
            return r.status === 200 ? r : null;
          },
          5_000,
          `cert login on ${n.spec.id}`,
        );
        const session = login.headers['zt-session'] as string;
        expect(login.body.data.identity.id).toBe(id);
        const services = await tlsCall('GET', `${n.base}/edge/client/v1/services`, { ca: root, token: session });
        expect(services.status).toBe(200);
      }
      // and a certificate n2 issues (extend, OTT) is signed by the same CA: n2 signs too
      const second = await call('POST', `${mgmt(c.nodes[1]!)}/identities`, {
        token,
        body: { name: 'cross-node-cert-2', type: 'Device', isAdmin: false, enrollment: { ott: true } },
      });
      const ott2 = (await call('GET', `${mgmt(c.nodes[1]!)}/identities/${second.body.data.id}`, { token })).body.data
        .enrollment.ott.token as string;
      const csr2 = opensslCsr(s, 'cross2', 'ec', '/CN=cross2');
      const on2 = await tlsCall('POST', `${c.nodes[1]!.base}/edge/client/v1/enroll/ott`, {
        ca: root,
        body: { token: ott2, clientCsr: csr2 },
      });
      expect(on2.status).toBe(200);
      const login0 = await tlsCall('POST', `${c.nodes[0]!.base}/edge/client/v1/authenticate?method=cert`, {
        ca: root,
        key: s.read('cross2.key'),
        cert: on2.body.data.cert,
        body: {},
      });
      expect(login0.status).toBe(200);
    } finally {
      s.remove();
    }
  }, 60_000);

  it('with the default flags, a process without a certificate from the cluster CA cannot join, connect or send Raft messages', async () => {
    // its own CA (another cluster's): the members refuse its TLS handshake
    await preparePeerPki(['intruder'], (id) => join(c.dir, id));
    const join1 = { join: c.nodes[0]!.peerAddress };
    const intruder = { id: 'intruder', dataDir: join(c.dir, 'intruder'), apiPort: 0, peerPort: 0, start: join1 };
    await expect(startNode(intruder, 30_000)).rejects.toThrow(/exited/);
    // no certificate at all: a cluster member does not start without one (there is no plain peer mode)
    await expect(startNode({ ...intruder, id: 'plain', dataDir: join(c.dir, 'plain') }, 30_000)).rejects.toThrow(
      /no valid peer certificate for plain/,
    );
    // a member's peer listener: neither path takes plain WebSocket, TLS without a client certificate, or a
    // certificate from another CA; a member's own certificate is let in (the check can tell them apart)
    const foreign = await loadPeerTlsOptions(join(c.dir, 'intruder', 'pki'));
    const member = await loadPeerTlsOptions(join(c.dir, 'n2', 'pki'));
    const addr = c.nodes[0]!.peerAddress;
    for (const path of ['/raft', '/peer-api']) {
      expect(await wsOpens(`ws://${addr}${path}`, {})).toBe(false);
      expect(await wsOpens(`wss://${addr}${path}`, { ca: member.ca })).toBe(false);
      expect(await wsOpens(`wss://${addr}${path}`, { key: foreign.key, cert: foreign.cert, ca: member.ca })).toBe(
        false,
      );
    }
    const asMember = { key: member.key, cert: member.cert, ca: member.ca };
    expect(await wsOpens(`wss://${addr}/peer-api`, { ...asMember, headers: PEER_LINK.headers } as object)).toBe(true);
    // a member of another peer protocol (none stated: a release before versions; one too new) is refused on every
    // path, with the reason, and the refusing member logs it
    for (const path of ['/peer-api', '/peer-forward']) {
      expect(await upgradeAnswer(`wss://${addr}${path}`, asMember)).toEqual({
        status: 426,
        refusal: expect.stringMatching(/^the peer sent no x-keel-peer-protocol \(protocol 0: .*speaks peer protocol 1/),
      });
      const future = { ...PEER_LINK.headers, [PEER_PROTOCOL_HEADER]: '9' };
      expect(await upgradeAnswer(`wss://${addr}${path}`, { ...asMember, headers: future })).toEqual({
        status: 426,
        refusal: expect.stringMatching(
          /speaks peer protocol 9; this member \(Keel .+\) speaks peer protocol 1 and accepts 1 to 2$/,
        ),
      });
      expect((await upgradeAnswer(`wss://${addr}${path}`, { ...asMember, headers: PEER_LINK.headers })).status).toBe(
        101,
      );
    }
    // the Raft transport too (n2 dialing n3 as the handshake wants, without the version): refused, logged by n3
    const n3 = c.nodes[2]!;
    const raftHeaders = { 'x-keel-raft-cluster': 'keel', 'x-keel-raft-from': 'n2', 'x-keel-raft-to': 'n3' };
    expect(await upgradeAnswer(`wss://${n3.peerAddress}/raft`, { ...asMember, headers: raftHeaders })).toMatchObject({
      status: 426,
    });
    const logged = (n: NodeProcess, link: string) =>
      n
        .stderr()
        .split('\n')
        .some((line) => {
          try {
            const o = JSON.parse(line);
            return o.msg === 'peer link refused: peer protocol version' && o.link === link && o.peer === 'n2';
          } catch {
            return false; // a line cut by the stderr bound
          }
        });
    await until(() => logged(n3, '/raft'), 5_000, 'n3 logs the refusal');
    // n1's lines reach this process through its stderr pipe, which a loaded machine may deliver later
    await until(
      () => logged(c.nodes[0]!, '/peer-api') && logged(c.nodes[0]!, '/peer-forward'),
      5_000,
      'n1 logs the refusals',
    );
    // a Raft transport with the foreign certificate (trusting the cluster's root, so that the refusal is n1's)
    // dials n1 and asks for its vote in a far term: never delivered (n1's term does not move)
    const term = (await memberStatus(c.nodes[0]!)).term;
    const errors: string[] = [];
    const outsider = new WebSocketTransport({
      id: 'n0',
      clusterId: 'keel',
      tls: { ...foreign, ca: member.ca },
      onError: (e) => errors.push(e.message),
    });
    try {
      outsider.addPeer('n1', addr);
      const zero = { entries: [], commit: 0, reject: false, rejectHint: 0 };
      outsider.send([{ type: 'vote', from: 'n0', to: 'n1', term: term + 1000, index: 1e9, logTerm: 1e9, ...zero }]);
      await until(() => errors.length > 0, 5_000, 'the refused handshake');
    } finally {
      await outsider.close();
    }
    expect((await memberStatus(c.nodes[0]!)).term).toBe(term);
    const m = await call('GET', `${c.nodes[0]!.base}/fabric/v1/cluster/list-members`, { token });
    expect(m.body.data.map((x: any) => x.id)).toEqual(['n1', 'n2', 'n3']);
  }, 90_000);

  it('a member added and removed under load fails no write', async () => {
    const load = writeLoad(
      () => c.nodes,
      () => token,
      'member',
      4,
    );
    await until(() => load.acked.length >= 20, 20_000, 'load');
    // a join bundle issued with the first node's CA, as an operator hands it over
    await issueNodeBundle(join(c.dir, 'n1', 'pki'), join(c.dir, 'n4', 'pki'), { nodeId: 'n4', hosts: LOCAL_HOSTS });
    const fourth = await startNode({
      id: 'n4',
      dataDir: join(c.dir, 'n4'),
      apiPort: 0,
      peerPort: 0,
      start: { join: c.nodes[1]!.peerAddress },
    });
    try {
      const listed = await call('GET', `${c.nodes[0]!.base}/fabric/v1/cluster/list-members`, { token });
      expect(listed.body.data.find((x: any) => x.id === 'n4')).toMatchObject({ voter: true });
      const acked = load.acked.length;
      await until(() => load.acked.length >= acked + 20, 20_000, 'writes with four members');
      expect((await namesOn(fourth, token, 'member-')).length).toBeGreaterThan(0);
      // asked again on 503 (a leadership change under load), as a client told Retry-After would
      const r = await postUntilNot503(
        `${c.nodes[2]!.base}/fabric/v1/cluster/remove-member`,
        token,
        { id: 'n4' },
        10_000,
        'the removal to be taken',
      );
      expect(r.status, r.text).toBe(200);
      await until(
        async () => {
          const after = await call('GET', `${c.nodes[0]!.base}/fabric/v1/cluster/list-members`, { token });
          return after.body.data.map((x: any) => x.id).join() === 'n1,n2,n3';
        },
        5_000,
        'the removal on every member',
      );
      const acked2 = load.acked.length;
      await until(() => load.acked.length >= acked2 + 20, 20_000, 'writes after the removal');
      // n4 learns it was removed (it applies its removal, or a member's status shows a newer configuration
      // without it) and exits 78 instead of serving its stale state; restarted on its data, it exits 78 again
      const removedLine = /node n4 was removed from the cluster \(.*: the configuration at index \d+ leaves it out\)/;
      expect(await withTimeout(fourth.exited, 10_000, 'n4 exits')).toEqual({ code: 78, signal: null });
      expect(fourth.stderr()).toMatch(removedLine);
      const again = startNode({
        ...fourth.spec,
        start: undefined,
        peerPort: Number(fourth.peerAddress.split(':').at(-1)),
      });
      void again.then(stopNode, () => {}); // (it must not start; if it did, it is stopped)
      await expect(again).rejects.toThrow(/exited \(78\) before it started/);
      await expect(again).rejects.toThrow(removedLine);
      // with its data directory emptied and --join, its old certificate is refused as removed: 78 again
      for (const f of readdirSync(join(c.dir, 'n4'))) {
        if (f !== 'pki') rmSync(join(c.dir, 'n4', f), { recursive: true, force: true });
      }
      const rejoin = startNode({ ...fourth.spec, start: { join: c.nodes[0]!.peerAddress }, peerPort: 0 });
      void rejoin.then(stopNode, () => {});
      await expect(rejoin).rejects.toThrow(/exited \(78\) before it started/);
      await expect(rejoin).rejects.toThrow(/node n4 was removed from the cluster \(member .* refuses it as removed/);
    } finally {
      await load.stop();
      await stopNode(fourth);
    }
    expect(load.details).toEqual([]);
  }, 90_000);

  it('a minority without a leader answers 503 CLUSTER_NO_LEADER with Retry-After; a node cut off catches up after healing', async () => {
    const L = await leaderIndex(c.nodes);
    const lone = c.nodes.find((_, i) => i !== L)!;
    const frozen = c.nodes.filter((n) => n !== lone);
    for (const n of frozen) n.child.kill('SIGSTOP');
    try {
      // once the lone member's election timeout has passed it knows no leader
      await until(async () => (await memberStatus(lone)).leader === null, 10_000, 'leader lost');
      const r = await create(lone, token, 'minority-write');
      expect(r.status).toBe(503);
      expect(r.body.error.code).toBe('CLUSTER_NO_LEADER');
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      for (const n of frozen) n.child.kill('SIGCONT');
    }
    await until(async () => (await create(lone, token, 'healed-write')).status === 201, 15_000, 'writes after healing');

    // one member cut off (frozen) while the majority goes on writing; it catches up once back
    lone.child.kill('SIGSTOP');
    const others = c.nodes.filter((n) => n !== lone);
    try {
      for (let i = 0; i < 30; i++) expect((await create(others[i % 2]!, token, `behind-${i}`)).status).toBe(201);
    } finally {
      lone.child.kill('SIGCONT');
    }
    await until(async () => (await namesOn(lone, token, 'behind-')).length === 30, 10_000, 'catch-up');
    expect(await namesOn(lone, token, 'minority-write')).toEqual([]);
  }, 60_000);

  it('kill -9 of the leader under load: a new leader, writes resume, every acknowledged write exactly once on every survivor; the killed node catches up by snapshot', async () => {
    const L = await leaderIndex(c.nodes);
    const leader = c.nodes[L]!;
    const followers = c.nodes.filter((_, i) => i !== L);
    const load = writeLoad(
      () => followers,
      () => token,
      'kill9',
    );
    await until(() => load.acked.length >= 50, 20_000, 'load before the kill');
    const before = await memberStatus(followers[0]!);
    leader.child.kill('SIGKILL');
    await leader.exited;
    const ackedAtKill = load.acked.length;
    // writes resume under a new leader; enough of them that the log is compacted past the killed node
    await until(() => load.acked.length >= ackedAtKill + 450, 40_000, 'writes after the kill');
    await load.stop();
    const newL = await leaderIndex(c.nodes);
    expect(newL).not.toBe(L);
    // only "outcome unknown" (429) and "no leader" (503) may fail during the failover, never a duplicate (400)
    for (const key of load.failures.keys()) expect(key).toMatch(/^(429|503) /);
    for (const n of followers) {
      await until(
        async () => exactlyOnce(await namesOn(n, token, 'kill9-'), load.acked).length === 0,
        10_000,
        `acknowledged writes on ${n.spec.id}`,
      );
    }
    const now = await memberStatus(followers[0]!);
    expect(now.firstIndex).toBeGreaterThan(before.commit + 1); // the log no longer holds what the killed node missed
    const back = await c.restart(L);
    await until(
      async () => exactlyOnce(await namesOn(back, token, 'kill9-'), load.acked).length === 0,
      30_000,
      'the restarted node to catch up',
    );
    expect((await memberStatus(back)).snapshotIndex).toBeGreaterThan(before.commit);
  }, 120_000);

  it('rolling restart of all three under load (SIGTERM hands leadership over): zero failed writes', async () => {
    let restarting: NodeProcess | null = null;
    const load = writeLoad(
      () => c.nodes.filter((n) => n !== restarting && alive(n)),
      () => token,
      'rolling',
      4,
    );
    await until(() => load.acked.length >= 30, 20_000, 'load');
    const order = [...c.nodes.keys()].sort((a, b) => a - b);
    for (const i of order) {
      restarting = c.nodes[i]!;
      const acked = load.acked.length;
      await stopNode(restarting);
      expect(restarting.child.exitCode).toBe(0);
      const back = await c.restart(i);
      restarting = null;
      await until(() => load.acked.length >= acked + 30, 20_000, `writes after restarting ${back.spec.id}`);
    }
    await load.stop();
    // on failure, the members' logs say why (e.g. which forward's outcome was unknown)
    const logs = load.details.length ? c.nodes.map((n) => `${n.spec.id}:\n${n.stderr()}`).join('\n') : '';
    expect(load.details, logs).toEqual([]);
    for (const n of c.nodes) {
      await until(
        async () => exactlyOnce(await namesOn(n, token, 'rolling-'), load.acked).length === 0,
        10_000,
        `acknowledged writes on ${n.spec.id}`,
      );
    }
  }, 150_000);
});
