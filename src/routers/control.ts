/**
 * The router control listener (docs/routers.md, "Router presence"): enrolled routers connect here over mutual TLS
 * with the client certificate their enrollment gave them, open a WebSocket on ROUTER_CONTROL_PATH and speak tRPC
 * on it (as the cluster's peer API does, src/cluster/peer-api.ts). Their first and only call is `hello` (version,
 * hostname, advertised listeners); from then until the connection ends the router is online on this controller
 * (src/routers/presence.ts).
 *
 * Refused at the upgrade, with nothing of the router's state changed: another path (404), a full listener (503), a
 * certificate that is not a router's enrolled one (401), a disabled router (403), a router already connected (409).
 * A connection without a hello within the hello timeout, or whose message exceeds the hello size, is closed.
 * A connected router is disconnected when it is disabled, deleted or re-enrolled (its certificate changes), as
 * OpenZiti disconnects disabled and re-enrolled routers.
 */
import type { IncomingMessage } from 'node:http';
import type { Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { initTRPC, TRPCError } from '@trpc/server';
import { getWSConnectionHandler } from '@trpc/server/adapters/ws';
import { type WebSocket, WebSocketServer } from 'ws';
import { rejectUpgrade } from '../../raft/index.js';
import type { Change } from '../../storage/derived.js';
import type { Row } from '../../storage/types.js';
import type { Services } from '../api/services.js';
import { dialAddress } from '../cluster/peer-address.js';
import { routerByFingerprint } from '../model/router-rows.js';
import { fingerprintOfDer } from '../pki/fingerprint.js';
import {
  closeMutualTlsServer,
  createMutualTlsServer,
  listenOn,
  MTLS_HANDSHAKE_TIMEOUT_MS,
} from '../util/mtls-server.js';
import { type OnlineRouter, routerPresenceOf } from './presence.js';

export const ROUTER_CONTROL_PATH = '/router-control';

/** Keel's bounds on the router control listener (each overridable in ControllerOptions.routerControl). */
export const ROUTER_CONTROL_DEFAULTS = {
  /** Open control connections (hello or not) beyond which an upgrade is refused with 503. */
  maxConnections: 1_000,
  /** The largest message a router may send (its hello is the only one): larger closes the connection (1009). */
  maxHello_bytes: 16 * 1024,
  /** How long a connection may stay without its hello before it is closed (4408). */
  helloTimeout_ms: 10_000,
  /** A quiet connection is pinged after this long and closed without an answer within pongWait_ms. */
  ping_ms: 15_000,
  pongWait_ms: 5_000,
} as const;

/**
 * TLS handshakes one address may have unfinished on the router control listener: routers behind one NAT that
 * reconnect at once (a controller restart) handshake within milliseconds each, and one refused retries.
 */
export const ROUTER_HANDSHAKES_PER_ADDRESS = 64;

/** The most listeners one hello may advertise, and the longest strings it may carry (Keel's bounds). */
export const MAX_HELLO_LISTENERS = 16;
const MAX_ADDRESS_CHARS = 300;
const MAX_HOSTNAME_CHARS = 253;
const MAX_VERSION_FIELD_CHARS = 64;

/** WebSocket close codes of the control connection. */
export const CLOSE = {
  helloTimeout: 4408,
  badHello: 4400,
  /** Disabled, deleted, re-enrolled, or the controller is stopping. */
  revoked: 4403,
  stopping: 1001,
} as const;

export interface RouterControlOptions {
  host: string;
  /** 0 = an ephemeral port (tests). */
  port: number;
  /**
   * `host:port` routers dial to reach this listener (`--router-advertise`), reported as this member's `ctrlAddress`;
   * default: the listen host (this machine's name when it listens on every interface) and the bound port.
   */
  advertise?: string;
  maxConnections?: number;
  maxHello_bytes?: number;
  helloTimeout_ms?: number;
  ping_ms?: number;
  pongWait_ms?: number;
}

export interface RouterHello {
  version: string;
  revision: string;
  buildDate: string;
  os: string;
  arch: string;
  hostname: string;
  /** Advertised listener addresses, `<protocol>:<host>:<port>` (e.g. `tls:router.example.com:3022`, `wss:…:443`). */
  listeners: string[];
}

function bad(message: string): TRPCError {
  return new TRPCError({ code: 'BAD_REQUEST', message });
}

function text(o: Record<string, unknown>, name: string, max: number, required: boolean): string {
  const v = o[name];
  if (v === undefined && !required) return '';
  if (typeof v !== 'string' || (required && v.length === 0) || v.length > max) {
    throw bad(`${name}: a string of ${required ? 1 : 0} to ${max} characters`);
  }
  return v;
}

/** How long a stopping controller waits for routers to answer its close frames before dropping their sockets. */
const STOP_GRACE_MS = 2_000;

const LISTENER = /^([a-z][a-z0-9]{0,15}):(\[[0-9a-fA-F:.]+\]|[^\s:[\]/]+):(\d{1,5})$/;

/** The protocol → address map of a hello's listeners (one address per protocol, as OpenZiti's map holds). */
export function protocolsOf(listeners: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const address of listeners) {
    const m = LISTENER.exec(address);
    const port = Number(m?.[3]);
    if (!m || port < 1 || port > 65_535)
      throw bad(`listeners: ${JSON.stringify(address)} is not <protocol>:<host>:<port>`);
    if (Object.hasOwn(out, m[1]!)) throw bad(`listeners: more than one address for protocol ${m[1]}`);
    out[m[1]!] = address;
  }
  return out;
}

