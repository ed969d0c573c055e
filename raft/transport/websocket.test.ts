import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as x509 from '@peculiar/x509';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import type { Message, NodeId } from '../types.js';
import { backoffDelay_ms } from './backoff.js';
import { encodeMessage } from './codec.js';
import { handshakeHeaders, type LinkCheck, LinkRefusedError } from './handshake.js';
import { type TransportTlsOptions, WebSocketTransport, type WebSocketTransportOptions } from './websocket.js';

function msg(from: NodeId, to: NodeId, index: number, bytes = 3): Message {
  return {
    type: 'append',
    from,
    to,
    term: 1,
    logTerm: 1,
    index,
    entries: [{ term: 1, index, type: 'normal', data: new Uint8Array(bytes).fill(index & 0xff) }],
    commit: 0,
    reject: false,
    rejectHint: 0,
  };
}

async function waitFor(cond: () => boolean, timeout_ms = 5000): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for condition');
    await new Promise((r) => setTimeout(r, 5));
  }
}

const open: WebSocketTransport[] = [];
const servers: Server[] = [];

function transport(opts: Partial<WebSocketTransportOptions> & { id: NodeId }): WebSocketTransport {
  const t = new WebSocketTransport({ clusterId: 'c1', backoff: { min_ms: 10, max_ms: 80 }, ping_ms: 0, ...opts });
  open.push(t);
  return t;
}

function inbox(t: WebSocketTransport): Message[] {
  const got: Message[] = [];
  t.onMessage((m) => got.push(m));
  return got;
}

