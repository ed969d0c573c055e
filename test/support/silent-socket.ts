/** A client that opens TCP and never starts TLS: what the mutual-TLS listeners' handshake bounds are against. */
import { connect, type Socket } from 'node:net';

export interface SilentClient {
  /** Whether the server has closed it yet. */
  closed(): boolean;
  /** Resolves with the milliseconds from its connect call to its close. */
  closedAfter: Promise<number>;
}

/** A TCP connection to 127.0.0.1:`port` from `localAddress` (kept in `sockets` to destroy); resolves once connected. */
export function silentSocket(port: number, localAddress: string, sockets: Socket[]): Promise<SilentClient> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    let closed = false;
    const socket = connect({ host: '127.0.0.1', port, localAddress });
    sockets.push(socket);
    socket.on('error', () => {});
    const closedAfter = new Promise<number>((r) =>
      socket.once('close', () => {
        closed = true;
        r(Date.now() - t0);
      }),
    );
    socket.once('connect', () => resolve({ closed: () => closed, closedAfter }));
  });
}