/** Checks a hello's shape and bounds (the message size is bounded before: maxHello_bytes). */
export function parseHello(v: unknown): RouterHello {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw bad('hello: an object');
  const o = v as Record<string, unknown>;
  const listeners = o.listeners ?? [];
  if (!Array.isArray(listeners) || listeners.length > MAX_HELLO_LISTENERS) {
    throw bad(`listeners: at most ${MAX_HELLO_LISTENERS} addresses`);
  }
  for (const l of listeners) {
    if (typeof l !== 'string' || l.length > MAX_ADDRESS_CHARS)
      throw bad(`listeners: strings of at most ${MAX_ADDRESS_CHARS}`);
  }
  return {
    version: text(o, 'version', MAX_VERSION_FIELD_CHARS, true),
    revision: text(o, 'revision', MAX_VERSION_FIELD_CHARS, false),
    buildDate: text(o, 'buildDate', MAX_VERSION_FIELD_CHARS, false),
    os: text(o, 'os', MAX_VERSION_FIELD_CHARS, false),
    arch: text(o, 'arch', MAX_VERSION_FIELD_CHARS, false),
    hostname: text(o, 'hostname', MAX_HOSTNAME_CHARS, false),
    listeners: listeners as string[],
  };
}

/** One router's control connection. */
interface Connection {
  routerId: string;
  /** The fingerprint of the certificate it connected with (a change of the router's means re-enrolled). */
  fingerprint: string;
  ws: WebSocket;
  hello: boolean;
  helloTimer: NodeJS.Timeout;
}

interface ControlContext {
  conn: Connection | undefined;
  onHello: (conn: Connection, hello: RouterHello) => { routerId: string; name: string };
}

// never a stack trace in an answer, whatever NODE_ENV says (it names the server's files)
const t = initTRPC.context<ControlContext>().create({ isDev: false });

export const routerControlRouter = t.router({
  hello: t.procedure.input(parseHello).mutation(({ ctx, input }) => {
    if (!ctx.conn) throw new TRPCError({ code: 'UNAUTHORIZED', message: 'not a router connection' });
    return ctx.onHello(ctx.conn, input);
  }),
});

export type RouterControlRouter = typeof routerControlRouter;

/**
 * The router whose enrolled certificate `socket`'s client presented (its fingerprint, as enrollment stored it), or
 * undefined: no certificate, or one no router holds now (an identity's, a forged one, one replaced by re-enrolling).
 */
