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
