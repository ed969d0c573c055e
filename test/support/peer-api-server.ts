/**
 * A bare peer API (src/cluster/peer-api.ts) over plain WebSocket for in-process tests: `handlers` answer every call,
 * each made as if by `from` (the id a caller's certificate would name; null: no TLS). With `tls`, over TLS showing
 * that certificate. Resolves with its address; `cleanup` gets the function that closes it.
 */
import { createServer, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { applyWSSHandler } from '@trpc/server/adapters/ws';
import { WebSocketServer } from 'ws';
import { answerWithLinkHeaders } from '../../raft/index.js';
import { FORWARD_PATH, type ForwardResult, serveForwards } from '../../src/cluster/forward-channel.js';
import { PEER_API_PATH, type PeerHandlers, peerRouter } from '../../src/cluster/peer-api.js';
import { PEER_LINK } from '../../src/cluster/peer-protocol.js';

export async function servePeerApi(
  handlers: PeerHandlers,
  from: string | null,
  cleanup: Array<() => void | Promise<void>>,
  tls?: { key: string; cert: string },
): Promise<string> {
  const server = tls ? createTlsServer(tls) : createServer();
  const wss = new WebSocketServer({ noServer: true });
  answerWithLinkHeaders(wss, PEER_LINK);
  const served = applyWSSHandler({ wss, router: peerRouter, createContext: () => ({ handlers, from }) });
  server.on('upgrade', (req, socket, head) => {
    if (req.url !== PEER_API_PATH) return socket.destroy();
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(
    () =>
      new Promise<void>((r) => {
        served.broadcastReconnectNotification();
        for (const ws of wss.clients) ws.terminate();
        wss.close();
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * A bare forward channel (src/cluster/forward-channel.ts) answering with `handle`, over TLS showing `tls` when
 * given; `cleanup` gets the function that closes it.
 */
export async function serveForwardChannel(
  handle: (items: Uint8Array[], term: number) => Promise<ForwardResult[]>,
  cleanup: Array<() => void | Promise<void>>,
  opts: { hold_ms?: number; tls?: { key: string; cert: string } } = {},
): Promise<{ address: string; server: Server; wss: WebSocketServer }> {
  const server = opts.tls ? createTlsServer(opts.tls) : createServer();
  const wss = new WebSocketServer({ noServer: true });
  answerWithLinkHeaders(wss, PEER_LINK);
  serveForwards(
    wss,
    (term, items) => handle(items, term),
    () => {},
    opts.hold_ms === undefined ? {} : { hold_ms: opts.hold_ms },
  );
  server.on('upgrade', (req, socket, head) => {
    if (req.url !== FORWARD_PATH) return socket.destroy();
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(
    () =>
      new Promise<void>((r) => {
        for (const ws of wss.clients) ws.terminate();
        wss.close();
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, server, wss };
}