function routerOfCertificate(svc: Services, socket: TLSSocket): { row: Row; fingerprint: string } | undefined {
  const raw = socket.getPeerCertificate()?.raw;
  if (!raw) return undefined;
  const fingerprint = fingerprintOfDer(raw);
  const row = routerByFingerprint(svc, fingerprint);
  return row === undefined ? undefined : { row, fingerprint };
}

/**
 * Connections whose certificate a cluster member waits to catch up on at once (admitsRouter); beyond, a certificate
 * it does not know is refused at once. Well below the sessions' cap (which these waits share with logins), so that
 * connections with other certificates of the same CA cannot take the slots logins need.
 */
export const MAX_ROUTER_CATCH_UPS = 8;

/** The admission checks still waiting for this member to catch up (admitsRouter), by connection, and their count. */
interface CatchUps {
  checks: WeakMap<TLSSocket, Promise<boolean>>;
  inFlight: number;
}

/**
 * Whether `socket`'s certificate is a router's: at once when this controller knows it; otherwise, on a cluster
 * member, once the member has caught up (a read barrier, bounded as the sessions' catch-up is: 4 s), since a router
 * enrolled through another member a moment ago may connect here before this member applied its enrollment; at most
 * MAX_ROUTER_CATCH_UPS such waits at once. The wait is recorded for the upgrade, which may arrive before it ends.
 */
function admitsRouter(svc: Services, socket: TLSSocket, waits: CatchUps): boolean | Promise<boolean> {
  if (routerOfCertificate(svc, socket) !== undefined) return true;
  if (svc.cluster === null || waits.inFlight >= MAX_ROUTER_CATCH_UPS) return false;
  waits.inFlight++;
  const check = svc.sessions
    .catchUp()
    .then(() => routerOfCertificate(svc, socket) !== undefined)
    .catch(() => false)
    .finally(() => waits.inFlight--);
  waits.checks.set(socket, check);
  return check;
}

/** The router control listener of one controller. */
export class RouterControl {
  private readonly conns = new Map<WebSocket, Connection>();
  /** Set once stop() began: new routers are refused (503). */
  private stopping = false;
  /** The connection that holds each router's presence (at most one per router). */
  private readonly byRouter = new Map<string, Connection>();
  private readonly wss: WebSocketServer;
  private readonly limits: Required<Omit<RouterControlOptions, 'host' | 'port' | 'advertise'>>;
  private unsubscribe: () => void = () => {};

  private constructor(
    private readonly svc: Services,
    private readonly server: Server,
    private readonly opts: RouterControlOptions,
    /** The admission checks still waiting for this member to catch up (admitsRouter). */
    private readonly catchingUp: CatchUps,
  ) {
    this.limits = {
      maxConnections: opts.maxConnections ?? ROUTER_CONTROL_DEFAULTS.maxConnections,
      maxHello_bytes: opts.maxHello_bytes ?? ROUTER_CONTROL_DEFAULTS.maxHello_bytes,
      helloTimeout_ms: opts.helloTimeout_ms ?? ROUTER_CONTROL_DEFAULTS.helloTimeout_ms,
      ping_ms: opts.ping_ms ?? ROUTER_CONTROL_DEFAULTS.ping_ms,
      pongWait_ms: opts.pongWait_ms ?? ROUTER_CONTROL_DEFAULTS.pongWait_ms,
    };
    this.wss = new WebSocketServer({ noServer: true, maxPayload: this.limits.maxHello_bytes });
    const handle = getWSConnectionHandler({
      wss: this.wss,
      router: routerControlRouter,
      createContext: ({ res }) => ({ conn: this.conns.get(res), onHello: (c, h) => this.onHello(c, h) }),
      keepAlive: { enabled: true, pingMs: this.limits.ping_ms, pongWaitMs: this.limits.pongWait_ms },
    });
    const upgrade = (req: IncomingMessage, socket: TLSSocket, head: Buffer) => {
      const refusal = this.admit(req, socket);
      if (typeof refusal === 'number') {
        // ended, and destroyed shortly after should the router not close its side (an upgrade socket has no timeout)
        rejectUpgrade(socket, refusal);
        return;
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => {
        this.open(ws, refusal);
        handle(ws, req);
      });
    };
    server.on('upgrade', (req: IncomingMessage, socket: TLSSocket, head: Buffer) => {
      // a certificate this member did not know at the handshake: the upgrade waits for its check, which catches up
      // first (refused, the listener closes the connection)
      const check = this.catchingUp.checks.get(socket);
      if (check === undefined) upgrade(req, socket, head);
      else {
        void check.then((ok) => ok && !socket.destroyed && upgrade(req, socket, head)).catch(() => socket.destroy());
      }
    });
    this.unsubscribe = svc.store.onPublish((changes) => this.onChanges(changes));
  }

