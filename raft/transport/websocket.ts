/**
 * Raft transport over WebSockets (`ws`), msgpack-framed.
 *
 * - One connection per peer pair: the node with the lexicographically smaller id dials; the other accepts.
 *   Both directions share it. A newer inbound connection from the same peer replaces the older one.
 * - Handshake: cluster id, sender and receiver ids in upgrade headers; optional HMAC with a shared secret;
 *   optional mutual TLS where the certificate must name the peer id.
 * - Reconnect with exponential backoff and jitter, bounded by backoff.max_ms.
 * - Frame size limit (maxPayload_bytes, enforced by ws on receive, respected when batching on send) and a
 *   bounded per-peer queue: a full queue drops the message and reports the peer unreachable.
 * - Serves on its own http(s) server (listen) or on an existing one (attach / handleUpgrade with a path).
 */
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { PeerCertificate } from 'node:tls';
import { WebSocket, WebSocketServer } from 'ws';
import type { Message, NodeId } from '../types.js';
import { backoffDelay_ms } from './backoff.js';
import { decodeFrame, encodeMessage, type FrameError } from './codec.js';
import {
  answerWithLinkHeaders,
  handshakeHeaders,
  type LinkCheck,
  LinkRefusedError,
  type PeerIdFromCert,
  peerIdFromCommonName,
  rejectUpgrade,
  verifyHandshake,
} from './handshake.js';
import { SendQueue } from './send-queue.js';
import {
  MAX_HANDLERS,
  type MessageHandler,
  type PeerConnState,
  type PeerStats,
  type Transport,
  type UnreachableHandler,
} from './transport.js';

/** Messages that start an election: sent at most once per election timeout, each worth an immediate redial. */
const ELECTION_REQUESTS: ReadonlySet<Message['type']> = new Set(['preVote', 'vote', 'timeoutNow']);

export interface TransportTlsOptions {
  key: string | Buffer;
  cert: string | Buffer;
  /** CA(s) that sign peer certificates. */
  ca: string | Buffer | Array<string | Buffer>;
  /** Extracts the node id a certificate vouches for. Default: subject CN. */
  peerIdFromCert?: PeerIdFromCert;
}

export interface WebSocketTransportOptions {
  id: NodeId;
  clusterId: string;
  /** Upgrade path served and dialed. Default '/raft'. */
  path?: string;
  /** Shared secret: handshakes carry an HMAC of cluster/from/to/timestamp. */
  secret?: string;
  tls?: TransportTlsOptions;
  /**
   * Max bytes of one frame (several messages). Default 16 MiB. RaftNode.start checks that the core's maxMsgBytes
   * and snapshotChunkBytes plus MESSAGE_OVERHEAD_BYTES fit. Every member should use the same value.
   */
  maxPayload_bytes?: number;
  /** Max messages per frame on receive. Default 65 536. */
  maxFrameMessages?: number;
  /** Per-peer send queue bounds. Defaults 8192 messages, 64 MiB. */
  maxQueue_msgs?: number;
  maxQueue_bytes?: number;
  /** Bytes handed to a socket and not yet written, per peer, before queueing instead. Default 8 MiB. */
  maxInflight_bytes?: number;
  /** Reconnect backoff bounds. Default 50 ms … 2 s. */
  backoff?: { min_ms: number; max_ms: number };
  /** Liveness pings; a peer that misses one interval is disconnected. Default 5000; 0 disables. */
  ping_ms?: number;
  handshakeTimeout_ms?: number;
  random?: () => number;
  /** Diagnostics hook (failed dials, rejected handshakes, bad frames). */
  onError?: (err: Error, peer: NodeId | null) => void;
  /**
   * The application's check of each link (e.g. a protocol version): its headers go with every dial and every
   * accepted upgrade's 101 answer. It judges the peer's headers: a dialing peer's request (refused with the
   * verdict's status and reason), and the accepting peer's 101 answer (the link is closed and redialled on the
   * backoff schedule). Each refusal is reported to onError as a LinkRefusedError, each pass to onLinkAccepted.
   */
  link?: LinkCheck;
  /**
   * A link with `peer` passed the link check (its request, when it dialed; its 101 answer, when this side dialed):
   * a peer refused earlier is accepted now. Only with `link`.
   */
  onLinkAccepted?: (peer: NodeId) => void;
}

