import { createServer, type Server, type ServerOptions } from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';

/**
 * What one mutual-TLS listener holds at most, before any client has proven anything: the bounds that keep a client
 * without a certificate (or with one that may not use the listener) from making the process allocate without end.
 */
export interface MutualTlsLimits {
  /** A connection whose TLS handshake is not done within this is closed (Node's default is 120 s). */
  handshakeTimeout_ms: number;
  /** Connections open at once; a connection beyond is closed at once (Node's `maxConnections`). */
  maxConnections: number;
  /**
   * Connections from one remote address whose TLS handshake is not done yet; a connection beyond is closed at once.
   * A connection leaves the count when its handshake succeeds (it showed a certificate of the listener's CAs), so
   * clients that never finish a handshake from a few addresses cannot hold the listener against real members, and
   * members sharing an address (one machine, one NAT) may hold any number of established connections.
   */
  maxHandshakesPerAddress: number;
  /**
   * A connection that has not asked for its WebSocket upgrade within this after its handshake is closed: a client
   * with a good certificate cannot hold a connection (one of maxConnections) without using it.
   */
  upgradeTimeout_ms: number;
}

/** How long a TLS handshake may take on Keel's mutual-TLS listeners. */
export const MTLS_HANDSHAKE_TIMEOUT_MS = 10_000;

/**
 * The peer listener's: a cluster has a few members, each holding three links (Raft, peer API, forwards) to every
 * other one, and on one machine (`npm run cluster`, benchmarks) they all come from one address: a member of five
 * gets at most 12 links at once, three from each other member (a handshake refused is redialled on the link's
 * backoff). Clients that never finish a handshake need 32 addresses to fill the listener.
 */
export const PEER_LISTENER_LIMITS: MutualTlsLimits = {
  handshakeTimeout_ms: MTLS_HANDSHAKE_TIMEOUT_MS,
  maxConnections: 512,
  maxHandshakesPerAddress: 16,
  upgradeTimeout_ms: MTLS_HANDSHAKE_TIMEOUT_MS,
};

/**
 * An HTTPS server for WebSocket upgrades only (the peer and router-control listeners): it asks every client for a
 * certificate chaining to `ca` and refuses the handshake without one; a plain request gets 426 Upgrade Required.
 * Within `limits` (each listener passes its own): a handshake left unfinished is dropped, a connection that does
 * not ask for its upgrade in time is closed, and connections beyond the bounds are closed at once. `admits`: whose
 * certificate may hold a connection at all (the peer listener: a member's, never an identity's or a router's from
 * the same CA); a connection it refuses is closed as soon as its handshake is done, before any request is read. It
 * may answer later (a promise: a cluster member catching up before it refuses a certificate it does not know yet),
 * within the upgrade deadline (no answer by then is a refusal); meanwhile the upgrade request may be read (its
 * owner waits for the answer), and the connection is closed when the answer is a refusal.
 */
export function createMutualTlsServer(
  tls: Pick<ServerOptions, 'key' | 'cert' | 'ca'>,
  limits: MutualTlsLimits,
  admits: (socket: TLSSocket) => boolean | Promise<boolean> = () => true,
): Server {
  const server = createServer({
    key: tls.key,
    cert: tls.cert,
    ca: tls.ca,
    requestCert: true,
    rejectUnauthorized: true,
    handshakeTimeout: limits.handshakeTimeout_ms,
  });
  server.maxConnections = limits.maxConnections;
  // every connection, for destroyConnections (at most maxConnections: the server refuses those beyond)
  const open = new Set<Socket>();
  openConnections.set(server, open);
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  limitHandshakesPerAddress(server, limits.maxHandshakesPerAddress);
  // registered after the per-address count, so a refused connection has left it when it is closed here
  server.on('secureConnection', (socket: TLSSocket) => {
    const verdict = admitted(socket, admits, limits.upgradeTimeout_ms);
    if (verdict === false) {
      socket.destroy();
      return;
    }
    closeUnlessUpgraded(socket, limits.upgradeTimeout_ms);
    // a verdict still to come (the predicate waits for something; at most the upgrade deadline): the connection is
    // closed once it refuses
    if (verdict !== true) void verdict.then((ok) => ok || socket.destroy());
  });
  server.on('upgrade', (_req, socket: Socket) => upgraded(socket));
  server.on('request', (_req, res) => res.writeHead(426).end());
  return server;
}

