/**
 * The connection handshake. The dialing node sends its cluster id, its own id and the id it expects to reach as
 * HTTP upgrade headers; with a shared secret it adds an HMAC over them and a timestamp; with TLS, the peer's
 * certificate must name the claimed id (subject CN by default).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { type IncomingHttpHeaders, type IncomingMessage, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import type { WebSocketServer } from 'ws';
import type { NodeId } from '../types.js';

export const HEADER_CLUSTER = 'x-keel-raft-cluster';
export const HEADER_FROM = 'x-keel-raft-from';
export const HEADER_TO = 'x-keel-raft-to';
export const HEADER_TS = 'x-keel-raft-ts';
export const HEADER_AUTH = 'x-keel-raft-auth';

/** Max age of a secret-signed handshake. */
export const HANDSHAKE_WINDOW_MS = 60_000;

export type PeerIdFromCert = (cert: PeerCertificate) => string | null;

export const peerIdFromCommonName: PeerIdFromCert = (cert) => {
  const cn = cert.subject?.CN;
  if (typeof cn === 'string') return cn;
  if (Array.isArray(cn) && typeof cn[0] === 'string') return cn[0];
  return null;
};

function sign(secret: string, cluster: string, from: string, to: string, ts: string): string {
  return createHmac('sha256', secret).update(`${cluster}\n${from}\n${to}\n${ts}`).digest('hex');
}

export function handshakeHeaders(
  cluster: string,
  from: NodeId,
  to: NodeId,
  secret: string | null,
  now_ms: number,
): Record<string, string> {
  const headers: Record<string, string> = { [HEADER_CLUSTER]: cluster, [HEADER_FROM]: from, [HEADER_TO]: to };
  if (secret !== null) {
    const ts = String(now_ms);
    headers[HEADER_TS] = ts;
    headers[HEADER_AUTH] = sign(secret, cluster, from, to, ts);
  }
  return headers;
}

/**
 * The application's check of a link (WebSocketTransportOptions.link): headers sent with every dial and with every
 * accepted upgrade's answer, and a verdict on the peer's (null: accepted).
 */
export interface LinkCheck {
  readonly headers: Readonly<Record<string, string>>;
  judge(headers: IncomingHttpHeaders): LinkRefusal | null;
}

/** A link check's refusal of a peer: the status answered to a dialing peer, and why. */
export interface LinkRefusal {
  status: number;
  reason: string;
}

/** Makes `wss` answer every upgrade it accepts with `link`'s headers (in its 101 response). */
export function answerWithLinkHeaders(wss: WebSocketServer, link: LinkCheck): void {
  wss.on('headers', (lines) => {
    for (const [k, v] of Object.entries(link.headers)) lines.push(`${k}: ${v}`);
  });
}

/** `v` with every character outside printable ASCII replaced by `?` (safe in a header or a log line). */
export const printable = (v: string): string => v.replace(/[^\x20-\x7e]/g, '?');

/**
 * How long a refused upgrade's socket stays after the refusal is written, for the client to read it and close: an
 * upgrade request's socket has no timeout (Node removes the server's), so a client that never closes its side
 * would otherwise keep it for good.
 */
export const REFUSAL_LINGER_MS = 1_000;

/**
 * Refuses an upgrade request on its raw socket: `status` with its standard reason phrase, `headers` (made
 * printable), no body, and the connection closed (destroyed after REFUSAL_LINGER_MS if the client has not closed).
 */
export function rejectUpgrade(socket: Duplex, status: number, headers: Readonly<Record<string, string>> = {}): void {
  if (!(Number.isInteger(status) && status >= 400 && status <= 599))
    throw new RangeError(`not an error status: ${status}`);
  const lines = Object.entries(headers).map(([k, v]) => `${printable(k)}: ${printable(v)}\r\n`);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nconnection: close\r\n${lines.join('')}content-length: 0\r\n\r\n`,
  );
  const linger = setTimeout(() => socket.destroy(), REFUSAL_LINGER_MS).unref();
  socket.once('close', () => clearTimeout(linger));
}

/** A peer refused by the link check (reported to onError; on accept the peer got the refusal's status). */
export class LinkRefusedError extends Error {
  constructor(
    readonly peer: NodeId,
    readonly reason: string,
  ) {
    super(`raft transport: link to ${peer} refused: ${reason}`);
    this.name = 'LinkRefusedError';
  }
}

export type Verdict = { ok: true; peer: NodeId } | { ok: false; status: number; reason: string };

export interface HandshakeCheck {
  cluster: string;
  self: NodeId;
  secret: string | null;
  tls: boolean;
  peerIdFromCert: PeerIdFromCert;
  isKnownPeer: (id: NodeId) => boolean;
  now_ms: number;
}

function header(req: IncomingMessage, name: string): string | null {
  const v = req.headers[name];
  return typeof v === 'string' ? v : null;
}

export function verifyHandshake(req: IncomingMessage, check: HandshakeCheck): Verdict {
  const cluster = header(req, HEADER_CLUSTER);
  const from = header(req, HEADER_FROM);
  const to = header(req, HEADER_TO);
  if (cluster === null || from === null || to === null)
    return { ok: false, status: 400, reason: 'missing handshake headers' };
  if (cluster !== check.cluster) return { ok: false, status: 403, reason: `wrong cluster ${cluster}` };
  if (to !== check.self) return { ok: false, status: 421, reason: `this is ${check.self}, not ${to}` };
  if (!check.isKnownPeer(from)) return { ok: false, status: 403, reason: `unknown peer ${from}` };
  if (!(from < check.self)) return { ok: false, status: 409, reason: `${check.self} dials ${from}, not the reverse` };
  if (check.secret !== null) {
    const ts = header(req, HEADER_TS);
    const auth = header(req, HEADER_AUTH);
    if (ts === null || auth === null) return { ok: false, status: 401, reason: 'missing handshake signature' };
    const age = Math.abs(check.now_ms - Number(ts));
    if (!(age <= HANDSHAKE_WINDOW_MS)) return { ok: false, status: 401, reason: 'stale handshake' };
    const want = Buffer.from(sign(check.secret, cluster, from, to, ts), 'hex');
    const got = Buffer.from(auth, 'hex');
    if (got.length !== want.length || !timingSafeEqual(got, want)) {
      return { ok: false, status: 401, reason: 'bad handshake signature' };
    }
  }
  if (check.tls) {
    const socket = req.socket as TLSSocket;
    if (typeof socket.getPeerCertificate !== 'function') return { ok: false, status: 401, reason: 'TLS required' };
    if (!socket.authorized) return { ok: false, status: 401, reason: 'client certificate not verified' };
    const certId = check.peerIdFromCert(socket.getPeerCertificate());
    if (certId !== from) return { ok: false, status: 401, reason: `certificate names ${certId}, not ${from}` };
  }
  return { ok: true, peer: from };
}