interface Conn {
  ws: WebSocket;
  inflight_bytes: number;
  alive: boolean;
}

interface Peer {
  id: NodeId;
  address: string;
  dialer: boolean;
  state: PeerConnState;
  conn: Conn | null;
  queue: SendQueue;
  attempt: number;
  timer: NodeJS.Timeout | null;
  flushScheduled: boolean;
  sent: number;
  received: number;
  dropped: number;
  connects: number;
}

export class WebSocketTransport implements Transport {
  readonly id: NodeId;
  readonly path: string;
  private readonly opts: WebSocketTransportOptions;
  /** Max bytes of one frame: ws refuses larger ones on receive; a larger message is dropped on send. */
  readonly maxPayload_bytes: number;
  private readonly maxFrameMessages: number;
  private readonly maxInflight_bytes: number;
  private readonly backoff: { min_ms: number; max_ms: number };
  private readonly peerIdFromCert: PeerIdFromCert;
  private readonly random: () => number;
  private readonly wss: WebSocketServer;
  private readonly peerMap = new Map<NodeId, Peer>();
  private readonly messageHandlers: MessageHandler[] = [];
  private readonly unreachableHandlers: UnreachableHandler[] = [];
  private readonly pingTimer: NodeJS.Timeout | null;
  private server: Server | null = null;
  private attached: { server: Server; listener: (req: IncomingMessage, socket: Duplex, head: Buffer) => void } | null =
    null;
  private closed = false;

  constructor(opts: WebSocketTransportOptions) {
    if (opts.id.length === 0 || opts.clusterId.length === 0)
      throw new Error('raft transport: id and clusterId required');
    this.opts = opts;
    this.id = opts.id;
    this.path = opts.path ?? '/raft';
    this.maxPayload_bytes = opts.maxPayload_bytes ?? 16 << 20;
    this.maxFrameMessages = opts.maxFrameMessages ?? 65_536;
    this.maxInflight_bytes = opts.maxInflight_bytes ?? 8 << 20;
    this.backoff = opts.backoff ?? { min_ms: 50, max_ms: 2000 };
    this.peerIdFromCert = opts.tls?.peerIdFromCert ?? peerIdFromCommonName;
    this.random = opts.random ?? Math.random;
    this.wss = new WebSocketServer({
      noServer: true,
      maxPayload: this.maxPayload_bytes,
      perMessageDeflate: false,
      clientTracking: false,
    });
    if (opts.link !== undefined) answerWithLinkHeaders(this.wss, opts.link);
    const ping_ms = opts.ping_ms ?? 5000;
    this.pingTimer = ping_ms > 0 ? setInterval(() => this.pingAll(), ping_ms) : null;
    this.pingTimer?.unref();
  }

  // ---- serving --------------------------------------------------------------------------------------------

  /** Starts an own http (or, with tls, https with client certificates required) server. Returns the bound address. */
  async listen(port: number, host = '127.0.0.1'): Promise<string> {
    if (this.server !== null || this.attached !== null) throw new Error('raft transport: already serving');
    const tls = this.opts.tls;
    const server =
      tls === undefined
        ? createHttpServer()
        : createHttpsServer({ key: tls.key, cert: tls.cert, ca: tls.ca, requestCert: true, rejectUnauthorized: true });
    server.on('request', (_req, res) => {
      res.writeHead(426, { 'content-type': 'text/plain' }).end('raft transport: upgrade required\n');
    });
    server.on('upgrade', (req, socket, head) => {
      if (!this.handleUpgrade(req, socket, head)) reject(socket, 404, 'no such path');
    });
    this.server = server;
    await new Promise<void>((resolve, rejectListen) => {
      server.once('error', rejectListen);
      server.listen(port, host, () => {
        server.off('error', rejectListen);
        resolve();
      });
    });
    const addr = server.address() as AddressInfo;
    return `${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`;
  }

