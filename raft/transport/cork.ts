/**
 * Holding a WebSocket's socket writes until the end of the current event-loop turn: the frames sent on it meanwhile
 * (a peer's Raft flushes from several callbacks of one turn, the forward answers of one commit) leave in one write
 * (over TLS one record, one syscall) instead of one each.
 */
import type { Duplex } from 'node:stream';
import type WebSocket from 'ws';

/** Sockets corked by corkForTurn and not yet uncorked. */
const corked = new WeakSet<Duplex>();

/**
 * Corks `ws`'s socket, once per turn, until the turn's I/O callbacks are done (setImmediate, as the forward batcher
 * waits): every send of this turn joins one write. A cork only delays bytes, so frame order is kept; what it holds is
 * what was sent in one turn, already bounded by the sender (the transport's in-flight bound, the forward channel's
 * pending bound). A close flushes it (`end` uncorks), and uncorking a destroyed socket is harmless.
 */
export function corkForTurn(ws: WebSocket): void {
  // ws keeps its socket in `_socket` (null before the connection opens)
  const socket = (ws as unknown as { _socket?: Duplex | null })._socket;
  if (socket === undefined || socket === null || socket.destroyed || corked.has(socket)) return;
  corked.add(socket);
  socket.cork();
  setImmediate(() => {
    corked.delete(socket);
    socket.uncork();
  });
}
