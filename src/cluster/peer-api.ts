/**
 * The internal API between cluster members: a tRPC router served over WebSocket on the peer listener (next to
 * the Raft transport), and its client. Only members talk to it (the peer listener is meant for mutual TLS).
 */

import type { PeerCertificate } from 'node:tls';
import { createTRPCClient, createWSClient, type TRPCClient, TRPCClientError, wsLink } from '@trpc/client';
import { initTRPC, TRPCError } from '@trpc/server';
import WebSocket from 'ws';
import { RaftError, type RaftErrorCode } from '../../raft/index.js';
import { NODE_ID_PATTERN } from '../pki/cluster.js';
import { withTimeout } from '../util/timeout.js';
import { ForwardClient, type ForwardResult } from './forward-channel.js';
import { memberServerCheck, type ServerCheck } from './member-identity.js';
import { isPeerAddress } from './peer-address.js';
import { type DialRefusal, guardDial, PEER_LINK, type PeerDial } from './peer-protocol.js';

/** What a member reports about itself (`status`). */
export interface MemberStatus {
  id: string;
  role: string;
  leader: string | null;
  term: number;
  applied: number;
  commit: number;
  /** Index of the last snapshot in this member's Raft log (taken here or installed from the leader). */
  snapshotIndex: number;
  /** First index still in this member's Raft log (entries below were compacted into the snapshot). */
  firstIndex: number;
  version: string;
  /**
   * The state-machine version its release applies (src/version.ts STATE_MACHINE_VERSION): what the leader raises
   * the cluster's to once every member states it. Absent: 1.
   */
  stateMachineVersion?: number;
  /** Base URLs of its REST APIs. */
  apiAddresses: string[];
  peerAddress: string;
  /** `host:port` of its router control listener, where routers connect; null without one (absent: older members). */
  routerAddress?: string | null;
  readOnly: boolean;
  /**
   * The membership it has applied: its index and every member (voters and learners). Absent from members of older
   * releases. A node that finds itself left out of a newer one than its own was removed (ClusterNode.observed).
   */
  conf?: { index: number; members: string[] };
}

/**
 * Where routers connect to the member whose status this is (its router control listener), or null: none reported,
 * or not in the form of a `host:port` address, whatever the member sent (it is shown in lists and pasted by routers).
 */
export function routerAddressOf(status: MemberStatus | null | undefined): string | null {
  const at = status?.routerAddress;
  return typeof at === 'string' && isPeerAddress(at) ? at : null;
}

export interface MemberInfo {
  id: string;
  address: string;
  voter: boolean;
}

export type { ForwardResult } from './forward-channel.js';

/** What a member does for its peers (implemented by ClusterNode). */
export interface PeerHandlers {
  /**
   * Proposes each command on the leader, in order, only while it leads in `term` (the term the sender addressed);
   * one result per command (served on the forward channel).
   */
  forward(term: number, items: Uint8Array[], from: string | null): Promise<ForwardResult[]>;
  /**
   * Whether `id` is a member (voter or learner) of the configuration this node has applied. A caller that is not
   * (a member removed while its process still runs, its state no longer updated) may not forward writes nor change
   * the membership: only ask about it, or add itself (a join).
   */
  isMember(id: string): boolean;
  /**
   * The index of the membership change that removed `id`, when it was removed and not added again since
   * (src/model/cluster-removal.ts); else null. Such a caller may only ask for this member's status (which tells it
   * it was removed): its certificate stays valid, but it can no longer join by itself.
   */
  removedAt(id: string): number | null;
  readIndex(): Promise<number>;
  status(): MemberStatus;
  members(): { leader: string | null; members: MemberInfo[] };
  /**
   * `join`: the node asks to add itself (a join, at whichever member it reached first): refused when its id was
   * removed (PeerRemovedError), which the leader checks again against its own record. An operator's add (`join`
   * false) admits a removed id again.
   */
  addMember(id: string, address: string, voter: boolean, join: boolean): Promise<void>;
  removeMember(id: string): Promise<void>;
  transferLeadership(to: string): Promise<void>;
}

/**
 * A membership change refused because of what was asked (not a failure of the cluster): the REST API answers it
 * 400 with its message, the peer API BAD_REQUEST.
 */
export class MembershipRefusal extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MembershipRefusal';
  }
}

const MAX_ID_CHARS = 128;
const MAX_ADDRESS_CHARS = 300;

function peerAddress(v: string): string {
  if (!isPeerAddress(v)) throw new TRPCError({ code: 'BAD_REQUEST', message: 'address must be HOST:PORT' });
  return v;
}

