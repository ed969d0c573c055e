/** Bare peer servers (the peer API, the forward channel) over WebSocket for in-process tests. */
import { createServer, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { applyWSSHandler } from '@trpc/server/adapters/ws';
import { WebSocketServer } from 'ws';
import { answerWithLinkHeaders } from '../../raft/index.js';
import { FORWARD_PATH, type ForwardResult, serveForwards } from '../../src/cluster/forward-channel.js';
import { PEER_API_PATH, type PeerHandlers, peerRouter } from '../../src/cluster/peer-api.js';
import { PEER_LINK } from '../../src/cluster/peer-protocol.js';

type Tls = { key: string; cert: string };

/**
 * An HTTP(S) server answering WebSocket upgrades at `path` with `wss` (the peer protocol headers on), on a free port
 * of 127.0.0.1, over TLS showing `tls` when given; `cleanup` gets the function that closes it (`beforeClose` first).
 */
async function serveUpgrades(
  path: string,
  wss: WebSocketServer,
  cleanup: Array<() => void | Promise<void>>,
  tls?: Tls,
  beforeClose: () => void = () => {},
): Promise<{ address: string; server: Server }> {
  const server = tls ? createTlsServer(tls) : createServer();
  answerWithLinkHeaders(wss, PEER_LINK);
  server.on('upgrade', (req, socket, head) => {
    if (req.url !== path) return socket.destroy();
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(
    () =>
      new Promise<void>((r) => {
        beforeClose();
        for (const ws of wss.clients) ws.terminate();
        wss.close();
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/**
 * A bare peer API (src/cluster/peer-api.ts): `handlers` answer every call, each made as if by `from` (the id a
 * caller's certificate would name; null: no TLS). Resolves with its address.
 */
export async function servePeerApi(
  handlers: PeerHandlers,
  from: string | null,
  cleanup: Array<() => void | Promise<void>>,
  tls?: Tls,
): Promise<string> {
  const wss = new WebSocketServer({ noServer: true });
  const served = applyWSSHandler({ wss, router: peerRouter, createContext: () => ({ handlers, from }) });
  const { address } = await serveUpgrades(PEER_API_PATH, wss, cleanup, tls, () =>
    served.broadcastReconnectNotification(),
  );
  return address;
}

/** A bare forward channel (src/cluster/forward-channel.ts) answering with `handle`. */
export async function serveForwardChannel(
  handle: (items: Uint8Array[], term: number) => Promise<ForwardResult[]>,
  cleanup: Array<() => void | Promise<void>>,
  opts: { hold_ms?: number; tls?: Tls } = {},
): Promise<{ address: string; server: Server; wss: WebSocketServer }> {
  const wss = new WebSocketServer({ noServer: true });
  serveForwards(
    wss,
    (term, items) => handle(items, term),
    () => {},
    opts.hold_ms === undefined ? {} : { hold_ms: opts.hold_ms },
  );
  const { address, server } = await serveUpgrades(FORWARD_PATH, wss, cleanup, opts.tls);
  return { address, server, wss };
}
