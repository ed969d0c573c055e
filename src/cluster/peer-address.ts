import { hostname } from 'node:os';

/**
 * A member's peer address as other members dial it: `host:port`, the host a DNS name, an IPv4 address or a
 * bracketed IPv6 address, the port 1–65535, nothing else (no path, query, user info or space). Members paste it
 * into URLs (`wss://<address>/raft`, `/peer-api`, `/peer-forward`), so anything more would send them elsewhere.
 */
const PEER_ADDRESS = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?):([0-9]{1,5})$/;

export function isPeerAddress(text: string): boolean {
  const m = PEER_ADDRESS.exec(text);
  if (m === null) return false;
  const port = Number(m[1]);
  return port >= 1 && port <= 65_535;
}

/**
 * The `host:port` others dial to reach a listener bound to `host` and `port`: this machine's name for a listener on
 * every interface (`0.0.0.0`, `::`), an IPv6 host bracketed.
 */
export function dialAddress(host: string, port: number): string {
  const h = host === '0.0.0.0' || host === '::' ? hostname() : host;
  return `${h.includes(':') ? `[${h}]` : h}:${port}`;
}