afterEach(async () => {
  for (const t of open.splice(0)) await t.close();
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

describe('WebSocketTransport', () => {
  it('delivers messages both ways over a single connection per pair', async () => {
    const ids = ['a', 'b', 'c'];
    const ts = ids.map((id) => transport({ id }));
    const addrs = await Promise.all(ts.map((t) => t.listen(0)));
    const boxes = ts.map(inbox);
    for (const t of ts) {
      for (const [i, id] of ids.entries()) t.addPeer(id, addrs[i]!);
    }
    for (const [i, t] of ts.entries()) {
      for (const to of ids) if (to !== t.id) t.send([msg(t.id, to, i * 10 + 1), msg(t.id, to, i * 10 + 2)]);
    }
    await waitFor(() => boxes.every((b) => b.length === 4));
    const b = boxes[1]!;
    expect(b.filter((m) => m.from === 'a').map((m) => m.index)).toEqual([1, 2]);
    expect(b.filter((m) => m.from === 'c').map((m) => m.index)).toEqual([21, 22]);
    expect([...b[0]!.entries[0]!.data]).toEqual([1, 1, 1]);
    for (const t of ts) {
      for (const p of t.peers()) {
        expect(p.state).toBe('connected');
        expect(p.connects).toBe(1);
        expect(p.dialer).toBe(t.id < p.id);
      }
    }
  });

  it('reconnects with backoff after the peer restarts, and reports the loss', async () => {
    const a = transport({ id: 'a' });
    let b = transport({ id: 'b' });
    const addrB = await b.listen(0);
    const port = Number(addrB.split(':')[1]);
    await a.listen(0);
    const lost: NodeId[] = [];
    a.onUnreachable((peer) => lost.push(peer));
    a.addPeer('b', addrB);
    b.addPeer('a', 'unused');
    let gotB = inbox(b);
    a.send([msg('a', 'b', 1)]);
    await waitFor(() => gotB.length === 1);
    await b.close();
    await waitFor(() => lost.includes('b'));
    b = transport({ id: 'b' });
    await b.listen(port);
    b.addPeer('a', 'unused');
    gotB = inbox(b);
    await waitFor(() => a.peers()[0]!.state === 'connected');
    a.send([msg('a', 'b', 2)]);
    await waitFor(() => gotB.length === 1);
    expect(gotB[0]!.index).toBe(2);
    expect(a.peers()[0]!.connects).toBe(2);
    // The accepting side can answer over the connection the dialer opened.
    const gotA = inbox(a);
    b.send([msg('b', 'a', 3)]);
    await waitFor(() => gotA.length === 1);
  });

  it('redials a peer in backoff at once for an election request, not for other messages', async () => {
    // A long backoff (30..60 s): without the immediate redial the pre-vote would wait for the backoff timer, far
    // beyond the 10 s wait below, which leaves a loaded machine room to connect (1.5 s was tight under load).
    const a = transport({ id: 'a', backoff: { min_ms: 60_000, max_ms: 60_000 } });
    let b = transport({ id: 'b' });
    const addrB = await b.listen(0);
    const port = Number(addrB.split(':')[1]);
    await b.close();
    a.addPeer('b', addrB);
    await waitFor(() => a.peers()[0]!.state === 'backoff');
    b = transport({ id: 'b' });
    await b.listen(port);
    b.addPeer('a', 'unused');
    const gotB = inbox(b);
    a.send([msg('a', 'b', 1)]);
    await new Promise((r) => setTimeout(r, 100));
    expect(a.peers()[0]!.state).toBe('backoff');
    const preVote: Message = { ...msg('a', 'b', 2), type: 'preVote', entries: [] };
    a.send([preVote]);
    await waitFor(() => gotB.length === 2, 10_000);
    expect(gotB.map((m) => m.type)).toEqual(['append', 'preVote']);
    expect(a.peers()[0]!.connects).toBe(1);
  });

  it('rejects handshakes from the wrong cluster, an unknown peer, or with a bad secret', async () => {
    const errors: string[] = [];
    const b = transport({ id: 'b', secret: 's3cret', onError: (e) => errors.push(e.message) });
    const addr = await b.listen(0);
    b.addPeer('a', 'unused');
    const got = inbox(b);
    const wrongCluster = transport({ id: 'a', clusterId: 'other', secret: 's3cret' });
    wrongCluster.addPeer('b', addr);
    const wrongSecret = transport({ id: 'a', secret: 'nope' });
    wrongSecret.addPeer('b', addr);
    const stranger = transport({ id: 'Z', secret: 's3cret' });
    stranger.addPeer('b', addr);
    for (const t of [wrongCluster, wrongSecret, stranger]) t.send([msg(t.id, 'b', 1)]);
    await waitFor(
      () =>
        errors.some((e) => e.includes('wrong cluster')) &&
        errors.some((e) => e.includes('bad handshake signature')) &&
        errors.some((e) => e.includes('unknown peer Z')),
    );
    const good = transport({ id: 'a', secret: 's3cret' });
    good.addPeer('b', addr);
    good.send([msg('a', 'b', 7)]);
    await waitFor(() => got.length === 1);
    expect(got.map((m) => m.index)).toEqual([7]);
  });

  it('a link check refuses a peer on either side with its reason, and lets a matching peer through', async () => {
    // a member speaking version `v` that accepts the versions in `accepts`
    const link = (v: string, accepts: string[]): LinkCheck => ({
      headers: { 'x-test-version': v },
      judge: (h) => (accepts.includes(String(h['x-test-version'])) ? null : { status: 426, reason: `version ${v}` }),
    });
    const run = async (aLink: LinkCheck, bLink: LinkCheck) => {
      const errors: { side: string; err: Error; peer: string | null }[] = [];
      const onError = (side: string) => (err: Error, peer: string | null) => errors.push({ side, err, peer });
      /** `side peer`: each link `side` let through its check */
      const accepted: string[] = [];
      const onLinkAccepted = (side: string) => (peer: string) => accepted.push(`${side} ${peer}`);
      const b = transport({ id: 'b', link: bLink, onError: onError('b'), onLinkAccepted: onLinkAccepted('b') });
      const addr = await b.listen(0);
      b.addPeer('a', 'unused');
      const a = transport({ id: 'a', link: aLink, onError: onError('a'), onLinkAccepted: onLinkAccepted('a') });
      a.addPeer('b', addr);
      return { a, b, got: inbox(b), errors, accepted };
    };
    const refusals = (errors: { side: string; err: Error; peer: string | null }[]) =>
      errors
        .filter((e) => e.err instanceof LinkRefusedError)
        .map((e) => [e.side, e.peer, (e.err as LinkRefusedError).reason]);
    // the accepting side refuses the dialer (426 with the reason), the dialing side refuses the acceptor's answer
    const accept = await run(link('1', ['1']), link('2', ['2']));
    accept.a.send([msg('a', 'b', 1)]);
    // the dialer learns of the 426 after the acceptor refused: wait for both (on a loaded machine it comes later)
    const dialerGot426 = () => accept.errors.some((e) => e.side === 'a' && e.err.message.includes('426'));
    await waitFor(() => refusals(accept.errors).length > 0 && dialerGot426());
    expect(refusals(accept.errors)[0]).toEqual(['b', 'a', 'version 2']);
    expect(dialerGot426()).toBe(true);
    const dial = await run(link('2', ['2']), link('1', ['1', '2']));
    dial.a.send([msg('a', 'b', 1)]);
    await waitFor(() => refusals(dial.errors).length > 0);
    expect(refusals(dial.errors)[0]).toEqual(['a', 'b', 'version 2']);
    await new Promise((r) => setTimeout(r, 100));
    expect([...accept.got, ...dial.got]).toEqual([]);
    expect(accept.a.peers()[0]!.state).not.toBe('connected');
    expect(dial.a.peers()[0]!.state).not.toBe('connected');
    // a link refused on either side is never reported accepted by that side (b let a's request through in `dial`)
    expect(accept.accepted).toEqual([]);
    expect(dial.accepted).not.toContain('a b');
    expect(dial.accepted).toContain('b a');
    for (const t of open.splice(0)) await t.close();
    // matching versions: connected, delivered, nothing refused
    const same = await run(link('1', ['1', '2']), link('2', ['1', '2']));
    same.a.send([msg('a', 'b', 3)]);
    await waitFor(() => same.got.length === 1);
    expect(refusals(same.errors)).toEqual([]);
    expect([...new Set(same.accepted)].sort()).toEqual(['a b', 'b a']);
  });

  it('refuses a connection dialed in the wrong direction and one that spoofs ids', async () => {
    const a = transport({ id: 'a' });
    const addr = await a.listen(0);
    a.addPeer('b', 'unused');
    const url = `ws://${addr}/raft`;
    const [status, phrase] = await new Promise<[number, string]>((resolve) => {
      // 'b' > 'a', so 'b' must wait for 'a' to dial: a dial from b is refused.
      const ws = new WebSocket(url, { headers: handshakeHeaders('c1', 'b', 'a', null, Date.now()) });
      ws.on('unexpected-response', (_req, res) => resolve([res.statusCode ?? 0, res.statusMessage ?? '']));
    });
    expect(status).toBe(409);
    expect(phrase).toBe('Conflict'); // the status's own reason phrase (rejectUpgrade)

    const b = transport({ id: 'b' });
    const addrB = await b.listen(0);
    b.addPeer('a', 'unused');
    const got = inbox(b);
    const ws = new WebSocket(`ws://${addrB}/raft`, { headers: handshakeHeaders('c1', 'a', 'b', null, Date.now()) });
    await new Promise((r) => ws.on('open', r));
    const closed = new Promise<number>((r) => ws.on('close', (code) => r(code)));
    ws.send(encodeMessage(msg('c', 'b', 1)));
    expect(await closed).toBe(1008);
    expect(got).toHaveLength(0);
  });

  it('drops and reports when the per-peer queue is full or a message exceeds maxPayload', async () => {
    const a = transport({ id: 'a', maxQueue_msgs: 5, maxPayload_bytes: 4096 });
    // 'b' never listens: messages wait in the queue until it is full.
    a.addPeer('b', '127.0.0.1:1');
    const dropped: Message[] = [];
    a.onUnreachable((_peer, msgs) => dropped.push(...msgs));
    a.send(Array.from({ length: 8 }, (_, i) => msg('a', 'b', i + 1)));
    expect(dropped.map((m) => m.index)).toEqual([6, 7, 8]);
    expect(a.peers()[0]!.queued_msgs).toBe(5);
    a.send([msg('a', 'b', 100, 10_000)]);
    expect(dropped.at(-1)!.index).toBe(100);
    a.send([msg('a', 'nobody', 200)]);
    expect(dropped.at(-1)!.index).toBe(200);
    expect(a.peers()[0]!.dropped_msgs).toBe(4);
  });

  it('survives a malformed peer address and dials once it is corrected', async () => {
    const errors: string[] = [];
    const a = transport({ id: 'a', onError: (e) => errors.push(e.message) });
    const b = transport({ id: 'b' });
    const addrB = await b.listen(0);
    b.addPeer('a', 'unused');
    const got = inbox(b);
    expect(() => a.addPeer('b', 'no such host:::')).not.toThrow();
    expect(errors.length).toBeGreaterThan(0);
    expect(a.peers()[0]!.state).toBe('backoff');
    a.addPeer('b', addrB);
    a.send([msg('a', 'b', 1)]);
    await waitFor(() => got.length === 1);
  });

  it('splits a burst into frames within maxPayload and keeps order', async () => {
    const a = transport({ id: 'a', maxPayload_bytes: 8192 });
    const b = transport({ id: 'b', maxPayload_bytes: 8192 });
    const addrB = await b.listen(0);
    b.addPeer('a', 'unused');
    a.addPeer('b', addrB);
    const got = inbox(b);
    a.send(Array.from({ length: 200 }, (_, i) => msg('a', 'b', i + 1, 500)));
    await waitFor(() => got.length === 200);
    expect(got.map((m) => m.index)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
  });

  it('serves on an existing http server next to other WebSocket endpoints', async () => {
    const server = createServer();
    servers.push(server);
    const other = new WebSocketServer({ noServer: true });
    const b = transport({ id: 'b', path: '/cluster/raft' });
    b.attach(server);
    server.on('upgrade', (req, socket, head) => {
      if (req.url === '/other') other.handleUpgrade(req, socket, head, (ws) => ws.send('hello'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const addr = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    b.addPeer('a', 'unused');
    const got = inbox(b);
    const a = transport({ id: 'a', path: '/cluster/raft' });
    a.addPeer('b', addr);
    a.send([msg('a', 'b', 5)]);
    await waitFor(() => got.length === 1);
    const hello = await new Promise<string>((resolve) => {
      const ws = new WebSocket(`ws://${addr}/other`);
      ws.on('message', (d) => {
        resolve(String(d));
        ws.close();
      });
    });
    expect(hello).toBe('hello');
    other.close();
  });

  describe('mutual TLS', () => {
    it('connects peers whose certificates name them and refuses others', async () => {
      const ca = await makeCa('Keel Test CA');
      const otherCa = await makeCa('Other CA');
      const tlsA = await ca.issue('a');
      const tlsB = await ca.issue('b');
      const errors: string[] = [];
      const b = transport({ id: 'b', tls: tlsB, onError: (e) => errors.push(e.message) });
      const addrB = await b.listen(0);
      b.addPeer('a', 'unused');
      const got = inbox(b);
      const a = transport({ id: 'a', tls: tlsA });
      a.addPeer('b', addrB);
      a.send([msg('a', 'b', 1)]);
      await waitFor(() => got.length === 1);

      // A certificate from the right CA that names another node cannot claim to be 'a'.
      const impostor = transport({ id: 'a', tls: await ca.issue('x') });
      impostor.addPeer('b', addrB);
      impostor.send([msg('a', 'b', 2)]);
      await waitFor(() => errors.some((e) => e.includes('certificate names x, not a')));

      // A certificate from another CA fails the TLS handshake itself.
      const outsiderErrors: string[] = [];
      const probe = new WebSocketTransport({
        id: 'a',
        clusterId: 'c1',
        tls: { ...(await otherCa.issue('a')), ca: ca.pem },
        ping_ms: 0,
        backoff: { min_ms: 10, max_ms: 80 },
        onError: (e) => outsiderErrors.push(e.message),
      });
      open.push(probe);
      probe.addPeer('b', addrB);
      await waitFor(() => outsiderErrors.length > 0);
      // A server whose certificate names someone else is refused by the dialer.
      const fakeB = transport({ id: 'b', tls: await ca.issue('y') });
      const addrFake = await fakeB.listen(0);
      fakeB.addPeer('a', 'unused');
      const dialErrors: string[] = [];
      const a2 = transport({ id: 'a', tls: tlsA, onError: (e) => dialErrors.push(e.message) });
      a2.addPeer('b', addrFake);
      await waitFor(() => dialErrors.some((e) => e.includes('server certificate names y, not b')));
      expect(got.map((m) => m.index)).toEqual([1]);
    });
  });
});

describe('backoffDelay_ms', () => {
  it('grows exponentially with jitter and stays bounded', () => {
    const opts = { min_ms: 50, max_ms: 1000 };
    expect(backoffDelay_ms(0, opts, () => 0)).toBe(25);
    expect(backoffDelay_ms(0, opts, () => 1)).toBe(50);
    expect(backoffDelay_ms(3, opts, () => 1)).toBe(400);
    expect(backoffDelay_ms(10, opts, () => 1)).toBe(1000);
    expect(backoffDelay_ms(1000, opts, () => 0.5)).toBe(750);
  });
});

// ---- a throwaway CA -------------------------------------------------------------------------------------------

const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };

function pemKey(der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString('base64');
  return `-----BEGIN PRIVATE KEY-----\n${b64.match(/.{1,64}/g)!.join('\n')}\n-----END PRIVATE KEY-----\n`;
}

async function makeCa(name: string): Promise<{ pem: string; issue: (cn: string) => Promise<TransportTlsOptions> }> {
  x509.cryptoProvider.set(webcrypto as never);
  const keys = await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
  const notBefore = new Date(Date.now() - 60_000);
  const notAfter = new Date(Date.now() + 3600_000);
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${name}`,
    keys: keys as never,
    notBefore,
    notAfter,
    signingAlgorithm: alg,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    ],
  });
  const pem = caCert.toString('pem');
  return {
    pem,
    issue: async (cn: string) => {
      const leafKeys = await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
      const cert = await x509.X509CertificateGenerator.create({
        subject: `CN=${cn}`,
        issuer: caCert.subject,
        notBefore,
        notAfter,
        publicKey: leafKeys.publicKey as webcrypto.CryptoKey,
        signingKey: keys.privateKey as webcrypto.CryptoKey,
        signingAlgorithm: alg,
        extensions: [
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
          new x509.SubjectAlternativeNameExtension([{ type: 'ip', value: '127.0.0.1' }]),
        ],
      });
      const key = pemKey(await webcrypto.subtle.exportKey('pkcs8', leafKeys.privateKey as webcrypto.CryptoKey));
      return { key, cert: cert.toString('pem'), ca: pem };
    },
  };
}
