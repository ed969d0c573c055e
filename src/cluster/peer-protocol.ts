/**
 * The peer protocol version: what the wire between members (the Raft transport `/raft`, the peer API `/peer-api`,
 * the forward channel `/peer-forward`) looks like in this build. Every peer link carries it both ways as an HTTP
 * upgrade header (`x-keel-peer-protocol`): the dialing member sends it with its upgrade request, the accepting
 * member answers with its own in the 101 response. Each side checks the other's before the link carries anything.
 *
 * The rule (docs/cluster.md, "Rolling upgrades"): members whose versions differ by at most one interoperate, the
 * link speaking the older of the two (a release that changes the wire raises PEER_PROTOCOL_VERSION and keeps
 * speaking the previous version to a peer that advertises it). Anything else is refused with a reason: 426 from
 * the accepting side, a closed link on the dialing side. Version 0 stands for a member that sends no version at
 * all (a Keel release before this header existed); no version-1 code speaks its forward frames, so it is refused.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import {
  type LinkCheck,
  type LinkRefusal,
  LinkRefusedError,
  type NodeId,
  printable,
  rejectUpgrade,
  type WebSocketTransportOptions,
} from '../../raft/index.js';
import { KEEL_VERSION } from '../version.js';

/** The peer protocol this build speaks. 1: forwards fenced on the leader's term (`[id, term, items]` frames). */
export const PEER_PROTOCOL_VERSION = 1;
/** The oldest version any build accepts: 0 (no header) never had a speaker in a versioned build. */
const OLDEST_SPOKEN_VERSION = 1;

export const PEER_PROTOCOL_HEADER = 'x-keel-peer-protocol';
/** The sender's Keel release, for the operator reading a refusal (never judged). */
export const PEER_RELEASE_HEADER = 'x-keel-release';
/** Why a link was refused (the accepting side's 426 answer). */
export const PEER_REFUSAL_HEADER = 'x-keel-peer-refusal';
/** HTTP status of a refused link: the dialer must upgrade (or downgrade) to talk to this member. */
export const PEER_REFUSAL_STATUS = 426;

/** A bound on a header value echoed into a reason (a peer's header is not trusted to be short). */
const MAX_ECHO_CHARS = 64;
/** A bound on a peer's refusal reason told to the operator. */
const MAX_REASON_CHARS = 512;

/** The versions a member speaking `version` accepts: its own and its neighbours, never below the oldest spoken. */
export function acceptedRange(version: number): { min: number; max: number } {
  return { min: Math.max(OLDEST_SPOKEN_VERSION, version - 1), max: version + 1 };
}

function echo(v: string, max_chars = MAX_ECHO_CHARS): string {
  const safe = printable(v);
  return safe.length > max_chars ? `${safe.slice(0, max_chars)}…` : safe;
}

