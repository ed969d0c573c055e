/**
 * The peer protocol version (src/cluster/peer-protocol.ts): the rule, and the dialing clients (forward channel,
 * peer API) refusing a member of another protocol, or being refused by it, with the reason; in process.
 */
import { createServer, type IncomingMessage, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { applyWSSHandler } from '@trpc/server/adapters/ws';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { answerWithLinkHeaders, type LinkCheck, WebSocketTransport } from '../../raft/index.js';
import { waitFor } from '../../raft/node/wait-testkit.js';
import { FORWARD_PATH, ForwardClient, serveForwards } from '../../src/cluster/forward-channel.js';
import { MemberMonitor, type MemberSource } from '../../src/cluster/members.js';
import {
  type MemberStatus,
  orRefusal,
  PEER_API_PATH,
  type PeerClient,
  type PeerHandlers,
  peerClient,
  peerRouter,
} from '../../src/cluster/peer-api.js';
import {
  acceptedRange,
  type DialRefusal,
  PEER_LINK,
  PEER_PROTOCOL_HEADER,
  PEER_PROTOCOL_VERSION,
  PEER_REFUSAL_HEADER,
  type PeerDial,
  peerLinkCheck,
  RefusalLog,
  raftLinkOptions,
  refuseUpgrade,
} from '../../src/cluster/peer-protocol.js';
import { withTimeout } from '../../src/util/timeout.js';

const cleanup: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

const judged = (check: LinkCheck, headers: Record<string, string>) => check.judge(headers)?.reason ?? null;

describe('the rule', () => {
  it('a member accepts its own version and its neighbours, never version 0 (no header)', () => {
    expect(PEER_PROTOCOL_VERSION).toBe(1);
    expect(acceptedRange(1)).toEqual({ min: 1, max: 2 });
    expect(acceptedRange(5)).toEqual({ min: 4, max: 6 });
    const v1 = peerLinkCheck(1, '1.0.0');
    expect(judged(v1, { [PEER_PROTOCOL_HEADER]: '1' })).toBeNull();
    expect(judged(v1, { [PEER_PROTOCOL_HEADER]: '2' })).toBeNull();
    expect(judged(v1, { [PEER_PROTOCOL_HEADER]: '3', 'x-keel-release': '3.0.0' })).toBe(
      'the peer (Keel 3.0.0) speaks peer protocol 3; this member (Keel 1.0.0) speaks peer protocol 1 and accepts 1 to 2',
    );
    expect(judged(v1, {})).toMatch(/^the peer sent no x-keel-peer-protocol \(protocol 0: a Keel release before/);
    expect(judged(v1, { [PEER_PROTOCOL_HEADER]: '0' })).toMatch(/speaks peer protocol 0;/);
    const garbage = judged(v1, { [PEER_PROTOCOL_HEADER]: `1.5${'x'.repeat(500)}\u0000` })!;
    expect(garbage).toMatch(/^the peer sent x-keel-peer-protocol "1\.5x+…"; this member/);
    expect(garbage.length).toBeLessThan(250);
    expect(v1.judge({ [PEER_PROTOCOL_HEADER]: '7' })?.status).toBe(426);
    const v2 = peerLinkCheck(2);
    for (const v of ['1', '2', '3']) expect(judged(v2, { [PEER_PROTOCOL_HEADER]: v })).toBeNull();
    expect(judged(v2, { [PEER_PROTOCOL_HEADER]: '4' })).not.toBeNull();
    expect(PEER_LINK.headers[PEER_PROTOCOL_HEADER]).toBe(String(PEER_PROTOCOL_VERSION));
  });

  it('logs a refusal once per peer and reason, and the peer being accepted again', () => {
    const lines: [string, string, Record<string, unknown>][] = [];
    const log = new RefusalLog((level, msg, extra) => lines.push([level, msg, extra]));
    log.refused('/raft', 'n2', 'old');
    log.refused('/raft', 'n2', 'old');
    log.refused('/peer-api', 'n2', 'old');
    expect(log.reason('/raft', 'n2')).toBe('old');
    log.refused('/raft', 'n2', 'newer');
    log.accepted('/raft', 'n2');
    log.accepted('/raft', 'n2');
    log.accepted('/raft', 'n3');
    expect(lines.map(([level, , extra]) => [level, extra.link, extra.reason ?? null])).toEqual([
      ['warn', '/raft', 'old'],
      ['warn', '/peer-api', 'old'],
      ['warn', '/raft', 'newer'],
      ['info', '/raft', null],
    ]);
    expect(log.reason('/raft', 'n2')).toBeNull();
  });
});

/**
 * A peer listener speaking `check`'s protocol on the forward channel and the peer API, as ClusterNode serves them:
 * a dialer it refuses gets 426 with the reason, an accepted one its headers in the 101 answer.
 */
async function member(check: LinkCheck): Promise<{ address: string; forwards: () => number }> {
  const server = createServer();
  let forwards = 0;
  const fwd = new WebSocketServer({ noServer: true });
  answerWithLinkHeaders(fwd, check);
  serveForwards(
    fwd,
    async (_term, items) => {
      forwards++;
      return items.map(() => ({ ok: true as const }));
    },
    () => {},
  );
  const api = new WebSocketServer({ noServer: true });
  answerWithLinkHeaders(api, check);
  const handlers = { status: () => ({ id: 'm1' }) } as unknown as PeerHandlers;
  const trpc = applyWSSHandler({ wss: api, router: peerRouter, createContext: () => ({ handlers, from: null }) });
  server.on('upgrade', (req, socket, head) => {
    const wss = req.url === FORWARD_PATH ? fwd : req.url === PEER_API_PATH ? api : null;
    if (wss === null) return socket.destroy();
    const refusal = check.judge(req.headers);
    if (refusal !== null) return refuseUpgrade(socket, refusal, check);
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(
    () =>
      new Promise<void>((r) => {
        trpc.broadcastReconnectNotification();
        for (const wss of [fwd, api]) {
          for (const ws of wss.clients) ws.terminate();
          wss.close();
        }
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, forwards: () => forwards };
}

function dialer(): { dial: PeerDial; refusals: DialRefusal[]; accepted: string[] } {
  const refusals: DialRefusal[] = [];
  const accepted: string[] = [];
  return {
    dial: { check: PEER_LINK, onRefused: (_a, r) => refusals.push(r), onAccepted: (a) => accepted.push(a) },
    refusals,
    accepted,
  };
}

describe('dialing a member of another peer protocol', () => {
  const item = new Uint8Array([1, 2, 3]);

  it('forward channel: a member this one does not accept is never sent a frame; the reason is told', async () => {
    const ahead = await member(peerLinkCheck(PEER_PROTOCOL_VERSION + 2, '9.9.9'));
    const d = dialer();
    const c = new ForwardClient(ahead.address, undefined, d.dial);
    cleanup.push(() => c.close());
    // refused by its own rule (it accepts PEER_PROTOCOL_VERSION + 1 and up): the peer's 426 and its reason
    expect(await c.send(1, [item], 2_000, 2_000)).toBeNull();
    expect(ahead.forwards()).toBe(0);
    expect(d.refusals[0]!.reason).toMatch(/^refused by the peer: the peer \(Keel .+\) speaks peer protocol 1; /);
    expect(d.refusals[0]!.release).toBe('9.9.9');
    expect(d.accepted).toEqual([]);
  });

  it('forward channel: a member that accepts this one but is not accepted by it; then the same version', async () => {
    // a member two versions ahead that (wrongly) accepts everyone: this side judges its 101 answer
    const lax: LinkCheck = { headers: peerLinkCheck(PEER_PROTOCOL_VERSION + 2).headers, judge: () => null };
    const ahead = await member(lax);
    const d = dialer();
    const c = new ForwardClient(ahead.address, undefined, d.dial);
    cleanup.push(() => c.close());
    expect(await c.send(1, [item], 2_000, 2_000)).toBeNull();
    expect(ahead.forwards()).toBe(0);
    expect(d.refusals[0]!.reason).toMatch(/speaks peer protocol 3; this member \(Keel .+\) speaks peer protocol 1/);
    const same = await member(PEER_LINK);
    const d2 = dialer();
    const c2 = new ForwardClient(same.address, undefined, d2.dial);
    cleanup.push(() => c2.close());
    expect(await c2.send(1, [item], 2_000, 2_000)).toEqual([{ ok: true }]);
    expect(d2.refusals).toEqual([]);
    expect(d2.accepted).toEqual([same.address]);
  });

  it('peer API: calls to a refused member fail, and the client tells why; the same version answers', async () => {
    const behind = await member(peerLinkCheck(PEER_PROTOCOL_VERSION + 3));
    const d = dialer();
    const c = peerClient(behind.address, undefined, d.dial);
    cleanup.push(() => c.close());
    await expect(withTimeout(c.api.status.query(), 500, 'status')).rejects.toThrow(/status/);
    expect(c.refusal()?.reason).toMatch(/^refused by the peer: .*speaks peer protocol 1; .*speaks peer protocol 4/);
    expect(d.refusals.length).toBeGreaterThan(0);
    // what a join or the CLI reports: the refusal, not the timeout
    await expect(orRefusal(c, behind.address, () => withTimeout(c.api.status.query(), 500, 'status'))).rejects.toThrow(
      new RegExp(`^the member at ${behind.address} refused this one: refused by the peer: `),
    );
    const same = await member(PEER_LINK);
    const ok = peerClient(same.address);
    cleanup.push(() => ok.close());
    expect(await withTimeout(ok.api.status.query(), 2_000, 'status')).toEqual({ id: 'm1' });
    expect(ok.refusal()).toBeNull();
    // an error with no refusal behind it stays itself
    await expect(orRefusal(ok, same.address, () => Promise.reject(new Error('other')))).rejects.toThrow(/^other$/);
  });
});

describe('refuseUpgrade', () => {
  it('answers the refusal status with the reason (made printable) and this member protocol headers', async () => {
    const server = createServer();
    server.on('upgrade', (_req, socket) => refuseUpgrade(socket, { status: 426, reason: 'why\u0001' }));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise<void>((r) => server.close(() => r())));
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request({
        port: (server.address() as AddressInfo).port,
        host: '127.0.0.1',
        path: PEER_API_PATH,
        headers: { connection: 'upgrade', upgrade: 'websocket' },
      });
      req.on('response', resolve);
      req.on('error', reject);
      req.end();
    });
    res.resume();
    expect(res.statusCode).toBe(426);
    expect(res.statusMessage).toBe('Upgrade Required');
    expect(res.headers[PEER_REFUSAL_HEADER]).toBe('why?');
    expect(res.headers[PEER_PROTOCOL_HEADER]).toBe(String(PEER_PROTOCOL_VERSION));
  });
});

describe('the Raft link', () => {
  /** A member's link check that changes when the member is replaced by one of another release. */
  function replaceable(first: LinkCheck): LinkCheck & { now: LinkCheck } {
    return {
      now: first,
      get headers() {
        return this.now.headers;
      },
      judge(headers) {
        return this.now.judge(headers);
      },
    };
  }
  /** Speaks `version`, accepts anyone (only the other side can refuse). */
  const lax = (version: number): LinkCheck => ({ headers: peerLinkCheck(version).headers, judge: () => null });

  it('a refusal is cleared once that peer passes the check on a Raft link of its own (no peer-API link)', async () => {
    const ahead = peerLinkCheck(PEER_PROTOCOL_VERSION + 2);
    // 'a' dials 'b'. First a member this build refuses: by the acceptor (the dialer's request), then by the dialer
    // (the acceptor's 101 answer); then that member is replaced by one of this build.
    const cases = [
      { a: ahead, b: PEER_LINK, refuser: 'b', refused: 'a' },
      { a: PEER_LINK, b: lax(PEER_PROTOCOL_VERSION + 2), refuser: 'a', refused: 'b' },
    ] as const;
    for (const c of cases) {
      const logs = { a: new RefusalLog(() => {}), b: new RefusalLog(() => {}) };
      const checks = { a: replaceable(c.a), b: replaceable(c.b) };
      const member = (id: 'a' | 'b') => {
        const t = new WebSocketTransport({
          id,
          clusterId: 'c1',
          backoff: { min_ms: 10, max_ms: 50 },
          ping_ms: 0,
          ...raftLinkOptions(logs[id], () => {}, checks[id]),
        });
        cleanup.push(() => t.close());
        return t;
      };
      const b = member('b');
      const a = member('a');
      b.addPeer('a', 'unused');
      a.addPeer('b', await b.listen(0));
      const reason = () => logs[c.refuser].reason('/raft', c.refused);
      await waitFor(() => reason() !== null, 5_000, `${c.refuser} refuses ${c.refused}`);
      expect(reason()).toMatch(/speaks peer protocol/);
      checks[c.refused].now = PEER_LINK;
      await waitFor(() => reason() === null, 5_000, `${c.refuser} accepts ${c.refused} again`);
      await waitFor(() => a.peers()[0]!.state === 'connected', 5_000, 'the Raft link is up');
    }
  });
});

describe('the member view', () => {
  it('shows a member refused for its peer protocol as offline, with the refusal; one never dialled without', async () => {
    const refusal = { reason: 'the peer (Keel 9.0.0) speaks peer protocol 9; …', release: '9.0.0' };
    let asked = 0;
    const source: MemberSource = {
      id: 'n1',
      members: () => ({
        leader: 'n1',
        members: [
          { id: 'n1', address: 'a1', voter: true },
          { id: 'n2', address: 'a2', voter: true },
          { id: 'n3', address: '', voter: true },
        ],
      }),
      status: () => ({ id: 'n1' }) as MemberStatus,
      peer: (id) => {
        asked++;
        if (id === 'n3') throw new Error('no address known');
        return {
          api: { status: { query: () => Promise.reject(new Error('refused')) } },
          refusal: () => refusal,
        } as unknown as PeerClient;
      },
      keepOnly: (ids) => kept.push([...ids]),
    };
    const kept: string[][] = [];
    const monitor = new MemberMonitor(source);
    await monitor.poll();
    // each poll tells the source the members' ids, so it can close the peer clients of removed ones
    expect(kept).toEqual([['n1', 'n2', 'n3']]);
    asked = 0;
    const view = monitor.view();
    expect(asked).toBe(0); // the view (JWTs, controllers list) looks up no peer client; list-members asks refusal()
    expect(view.map((m) => [m.id, m.online, monitor.refusal(m.id)])).toEqual([
      ['n1', true, null],
      ['n2', false, refusal],
      ['n3', false, null],
    ]);
    // members never seen online keep the date they were first listed, poll after poll (the controllers list's date)
    const listed = view.map((m) => m.listedAt);
    await new Promise((r) => setTimeout(r, 5));
    await monitor.poll();
    expect(monitor.view().map((m) => [m.lastJoinedAt === null, m.listedAt])).toEqual(
      view.map((m, i) => [m.id !== 'n1', listed[i]]),
    );
  });
});