/** The open connections of each server createMutualTlsServer made. */
const openConnections = new WeakMap<object, Set<Socket>>();

/**
 * Destroys every connection of `server` (one createMutualTlsServer made) still open, upgraded ones included: what
 * a stop does once its graceful closes had their time, so that `server.close()` completes.
 */
export function destroyConnections(server: object): void {
  for (const socket of openConnections.get(server) ?? []) socket.destroy();
}

/** How long closeMutualTlsServer lets the last connections end before it destroys them. */
export const CLOSE_GRACE_MS = 2_000;

/**
 * Closes `server` (one createMutualTlsServer made) once every connection has ended; a connection its owner's
 * closes did not end within `grace_ms` (a handshake, an upgrade in flight or refused) is destroyed, so that a stop
 * never waits on a peer that does not close its side.
 */
export function closeMutualTlsServer(
  server: { close(done: () => void): unknown; closeAllConnections(): void },
  grace_ms = CLOSE_GRACE_MS,
): Promise<void> {
  return new Promise<void>((resolve) => {
    const cut = setTimeout(() => destroyConnections(server), grace_ms);
    server.close(() => {
      clearTimeout(cut);
      resolve();
    });
    server.closeAllConnections();
  });
}

/**
 * `admits` on `socket`, now or (a promise that never rejects) later; a predicate that throws or rejects (a
 * certificate it cannot read), or does not answer within `wait_ms`, refuses.
 */
function admitted(
  socket: TLSSocket,
  admits: (socket: TLSSocket) => boolean | Promise<boolean>,
  wait_ms: number,
): boolean | Promise<boolean> {
  let verdict: boolean | Promise<boolean>;
  try {
    verdict = admits(socket);
  } catch {
    return false;
  }
  if (typeof verdict === 'boolean') return verdict;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), wait_ms);
    timer.unref();
  });
  const answer = verdict.then(
    (ok) => ok === true,
    () => false,
  );
  return Promise.race([answer, late]).finally(() => clearTimeout(timer));
}

/** The upgrade deadline of each connection whose upgrade has not been asked for yet. */
const upgradeDeadlines = new WeakMap<Socket, NodeJS.Timeout>();

function closeUnlessUpgraded(socket: TLSSocket, timeout_ms: number): void {
  const timer = setTimeout(() => socket.destroy(), timeout_ms);
  timer.unref();
  upgradeDeadlines.set(socket, timer);
  socket.once('close', () => clearTimeout(timer));
}

function upgraded(socket: Socket): void {
  const timer = upgradeDeadlines.get(socket);
  if (timer === undefined) return;
  clearTimeout(timer);
  upgradeDeadlines.delete(socket);
}

/**
 * Closes a new connection at once when its remote address already has `max` handshakes unfinished. A connection is
 * counted from its arrival until its handshake succeeds (`secureConnection`) or it closes, whichever comes first;
 * the raw socket and its TLS socket are one TCP connection, so its remote address and port name it in both events.
 */
function limitHandshakesPerAddress(server: Server, max: number): void {
  // one entry per unfinished handshake (so at most maxConnections entries), and its address's count
  const pending = new Map<string, string>();
  const perAddress = new Map<string, number>();
  const release = (key: string) => {
    const address = pending.get(key);
    if (address === undefined) return;
    pending.delete(key);
    const left = (perAddress.get(address) ?? 1) - 1;
    if (left > 0) perAddress.set(address, left);
    else perAddress.delete(address);
  };
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress;
    const key = `${address}|${socket.remotePort}`;
    // no address: the peer is already gone; a key still pending: its earlier connection's close is not yet seen
    if (address === undefined || pending.has(key) || (perAddress.get(address) ?? 0) >= max) {
      socket.destroy();
      return;
    }
    pending.set(key, address);
    perAddress.set(address, (perAddress.get(address) ?? 0) + 1);
    socket.once('close', () => release(key));
  });
  server.on('secureConnection', (socket: TLSSocket) => release(`${socket.remoteAddress}|${socket.remotePort}`));
}

/** Resolves once `server` listens on host:port, rejects with the listen error. */
export function listenOn(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