function single(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/**
 * The link check of a member speaking `version` (PEER_PROTOCOL_VERSION; tests pass others to play a member of
 * another release). The Raft transport's LinkCheck, so one check serves every peer link: the headers this member
 * sends, and its verdict on the peer's (a refusal, or null when its protocol is one this member speaks).
 */
export function peerLinkCheck(version = PEER_PROTOCOL_VERSION, release = KEEL_VERSION): LinkCheck {
  if (!Number.isSafeInteger(version) || version < 0) throw new Error(`peer protocol: bad version ${version}`);
  const { min, max } = acceptedRange(version);
  const self = `this member (Keel ${release}) speaks peer protocol ${version} and accepts ${min} to ${max}`;
  return {
    headers: { [PEER_PROTOCOL_HEADER]: String(version), [PEER_RELEASE_HEADER]: echo(release) },
    judge(headers) {
      const raw = single(headers[PEER_PROTOCOL_HEADER]);
      const release = single(headers[PEER_RELEASE_HEADER]);
      const of = release === undefined ? 'the peer' : `the peer (Keel ${echo(release)})`;
      if (raw === undefined) {
        return {
          status: PEER_REFUSAL_STATUS,
          reason: `${of} sent no ${PEER_PROTOCOL_HEADER} (protocol 0: a Keel release before peer protocol versions); ${self}`,
        };
      }
      if (!/^[0-9]{1,9}$/.test(raw)) {
        return { status: PEER_REFUSAL_STATUS, reason: `${of} sent ${PEER_PROTOCOL_HEADER} "${echo(raw)}"; ${self}` };
      }
      const theirs = Number(raw);
      if (theirs < min || theirs > max) {
        return { status: PEER_REFUSAL_STATUS, reason: `${of} speaks peer protocol ${theirs}; ${self}` };
      }
      return null;
    },
  };
}

/** The check of this build. */
export const PEER_LINK: LinkCheck = peerLinkCheck();

/** A refused link as the dialing side knows it: why, and the peer's Keel release when it said. */
export interface DialRefusal {
  reason: string;
  release: string | null;
}

/** What a dialing client does with a link check: headers to send, and what to tell when the peer is refused. */
export interface PeerDial {
  check: LinkCheck;
  /** The link to the peer at `address` was refused, by this side or by the peer: it is closed. */
  onRefused?: (address: string, refusal: DialRefusal) => void;
  /** The peer at `address` passed the check. */
  onAccepted?: (address: string) => void;
}

/**
 * Checks a client WebSocket's link before it opens: the accepting peer's 101 answer is judged (a refused peer's
 * socket is terminated: the client sees a failed connection, never a link speaking a protocol it does not know),
 * and a refusal by the peer (426 with its reason) is told as such. Either way the client sees a failed connection.
 */
export function guardDial(ws: WebSocket, address: string, dial: PeerDial): void {
  ws.once('upgrade', (res) => {
    const refusal = dial.check.judge(res.headers);
    if (refusal === null) {
      dial.onAccepted?.(address);
      return;
    }
    dial.onRefused?.(address, { reason: refusal.reason, release: releaseOf(res.headers) });
    ws.terminate();
  });
  ws.once('unexpected-response', (_req, res) => {
    const theirs = single(res.headers[PEER_REFUSAL_HEADER]);
    if (res.statusCode === PEER_REFUSAL_STATUS && theirs !== undefined) {
      dial.onRefused?.(address, {
        reason: `refused by the peer: ${echo(theirs, MAX_REASON_CHARS)}`,
        release: releaseOf(res.headers),
      });
    }
    res.resume();
    ws.terminate(); // what ws does without this listener: the connection fails
  });
}

function releaseOf(headers: IncomingHttpHeaders): string | null {
  const v = single(headers[PEER_RELEASE_HEADER]);
  return v === undefined ? null : echo(v);
}

/**
 * Refuses an upgrade request on its raw socket: the refusal's status, its reason in PEER_REFUSAL_HEADER and this
 * member's link headers (so the dialer can tell the operator what it met).
 */
export function refuseUpgrade(socket: Duplex, refusal: LinkRefusal, check: LinkCheck = PEER_LINK): void {
  rejectUpgrade(socket, refusal.status, { ...check.headers, [PEER_REFUSAL_HEADER]: refusal.reason });
}

/**
 * The Raft transport's link check (`check`, this build's by default) and its reports: a refused peer logged in
 * `refusals` as link `/raft`, and cleared once that peer's Raft link passes the check again; other transport errors
 * go to `onOtherError`.
 */
export function raftLinkOptions(
  refusals: RefusalLog,
  onOtherError: (err: Error, peer: NodeId | null) => void,
  check: LinkCheck = PEER_LINK,
): Pick<WebSocketTransportOptions, 'link' | 'onError' | 'onLinkAccepted'> {
  return {
    link: check,
    onError: (err, peer) => {
      if (err instanceof LinkRefusedError) refusals.refused(RAFT_LINK, err.peer, err.reason);
      else onOtherError(err, peer);
    },
    onLinkAccepted: (peer) => refusals.accepted(RAFT_LINK, peer),
  };
}

/** The Raft transport's link, as RefusalLog names it (its upgrade path). */
const RAFT_LINK = '/raft';

/**
 * Refused links as the operator sees them: one warning when a peer starts being refused (or for another reason),
 * one line when it is accepted again, nothing for the retries in between. Keyed by peer (member id or address);
 * at most MAX_KEYS peers remembered (the oldest forgotten first).
 */
export class RefusalLog {
  private static readonly MAX_KEYS = 256;
  private readonly current = new Map<string, string>();

  constructor(private readonly log: (level: 'info' | 'warn', msg: string, extra: Record<string, unknown>) => void) {}

  refused(link: string, peer: string, reason: string): void {
    const key = `${link} ${peer}`;
    if (this.current.get(key) === reason) return;
    this.current.delete(key);
    if (this.current.size >= RefusalLog.MAX_KEYS) this.current.delete(this.current.keys().next().value as string);
    this.current.set(key, reason);
    this.log('warn', 'peer link refused: peer protocol version', { link, peer, reason });
  }

  accepted(link: string, peer: string): void {
    if (this.current.delete(`${link} ${peer}`)) {
      this.log('info', 'peer link accepted again: peer protocol version', { link, peer });
    }
  }

  /** The reason a peer's link is refused now, or null. */
  reason(link: string, peer: string): string | null {
    return this.current.get(`${link} ${peer}`) ?? null;
  }
}
