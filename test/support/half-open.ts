/**
 * A client that never closes its side of a connection: it reads what the server answers and keeps writing, so the
 * server's end alone does not close it; only the server destroying its socket does (the next write is reset).
 */
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

export interface HalfOpenResult {
  answer: string;
  /** Milliseconds from the connect call to the close, or Infinity when still open after `bound_ms`. */
  closedAfter_ms: number;
}

/**
 * Connects to 127.0.0.1:`port` (over TLS with `tls` when given), sends `request`, then writes a byte every 100 ms
 * until the connection closes or `bound_ms` pass. The sockets go to `sockets`, for the test to destroy.
 */
export function halfOpenClient(
  port: number,
  request: string,
  bound_ms: number,
  sockets: Socket[],
  tls?: { key: string; cert: string; ca: string },
): Promise<HalfOpenResult> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    let answer = '';
    // allowHalfOpen: the client does not end its side when the server ends (a TLS socket over it inherits that)
    const tcp = netConnect({ host: '127.0.0.1', port, allowHalfOpen: true });
    sockets.push(tcp);
    tcp.on('error', () => {});
    const c = tls ? tlsConnect({ socket: tcp, ...tls, rejectUnauthorized: false }) : tcp;
    if (c !== tcp) sockets.push(c);
    c.on('error', () => {});
    c.on('data', (d) => (answer += d));
    let probe: NodeJS.Timeout | undefined;
    c.once(tls ? 'secureConnect' : 'connect', () => {
      c.write(request);
      probe = setInterval(() => c.writable && c.write('x'), 100);
    });
    const never = setTimeout(() => {
      clearInterval(probe);
      resolve({ answer, closedAfter_ms: Number.POSITIVE_INFINITY });
    }, bound_ms);
    c.once('close', () => {
      clearInterval(probe);
      clearTimeout(never);
      resolve({ answer, closedAfter_ms: Date.now() - t0 });
    });
  });
}
