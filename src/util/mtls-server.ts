import { createServer, type Server, type ServerOptions } from 'node:https';

/**
 * An HTTPS server for WebSocket upgrades only (the peer and router-control listeners): it asks every client for a
 * certificate chaining to `ca` and refuses the handshake without one; a plain request gets 426 Upgrade Required.
 */
export function createMutualTlsServer(tls: Pick<ServerOptions, 'key' | 'cert' | 'ca'>): Server {
  const server = createServer({
    key: tls.key,
    cert: tls.cert,
    ca: tls.ca,
    requestCert: true,
    rejectUnauthorized: true,
  });
  server.on('request', (_req, res) => res.writeHead(426).end());
  return server;
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