  /**
   * Starts the listener: TLS with the API's certificate (or, without API TLS, one issued in memory by the signing
   * CA for `host`), asking for a client certificate that chains to this controller's CAs.
   */
  static async start(
    svc: Services,
    opts: RouterControlOptions,
    tls: { key: string; cert: string },
  ): Promise<RouterControl> {
    const pki = svc.pki;
    if (!pki) throw new Error('the router control listener needs the PKI');
    // twice the routers admitted: room for handshakes and refusals in flight; routers behind one NAT share an
    // address, so one address may hold any number of established connections, but only so many handshakes
    const sockets = 2 * (opts.maxConnections ?? ROUTER_CONTROL_DEFAULTS.maxConnections);
    const catchingUp: CatchUps = { checks: new WeakMap(), inFlight: 0 };
    const server = createMutualTlsServer(
      { key: tls.key, cert: tls.cert, ca: pki.caPems },
      {
        handshakeTimeout_ms: MTLS_HANDSHAKE_TIMEOUT_MS,
        maxConnections: sockets,
        maxHandshakesPerAddress: Math.min(sockets, ROUTER_HANDSHAKES_PER_ADDRESS),
        upgradeTimeout_ms: MTLS_HANDSHAKE_TIMEOUT_MS,
      },
      // only a router's enrolled certificate holds a connection: an identity's client certificate of the same CA
      // is closed as soon as its handshake is done, so identities cannot fill the listener and keep routers out
      (socket) => admitsRouter(svc, socket, catchingUp),
    );
    await listenOn(server, opts.port, opts.host);
    return new RouterControl(svc, server, opts, catchingUp);
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** The `host:port` routers dial: the advertised one, else the listen host and the bound port. */
  get address(): string {
    return this.opts.advertise ?? dialAddress(this.opts.host, this.port);
  }

  get connectionCount(): number {
    return this.conns.size;
  }

  /** Connections whose certificate this member is catching up on before it admits or refuses them (admitsRouter). */
  get catchUpsInFlight(): number {
    return this.catchingUp.inFlight;
  }

  /** The router a connection may be, or the HTTP status refusing it. */
  private admit(req: IncomingMessage, socket: TLSSocket): { routerId: string; fingerprint: string } | number {
    if ((req.url ?? '').split('?')[0] !== ROUTER_CONTROL_PATH) return 404;
    // stopping: no router joins the connections being closed (it would hold the listener's close up)
    if (this.stopping) return 503;
    if (this.conns.size >= this.limits.maxConnections) {
      this.svc.log('warn', 'router control: connection refused, listener full', { max: this.limits.maxConnections });
      return 503;
    }
    const found = routerOfCertificate(this.svc, socket);
    if (found === undefined) return 401;
    const { row, fingerprint } = found;
    if (!row.isVerified) return 401;
    if (row.disabled === true) {
      this.svc.log('info', 'router control: disabled router refused', { routerId: row.id });
      return 403;
    }
    if (this.byRouter.has(row.id)) return 409;
    return { routerId: row.id, fingerprint };
  }

  private open(ws: WebSocket, who: { routerId: string; fingerprint: string }): void {
    const helloTimer = setTimeout(() => ws.close(CLOSE.helloTimeout, 'no hello'), this.limits.helloTimeout_ms);
    const conn: Connection = { ...who, ws, hello: false, helloTimer };
    this.conns.set(ws, conn);
    ws.on('close', () => {
      clearTimeout(conn.helloTimer);
      this.conns.delete(ws);
      this.release(conn);
    });
    // a second connection of the same router may have been admitted meanwhile (both upgrades in flight)
    if (this.byRouter.has(who.routerId)) {
      ws.close(CLOSE.revoked, 'already connected');
      return;
    }
    this.byRouter.set(who.routerId, conn);
    routerPresenceOf(this.svc).connecting(who.routerId);
  }

  /** The connection no longer holds its router's presence (closed or revoked); at once, not at the close. */
  private release(conn: Connection): void {
    if (this.byRouter.get(conn.routerId) !== conn) return;
    this.byRouter.delete(conn.routerId);
    routerPresenceOf(this.svc).disconnected(conn.routerId);
    if (conn.hello) this.svc.log('info', 'router disconnected', { routerId: conn.routerId });
  }

  private onHello(conn: Connection, hello: RouterHello): { routerId: string; name: string } {
    if (conn.hello) throw bad('hello: already received');
    if (this.byRouter.get(conn.routerId) !== conn) throw new TRPCError({ code: 'UNAUTHORIZED', message: 'revoked' });
    const row = this.svc.get('transit-routers', conn.routerId);
    if (!row) throw new TRPCError({ code: 'UNAUTHORIZED', message: 'router deleted' });
    let protocols: Record<string, string>;
    try {
      protocols = protocolsOf(hello.listeners);
    } catch (err) {
      // a router that cannot say who it is goes away (OpenZiti closes a control channel with a bad hello)
      setImmediate(() => conn.ws.close(CLOSE.badHello, 'bad hello'));
      throw err;
    }
    clearTimeout(conn.helloTimer);
    conn.hello = true;
    const online: OnlineRouter = {
      routerId: conn.routerId,
      hostname: hello.hostname,
      protocols,
      versionInfo: {
        version: hello.version,
        revision: hello.revision,
        buildDate: hello.buildDate,
        os: hello.os,
        arch: hello.arch,
      },
      connectedAt_ms: this.svc.clock.now(),
    };
    routerPresenceOf(this.svc).hello(online);
    this.svc.log('info', 'router connected', { routerId: conn.routerId, version: hello.version });
    return { routerId: conn.routerId, name: String(row.name ?? '') };
  }

  /** Disconnects routers that were disabled, deleted or re-enrolled; forgets deleted ones. */
  private onChanges(changes: Change[]): void {
    for (const c of changes) {
      if (c.entity !== 'transit-routers') continue;
      const conn = this.byRouter.get(c.id);
      if (conn && (!c.after || c.after.disabled === true || c.after.fingerprint !== conn.fingerprint)) {
        this.release(conn);
        conn.ws.close(CLOSE.revoked, 'router disabled, deleted or re-enrolled');
      }
      // after the release, which records the router as gone
      if (!c.after) routerPresenceOf(this.svc).forget(c.id);
    }
  }

  /**
   * Closes every router's connection (a close frame, then STOP_GRACE_MS for the router to answer it, then the socket
   * is dropped) and the listener: a router that never answers the close does not hold the stop up (ws's
   * `WebSocketServer.close` calls back only once every client has closed, which ws bounds at 30 s).
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.unsubscribe();
    const open = [...this.conns.values()].map((conn) => conn.ws);
    for (const ws of open) ws.close(CLOSE.stopping, 'controller stopping');
    const closed = open.map((ws) =>
      ws.readyState === ws.CLOSED ? Promise.resolve() : new Promise<void>((r) => ws.once('close', () => r())),
    );
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(closed), new Promise<void>((r) => (timer = setTimeout(r, STOP_GRACE_MS)))]);
    clearTimeout(timer);
    // every socket the WebSocket server still holds, not only those open when the stop began
    for (const ws of open) ws.terminate();
    for (const ws of this.wss.clients) ws.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
    await closeMutualTlsServer(this.server);
  }
}