function str(v: unknown, name: string, max: number): string {
  if (typeof v !== 'string' || v.length === 0 || v.length > max) {
    throw new TRPCError({ code: 'BAD_REQUEST', message: `${name}: a string of 1 to ${max} characters` });
  }
  return v;
}

/** A member id: the rule every peer certificate's id follows (NODE_ID_PATTERN), or 400. */
function memberId(v: unknown, name: string): string {
  const id = str(v, name, MAX_ID_CHARS);
  if (!NODE_ID_PATTERN.test(id)) {
    throw new TRPCError({
      code: 'BAD_REQUEST',
      message: `${name}: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    });
  }
  return id;
}

function obj(v: unknown): Record<string, unknown> {
  if (v === null || typeof v !== 'object') throw new TRPCError({ code: 'BAD_REQUEST', message: 'an object' });
  return v as Record<string, unknown>;
}

/**
 * The Raft error code of `err`: a RaftError's own, or the one a member's peer API answered with (a call it made on
 * the leader for the caller carries the leader's code on). Null for anything else.
 */
export function raftCodeOf(err: unknown): RaftErrorCode | null {
  if (err instanceof RaftError) return err.code;
  if (err instanceof TRPCClientError) {
    const code = (err.data as { raftCode?: unknown } | undefined)?.raftCode;
    return typeof code === 'string' ? (code as RaftErrorCode) : null;
  }
  return null;
}

/** A call's context: the handlers, and the member id the caller's certificate vouches for (null without TLS). */
export interface PeerContext {
  handlers: PeerHandlers;
  from: string | null;
  /**
   * The caller's certificate was signed by the cluster's root CA itself, not by the signing CA every member holds
   * (pki/cluster.ts issuePeerCert): only such a certificate lets a node that is not a member join by itself.
   */
  rootIssued?: boolean;
}

/** A caller whose id was removed from the cluster (PeerHandlers.removedAt): the cause of its FORBIDDEN answer. */
export class PeerRemovedError extends Error {
  constructor(
    readonly id: string,
    readonly confIndex: number,
  ) {
    super(
      `${id} was removed from this cluster (the membership change at index ${confIndex}); an operator adds it again ` +
        `with keel cluster add --id ${id} --address ADDR --learner, then it joins with fresh data`,
    );
    this.name = 'PeerRemovedError';
  }
}

/** Refuses a caller removed from the cluster: everything but `status`, which tells it so. */
function refuseRemoved(ctx: PeerContext): void {
  if (ctx.from === null) return;
  const at = ctx.handlers.removedAt(ctx.from);
  if (at !== null) throw forbidden(new PeerRemovedError(ctx.from, at));
}

function forbidden(cause: PeerRemovedError): TRPCError {
  return new TRPCError({ code: 'FORBIDDEN', message: cause.message, cause });
}

/**
 * The index of the removal a member's peer API answered with (PeerRemovedError, carried as `removedAt` in the
 * error's data), or null for any other error.
 */
export function removedAtOf(err: unknown): number | null {
  if (err instanceof PeerRemovedError) return err.confIndex;
  if (!(err instanceof TRPCClientError)) return null;
  const at = (err.data as { removedAt?: unknown } | undefined)?.removedAt;
  return typeof at === 'number' && Number.isSafeInteger(at) ? at : null;
}

/**
 * A removal refused where the call was made on (PeerRemovedError), or on the leader it was passed on to (its
 * answer's `removedAt`), as this member's FORBIDDEN answer; any other error as it is.
 */
/** An optional boolean field: absent is `absent`; anything but a boolean is 400. */
function flag(v: unknown, name: string, absent: boolean): boolean {
  if (v === undefined) return absent;
  if (typeof v !== 'boolean') throw new TRPCError({ code: 'BAD_REQUEST', message: `${name}: a boolean` });
  return v;
}

/**
 * A membership change refused for what the caller asked (MembershipRefusal: a member at another address, a release
 * too old, no such member or voter): 400, its message kept, the error as its cause (raftCodeOf still reads a Raft
 * refusal's code behind it). Anything else as it was (500 for what is not the caller's doing).
 */
function asCallerError(err: unknown): unknown {
  if (err instanceof MembershipRefusal) return new TRPCError({ code: 'BAD_REQUEST', message: err.message, cause: err });
  return err;
}

function asForbidden(err: unknown, id: string): unknown {
  const at = removedAtOf(err);
  return at === null ? err : forbidden(new PeerRemovedError(id, at));
}

/**
 * Refuses a node's own join unless its certificate was signed by the cluster's root (PeerContext.rootIssued) or an
 * operator added it already (a learner: `keel cluster add --learner`). Every member holds the signing CA's key, so
 * a certificate that CA signed proves nothing about who chose to add a node: a removed member could sign one for a
 * fresh id, and join by itself as a voter.
 */
function requireJoinCertificate(ctx: PeerContext): void {
  if (ctx.from === null || ctx.rootIssued === true || ctx.handlers.isMember(ctx.from)) return;
  throw new TRPCError({
    code: 'FORBIDDEN',
    message:
      `${ctx.from} may join only with a peer certificate signed by the cluster's root CA (keel pki issue-node, ` +
      'where the cluster was initialised), or once an operator has added it (keel cluster add --learner)',
  });
}

/** Refuses a membership change asked by a caller that is not a member (see PeerHandlers.isMember). */
function requireMember(ctx: PeerContext): void {
  if (ctx.from !== null && !ctx.handlers.isMember(ctx.from)) {
    throw new TRPCError({ code: 'FORBIDDEN', message: `${ctx.from} is not a member of this cluster` });
  }
}

const t = initTRPC.context<PeerContext>().create({
  // never a stack trace in an answer, whatever NODE_ENV says (a caller may not be a member)
  isDev: false,
  // the caller branches on the code (e.g. a join retries after a lost leadership), never on the message
  // (and a removed caller on `removedAt`)
  errorFormatter: ({ shape, error }) => ({
    ...shape,
    data: {
      ...shape.data,
      raftCode: raftCodeOf(error.cause),
      removedAt: removedAtOf(error.cause),
    },
  }),
});

/** Every procedure but `status`: refused to a caller removed from the cluster (refuseRemoved). */
const notRemoved = t.procedure.use(({ ctx, next }) => {
  refuseRemoved(ctx);
  return next();
});

/**
 * The membership changes: judged on this member's state as of the call (a read index first), not as it last
 * applied it. A member that lags behind (it was cut off while a removal went by) would otherwise still take a
 * removed caller for a member and pass its change on to the leader, which sees only the member passing it on.
 */
const memberChange = notRemoved.use(async ({ ctx, next }) => {
  if (ctx.from !== null) {
    await ctx.handlers.readIndex();
    refuseRemoved(ctx);
  }
  return next();
});

export const peerRouter = t.router({
  readIndex: notRemoved.query(({ ctx }) => ctx.handlers.readIndex()),
  // answered to a removed caller too: the status is how it learns its removal (ClusterNode.observed)
  status: t.procedure.query(({ ctx }) => ctx.handlers.status()),
  members: notRemoved.query(({ ctx }) => ctx.handlers.members()),
  // a removed node's own request to join again above all
  addMember: memberChange
    .input((v) => {
      const o = obj(v);
      return {
        id: memberId(o.id, 'id'),
        address: peerAddress(str(o.address, 'address', MAX_ADDRESS_CHARS)),
        voter: flag(o.voter, 'voter', true),
        // set by a member passing a node's own join on to the leader
        ...(o.join === true ? { join: true } : {}),
      };
    })
    .mutation(async ({ ctx, input }) => {
      const join = input.id === ctx.from || input.join === true; // a node joining adds itself
      if (input.id !== ctx.from) requireMember(ctx);
      else requireJoinCertificate(ctx);
      try {
        return await ctx.handlers.addMember(input.id, input.address, input.voter, join);
      } catch (err) {
        throw asCallerError(asForbidden(err, input.id));
      }
    }),
  removeMember: memberChange
    // any id the configuration may hold (one an older build let in included): the membership check decides
    .input((v) => ({ id: str(obj(v).id, 'id', MAX_ID_CHARS) }))
    .mutation(async ({ ctx, input }) => {
      requireMember(ctx);
      // judged after the read index (memberChange): a removal of an id that is no member changes nothing, say so
      if (!ctx.handlers.isMember(input.id)) {
        throw new TRPCError({ code: 'BAD_REQUEST', message: `no cluster member with id ${input.id}` });
      }
      try {
        return await ctx.handlers.removeMember(input.id);
      } catch (err) {
        throw asCallerError(err);
      }
    }),
  transferLeadership: memberChange
    .input((v) => ({ to: str(obj(v).to, 'to', MAX_ID_CHARS) }))
    .mutation(async ({ ctx, input }) => {
      requireMember(ctx);
      try {
        return await ctx.handlers.transferLeadership(input.to);
      } catch (err) {
        throw asCallerError(err);
      }
    }),
});

export type PeerRouter = typeof peerRouter;
export const PEER_API_PATH = '/peer-api';

export interface PeerTlsOptions {
  key: string | Buffer;
  cert: string | Buffer;
  ca: string | Buffer | Array<string | Buffer>;
  /** The member id a peer certificate vouches for, or null (then the peer is refused). */
  peerIdFromCert: (cert: PeerCertificate) => string | null;
}

export interface PeerClient {
  api: TRPCClient<PeerRouter>;
  /** The member's forward channel (forward-channel.ts), on the same address and certificates. */
  forward: ForwardClient;
  /** Why the link to the member's peer API is refused (peer protocol version), null while it is not. */
  refusal(): DialRefusal | null;
  /**
   * The certificate (DER) the member showed on the last connection of its links that passed the member check, null
   * before one did (or without TLS).
   */
  serverCert(): Buffer | null;
  close(): void;
}

/**
 * The `ws` class tRPC dials with: the peer protocol headers (and the client certificate when TLS is on) on every
 * connection, the member's answer checked before the link carries anything (peer-protocol.ts).
 */
function linkedWebSocket(address: string, dial: PeerDial, tls?: PeerTlsOptions, check?: ServerCheck): unknown {
  return class extends WebSocket {
    constructor(u: string | URL, protocols?: string | string[]) {
      super(u, protocols, {
        headers: { ...dial.check.headers },
        ...(tls ? { key: tls.key, cert: tls.cert, ca: tls.ca } : {}),
        ...(check ? { checkServerIdentity: check } : {}),
      });
      guardDial(this, address, dial);
    }
  };
}

/**
 * A client of one member's peer API (`address` = its peer listener's host:port). Its links (peer API and forward
 * channel) carry this build's peer protocol version and refuse a member that speaks one it does not accept;
 * `dial` hears about each refusal and acceptance. With TLS, whoever answers must show a member's certificate
 * (member-identity.ts): `member`'s when given (the caller knows whom it dials), any member's otherwise (a join, an
 * add by address).
 */
export function peerClient(
  address: string,
  tls?: PeerTlsOptions,
  dial: PeerDial = { check: PEER_LINK },
  member?: string,
): PeerClient {
  const url = `${tls ? 'wss' : 'ws'}://${address}${PEER_API_PATH}`;
  let refusal: DialRefusal | null = null;
  const api: PeerDial = {
    check: dial.check,
    onRefused: (at, why) => {
      refusal = why;
      dial.onRefused?.(at, why);
    },
    onAccepted: (at) => {
      refusal = null;
      dial.onAccepted?.(at);
    },
  };
  let shown: Buffer | null = null;
  const check = tls
    ? memberServerCheck(tls.peerIdFromCert, member, (cert) => {
        shown = cert.raw;
      })
    : undefined;
  // Node 20 has no global WebSocket: hand tRPC the `ws` class.
  const ws = createWSClient({
    url,
    WebSocket: linkedWebSocket(address, api, tls, check) as unknown as typeof globalThis.WebSocket,
    retryDelayMs: (n) => Math.min(2000, 50 * 2 ** n),
  });
  const forward = new ForwardClient(address, tls ? { ...tls, checkServerIdentity: check } : undefined, dial);
  return {
    api: createTRPCClient<PeerRouter>({ links: [wsLink({ client: ws })] }),
    forward,
    refusal: () => refusal,
    serverCert: () => shown,
    close: () => {
      forward.close();
      void ws.close();
    },
  };
}

/**
 * Runs `call` (a call through `c` to the member at `address`); when it fails while that member's link is refused
 * for its peer protocol version, the refusal is the error (not the timeout or reconnect error it caused).
 */
export async function orRefusal<T>(c: PeerClient, address: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const refusal = c.refusal();
    if (refusal === null) throw err;
    throw new Error(`the member at ${address} refused this one: ${refusal.reason}`);
  }
}

/**
 * The status of the member at `address`, asked once over a connection of its own (closed after), or null when it
 * does not answer within `timeout_ms` (gone, unreachable, refusing this one).
 */
export async function statusOf(address: string, tls: PeerTlsOptions, timeout_ms: number): Promise<MemberStatus | null> {
  const c = peerClient(address, tls);
  try {
    return await withTimeout(c.api.status.query(), timeout_ms, `status of ${address}`);
  } catch {
    return null;
  } finally {
    c.close();
  }
}