  /** Serves the raft path on an existing server; other upgrade requests are left to its other listeners. */
  attach(server: Server): void {
    if (this.server !== null || this.attached !== null) throw new Error('raft transport: already serving');
    const listener = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
      this.handleUpgrade(req, socket, head);
    };
    server.on('upgrade', listener);
    this.attached = { server, listener };
  }

  /**
   * Handles an HTTP upgrade request if it is for this transport's path (returns true), else returns false
   * and leaves the socket alone. Rejected handshakes get an HTTP error status and a reason header.
   */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const url = req.url ?? '';
    const q = url.indexOf('?');
    if ((q < 0 ? url : url.slice(0, q)) !== this.path) return false;
    if (this.closed) {
      reject(socket, 503, 'transport closed');
      return true;
    }
    const verdict = verifyHandshake(req, {
      cluster: this.opts.clusterId,
      self: this.id,
      secret: this.opts.secret ?? null,
      tls: this.opts.tls !== undefined,
      peerIdFromCert: this.peerIdFromCert,
      isKnownPeer: (id) => this.peerMap.has(id),
      now_ms: Date.now(),
    });
    if (!verdict.ok) {
      this.report(new Error(`raft transport: rejected handshake: ${verdict.reason}`), null);
      reject(socket, verdict.status, verdict.reason);
      return true;
    }
    const link = this.opts.link;
    if (link !== undefined) {
      const refusal = link.judge(req.headers);
      if (refusal !== null) {
        this.report(new LinkRefusedError(verdict.peer, refusal.reason), verdict.peer);
        reject(socket, refusal.status, refusal.reason, link.headers);
        return true;
      }
      this.opts.onLinkAccepted?.(verdict.peer);
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const p = this.peerMap.get(verdict.peer);
      if (p === undefined || this.closed) {
        ws.terminate();
        return;
      }
      this.adopt(p, ws);
    });
    return true;
  }

  // ---- Transport ------------------------------------------------------------------------------------------

  send(msgs: Message[]): void {
    if (this.closed) return;
    let drops: Map<NodeId, Message[]> | null = null;
    const drop = (to: NodeId, m: Message): void => {
      drops ??= new Map();
      const list = drops.get(to);
      if (list === undefined) drops.set(to, [m]);
      else list.push(m);
    };
    for (const m of msgs) {
      if (m.from !== this.id) throw new Error(`raft transport: message from ${m.from} sent by ${this.id}`);
      const p = this.peerMap.get(m.to);
      if (p === undefined) {
        drop(m.to, m);
        continue;
      }
      const bytes = encodeMessage(m);
      if (bytes.length > this.maxPayload_bytes) {
        this.report(new Error(`raft transport: ${m.type} of ${bytes.length} bytes exceeds maxPayload`), m.to);
        p.dropped++;
        drop(m.to, m);
        continue;
      }
      if (!p.queue.push(m, bytes)) {
        p.dropped++;
        drop(m.to, m);
        continue;
      }
      if (ELECTION_REQUESTS.has(m.type)) this.dialNowIfBackingOff(p);
      this.scheduleFlush(p);
    }
    if (drops !== null) for (const [to, list] of drops as Map<NodeId, Message[]>) this.unreachable(to, list);
  }

  onMessage(handler: MessageHandler): void {
    if (this.messageHandlers.length >= MAX_HANDLERS) throw new Error('raft transport: too many message handlers');
    this.messageHandlers.push(handler);
  }

  onUnreachable(handler: UnreachableHandler): void {
    if (this.unreachableHandlers.length >= MAX_HANDLERS) throw new Error('raft transport: too many handlers');
    this.unreachableHandlers.push(handler);
  }

  addPeer(id: NodeId, address: string): void {
    if (id === this.id || this.closed) return;
    const existing = this.peerMap.get(id);
    if (existing !== undefined) {
      if (existing.address === address) return;
      existing.address = address;
      if (existing.dialer) this.disconnect(existing, 'address changed');
      return;
    }
    const p: Peer = {
      id,
      address,
      dialer: this.id < id,
      state: 'waiting',
      conn: null,
      queue: new SendQueue(this.opts.maxQueue_msgs ?? 8192, this.opts.maxQueue_bytes ?? 64 << 20),
      attempt: 0,
      timer: null,
      flushScheduled: false,
      sent: 0,
      received: 0,
      dropped: 0,
      connects: 0,
    };
    this.peerMap.set(id, p);
    if (p.dialer) this.dial(p);
  }

  removePeer(id: NodeId): void {
    this.dropPeer(id, false);
  }

  /** Forgets a peer; its connection is closed gracefully, or cut at once (`terminate`) when shutting down. */
  private dropPeer(id: NodeId, terminate: boolean): void {
    const p = this.peerMap.get(id);
    if (p === undefined) return;
    this.peerMap.delete(id);
    if (p.timer !== null) clearTimeout(p.timer);
    p.timer = null;
    p.queue.clear();
    const conn = p.conn;
    p.conn = null;
    if (conn === null) return;
    if (terminate) conn.ws.terminate();
    else conn.ws.close(1001, 'peer removed');
  }

  peers(): PeerStats[] {
    return [...this.peerMap.values()].map((p) => ({
      id: p.id,
      address: p.address,
      state: p.state,
      dialer: p.dialer,
      queued_msgs: p.queue.length,
      queued_bytes: p.queue.bytes,
      sent_msgs: p.sent,
      received_msgs: p.received,
      dropped_msgs: p.dropped,
      connects: p.connects,
    }));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.pingTimer !== null) clearInterval(this.pingTimer);
    // Terminate rather than close: a dead peer would hold a closing handshake open for ws's 30 s timeout.
    for (const id of [...this.peerMap.keys()]) this.dropPeer(id, true);
    if (this.attached !== null) {
      this.attached.server.off('upgrade', this.attached.listener);
      this.attached = null;
    }
    const server = this.server;
    this.server = null;
    if (server !== null) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  // ---- connections ----------------------------------------------------------------------------------------

  /**
   * An election needs this peer now: if this side dials it and is waiting out a reconnect backoff (up to
   * backoff.max_ms), dial at once. Without it, after a peer restarted only the accepting side (the larger id) has
   * no way to reach its dialer, so the two survivors of a later leader's death could not exchange (pre-)votes
   * until the dialer's backoff timer fired: a failover of up to max_ms. Elections are rare (a node requests votes
   * at most once per election timeout), so this cannot hammer a dead peer; the backoff attempt count is kept.
   */
  private dialNowIfBackingOff(p: Peer): void {
    if (!p.dialer || p.state !== 'backoff' || p.timer === null) return;
    clearTimeout(p.timer);
    p.timer = null;
    this.dial(p);
  }

  private dial(p: Peer): void {
    if (this.closed || this.peerMap.get(p.id) !== p) return;
    p.timer = null;
    p.state = 'connecting';
    const url = `${this.opts.tls === undefined ? 'ws' : 'wss'}://${p.address}${this.path}`;
    const headers = {
      ...this.opts.link?.headers,
      ...handshakeHeaders(this.opts.clusterId, this.id, p.id, this.opts.secret ?? null, Date.now()),
    };
    const peerIdFromCert = this.peerIdFromCert;
    let ws: WebSocket;
    try {
      ws = this.connectTo(url, headers, p.id, peerIdFromCert);
    } catch (err) {
      // A malformed address: report it and retry on the backoff schedule (the address may be fixed by addPeer).
      this.report(err as Error, p.id);
      p.state = 'backoff';
      p.timer = setTimeout(() => this.dial(p), backoffDelay_ms(p.attempt++, this.backoff, this.random));
      return;
    }
    const conn: Conn = { ws, inflight_bytes: 0, alive: true };
    p.conn = conn;
    const link = this.opts.link;
    if (link !== undefined) {
      ws.once('upgrade', (res) => {
        const refusal = link.judge(res.headers);
        if (refusal === null) {
          this.opts.onLinkAccepted?.(p.id);
          return;
        }
        this.report(new LinkRefusedError(p.id, refusal.reason), p.id);
        ws.terminate(); // closes before 'open': redialled on the backoff schedule
      });
    }
    ws.on('open', () => {
      if (p.conn !== conn) return;
      this.connected(p);
    });
    this.wire(p, conn);
  }

  private connectTo(
    url: string,
    headers: Record<string, string>,
    peer: NodeId,
    peerIdFromCert: PeerIdFromCert,
  ): WebSocket {
    const tls = this.opts.tls;
    return new WebSocket(url, {
      headers,
      maxPayload: this.maxPayload_bytes,
      perMessageDeflate: false,
      handshakeTimeout: this.opts.handshakeTimeout_ms ?? 5000,
      ...(tls === undefined
        ? {}
        : {
            key: tls.key,
            cert: tls.cert,
            ca: tls.ca,
            // The server must present a certificate naming the peer we meant to reach (addresses may be IPs).
            checkServerIdentity: ((_host: string, cert: PeerCertificate) =>
              peerIdFromCert(cert) === peer
                ? undefined
                : new Error(`raft transport: server certificate names ${peerIdFromCert(cert)}, not ${peer}`)) as never,
          }),
    });
  }

  private adopt(p: Peer, ws: WebSocket): void {
    const old = p.conn;
    const conn: Conn = { ws, inflight_bytes: 0, alive: true };
    p.conn = conn;
    old?.ws.close(4000, 'replaced by a newer connection');
    this.wire(p, conn);
    this.connected(p);
  }

  private connected(p: Peer): void {
    p.state = 'connected';
    p.attempt = 0;
    p.connects++;
    this.flush(p);
  }

  private wire(p: Peer, conn: Conn): void {
    const { ws } = conn;
    ws.on('message', (data, isBinary) => {
      if (p.conn !== conn) return;
      this.onFrame(p, conn, data as Buffer, isBinary);
    });
    ws.on('pong', () => {
      conn.alive = true;
    });
    ws.on('error', (err) => this.report(err, p.id));
    ws.on('close', () => {
      if (p.conn !== conn) return;
      p.conn = null;
      const dropped = p.queue.clear();
      p.dropped += dropped.length;
      if (this.closed || this.peerMap.get(p.id) !== p) return;
      this.unreachable(p.id, dropped);
      if (p.dialer) {
        p.state = 'backoff';
        const delay = backoffDelay_ms(p.attempt++, this.backoff, this.random);
        p.timer = setTimeout(() => this.dial(p), delay);
      } else {
        p.state = 'waiting';
      }
    });
  }

  private disconnect(p: Peer, reason: string): void {
    const conn = p.conn;
    if (conn === null) {
      if (p.timer !== null) {
        clearTimeout(p.timer);
        this.dial(p);
      }
      return;
    }
    conn.ws.close(1000, reason);
  }

  private onFrame(p: Peer, conn: Conn, data: Buffer, isBinary: boolean): void {
    if (!isBinary) {
      conn.ws.close(1003, 'binary frames only');
      return;
    }
    let msgs: Message[];
    try {
      msgs = decodeFrame(data, this.maxFrameMessages);
    } catch (err) {
      this.report(err as FrameError, p.id);
      conn.ws.close(1007, 'bad frame');
      return;
    }
    for (const m of msgs) {
      if (m.from !== p.id || m.to !== this.id) {
        this.report(new Error(`raft transport: ${p.id} sent a message from ${m.from} to ${m.to}`), p.id);
        conn.ws.close(1008, 'message ids do not match the connection');
        return;
      }
    }
    p.received += msgs.length;
    for (const m of msgs) for (const h of this.messageHandlers) h(m);
  }

  private scheduleFlush(p: Peer): void {
    if (p.flushScheduled) return;
    p.flushScheduled = true;
    queueMicrotask(() => {
      p.flushScheduled = false;
      this.flush(p);
    });
  }

  private flush(p: Peer): void {
    const conn = p.conn;
    if (conn === null || conn.ws.readyState !== WebSocket.OPEN) return;
    while (p.queue.length > 0 && conn.inflight_bytes < this.maxInflight_bytes) {
      const parts = p.queue.takeFrame(this.maxPayload_bytes);
      const frame = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
      conn.inflight_bytes += frame.length;
      p.sent += parts.length;
      conn.ws.send(frame, { binary: true }, (err) => {
        conn.inflight_bytes -= frame.length;
        if (err === undefined || err === null) {
          if (p.queue.length > 0 && p.conn === conn) this.scheduleFlush(p);
        }
      });
    }
  }

  private pingAll(): void {
    for (const p of this.peerMap.values()) {
      const conn = p.conn;
      if (conn === null || conn.ws.readyState !== WebSocket.OPEN) continue;
      if (!conn.alive) {
        this.report(new Error(`raft transport: ${p.id} missed a ping`), p.id);
        conn.ws.terminate();
        continue;
      }
      conn.alive = false;
      conn.ws.ping();
    }
  }

  private unreachable(peer: NodeId, dropped: Message[]): void {
    for (const h of this.unreachableHandlers) h(peer, dropped);
  }

  private report(err: Error, peer: NodeId | null): void {
    this.opts.onError?.(err, peer);
  }
}

/** Refuses a dialing peer: `status`, the reason in its header, and any link headers. */
function reject(socket: Duplex, status: number, reason: string, headers: Readonly<Record<string, string>> = {}): void {
  rejectUpgrade(socket, status, { 'x-keel-raft-reason': reason, ...headers });
}
