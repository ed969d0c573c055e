import { createServer, type Server, type ServerOptions } from 'node:https';
import type { Socket } from 'node:net';

/**
 * What one mutual-TLS listener holds at most, before any client has proven anything: the bounds that keep a client
 * without a certificate (or with one that may not use the listener) from making the process allocate without end.
 */
export interface MutualTlsLimits {
  /** A connection whose TLS handshake is not done within this is closed (Node's default is 120 s). */
  handshakeTimeout_ms: number;
  /** Connections open at once; a connection beyond is closed at once (Node's `maxConnections`). */
  maxConnections: number;
  /** Connections open at once from one remote address; a connection beyond is closed at once. */
  maxPerAddress: number;
}

/** How long a TLS handshake may take on Keel's mutual-TLS listeners. */
export const MTLS_HANDSHAKE_TIMEOUT_MS = 10_000;

/**
 * The peer listener's: a cluster has a few members, each holding three links (Raft, peer API, forwards) to every
 * other one, and on one machine (`npm run cluster`, benchmarks) they all come from one address.
 */
export const PEER_LISTENER_LIMITS: MutualTlsLimits = {
  handshakeTimeout_ms: MTLS_HANDSHAKE_TIMEOUT_MS,
  maxConnections: 512,
  maxPerAddress: 64,
};

/**
 * An HTTPS server for WebSocket upgrades only (the peer and router-control listeners): it asks every client for a
 * certificate chaining to `ca` and refuses the handshake without one; a plain request gets 426 Upgrade Required.
 * Within `limits`: a handshake left unfinished is dropped, and connections beyond the bounds are closed at once.
 */
export function createMutualTlsServer(
  tls: Pick<ServerOptions, 'key' | 'cert' | 'ca'>,
  limits: MutualTlsLimits = PEER_LISTENER_LIMITS,
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
  limitPerAddress(server, limits.maxPerAddress);
  server.on('request', (_req, res) => res.writeHead(426).end());
  return server;
}

/** Closes a new connection at once when its remote address already holds `max` open ones. */
function limitPerAddress(server: Server, max: number): void {
  // one entry per address with a connection open (so at most maxConnections entries)
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const held = open.get(address) ?? 0;
    if (held >= max) {
      socket.destroy();
      return;
    }
    open.set(address, held + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
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
