/**
 * The forward channel: how a follower hands the commands written through it to the leader. The hottest message
 * between members, so it travels as msgpack over a WebSocket of its own on the peer listener (`/peer-forward`,
 * behind the same mutual TLS as the peer API), the commands as raw bytes: no JSON, no base64, no tRPC machinery.
 *
 *   request:  [id, term, [command, …]]      1 to MAX_FORWARD_BATCH_ITEMS commands (bytes), id a positive integer,
 *                                           term (a positive integer) the term of the leader it is addressed to: the
 *                                           leader proposes them only while it leads in exactly that term, else it
 *                                           refuses them (`not-leader`, nothing proposed)
 *   answer:   [id, [result, …] | null]      result 0: accepted; [code, leader | null]: refused (nothing proposed);
 *                                           null: the leader failed to tell (outcome unknown)
 *
 * The client's outcomes keep the forward's contract (docs/cluster.md): not sent (no open connection within the
 * bound) is a definite refusal of every command; sent and answered is each command's own answer; sent and not
 * answered (the connection closed, the answer did not come in time, the leader failed) is unknown, never retried
 * blindly.
 */
import type { IncomingMessage } from 'node:http';
import { Packr } from 'msgpackr';
import WebSocket, { type WebSocketServer } from 'ws';
import { MAX_FORWARD_BATCH_ITEMS } from './forward-batch.js';
import type { ServerCheck } from './member-identity.js';
import { guardDial, PEER_LINK, type PeerDial } from './peer-protocol.js';

export const FORWARD_PATH = '/peer-forward';
/** Frame limit on both sides: a message of the batcher's byte bound, or one command of the per-command cap. */
export const MAX_FORWARD_FRAME_BYTES = 4 << 20;
/**
 * One forwarded command: above Raft's proposal cap (1 MiB), so that the leader answers a too-large command with its
 * definite `too-large` refusal instead of the frame being refused as malformed.
 */
export const MAX_FORWARD_ITEM_BYTES = 2 << 20;
/** Forward messages sent and not answered yet, per connection; beyond it a forward is refused (not sent). */
export const MAX_PENDING_FORWARDS = 4096;

/** The outcome of a forwarded proposal: accepted by the leader, or refused with nothing proposed. */
export type ForwardResult =
  | { ok: true }
  | { ok: false; code: 'not-leader' | 'overloaded' | 'too-large' | 'stopped'; leader?: string | null };

type RefusalCode = Exclude<ForwardResult, { ok: true }>['code'];
const REFUSALS: readonly RefusalCode[] = ['not-leader', 'overloaded', 'too-large', 'stopped'];
const MAX_LEADER_CHARS = 128;

const packr = new Packr({ useRecords: false, moreTypes: false });

/** A forward message that is not one this channel's client sends. */
export class ForwardFrameError extends Error {
  constructor(reason: string) {
    super(`forward channel: bad frame: ${reason}`);
    this.name = 'ForwardFrameError';
  }
}

/** A forward request: `items` addressed to the leader of `term`. */
export interface ForwardRequest {
  id: number;
  term: number;
  items: Uint8Array[];
}

export function encodeForwardRequest(id: number, term: number, items: readonly Uint8Array[]): Buffer {
  return packr.pack([id, term, items]);
}

export function decodeForwardRequest(frame: Uint8Array): ForwardRequest {
  let v: unknown;
  try {
    v = packr.unpack(frame);
  } catch {
    throw new ForwardFrameError('not msgpack');
  }
  if (!Array.isArray(v) || v.length !== 3) throw new ForwardFrameError('not [id, term, items]');
  const [id, term, items] = v as [unknown, unknown, unknown];
  if (!isId(id)) throw new ForwardFrameError('id: a positive integer');
  if (!isId(term)) throw new ForwardFrameError('term: a positive integer');
  if (!Array.isArray(items) || items.length === 0 || items.length > MAX_FORWARD_BATCH_ITEMS) {
    throw new ForwardFrameError(`items: 1 to ${MAX_FORWARD_BATCH_ITEMS} commands`);
  }
  for (const item of items) {
    if (!(item instanceof Uint8Array) || item.byteLength === 0 || item.byteLength > MAX_FORWARD_ITEM_BYTES) {
      throw new ForwardFrameError(`items[]: 1 to ${MAX_FORWARD_ITEM_BYTES} bytes`);
    }
  }
  return { id, term, items: items as Uint8Array[] };
}

export function encodeForwardAnswer(id: number, results: readonly ForwardResult[] | null): Buffer {
  return packr.pack([
    id,
    results === null ? null : results.map((r) => (r.ok ? 0 : [REFUSALS.indexOf(r.code), r.leader ?? null])),
  ]);
}

export function decodeForwardAnswer(frame: Uint8Array): { id: number; results: ForwardResult[] | null } {
  let v: unknown;
  try {
    v = packr.unpack(frame);
  } catch {
    throw new ForwardFrameError('not msgpack');
  }
  if (!Array.isArray(v) || v.length !== 2 || !isId(v[0])) throw new ForwardFrameError('not [id, results]');
  const raw = v[1] as unknown;
  if (raw === null) return { id: v[0], results: null };
  if (!Array.isArray(raw) || raw.length > MAX_FORWARD_BATCH_ITEMS) throw new ForwardFrameError('results');
  const results = raw.map((r: unknown): ForwardResult => {
    if (r === 0) return { ok: true };
    if (!Array.isArray(r) || r.length !== 2) throw new ForwardFrameError('result');
    const code = REFUSALS[r[0] as number];
    const leader = r[1] as unknown;
    const leaderOk = leader === null || (typeof leader === 'string' && leader.length <= MAX_LEADER_CHARS);
    if (code === undefined || !leaderOk) throw new ForwardFrameError('refusal');
    return { ok: false, code, leader: leader as string | null };
  });
  return { id: v[0], results };
}

/** A positive safe integer: a request id, a term. */
function isId(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v > 0;
}

/**
 * How long the leader holds the answer of a forward whose commands it all accepted, so that the answers of
 * several forwards leave together in one socket write. Nothing waits on such an answer: the follower's write
 * completes when its entry is applied there. A refusal, or a failure to tell, leaves at once (with whatever is
 * held), since the follower acts on it.
 */
export const FORWARD_ANSWER_HOLD_MS = 20;
/** Answers held per connection; at this many they leave at once. */
export const MAX_HELD_FORWARD_ANSWERS = 256;

/**
 * Serves forwards on `wss` (upgrades routed to it by the caller, after its certificate and peer protocol checks;
 * the caller's `wss` answers with this member's peer protocol headers): each request is
 * handed to `handle` (with the term it is addressed to) and answered on the same connection, an answer that only
 * accepts held up to FORWARD_ANSWER_HOLD_MS; a malformed frame closes the connection.
 */
export function serveForwards(
  wss: WebSocketServer,
  handle: (term: number, items: Uint8Array[], from: string | null) => Promise<ForwardResult[]>,
  onError: (err: Error) => void,
  opts: {
    hold_ms?: number;
    /** The member id the upgrade request's certificate vouches for (null: none, e.g. without TLS). */
    peerOf?: (req: IncomingMessage) => string | null;
  } = {},
): void {
  const hold_ms = opts.hold_ms ?? FORWARD_ANSWER_HOLD_MS;
  const peerOf = opts.peerOf ?? (() => null);
  wss.on('connection', (ws: WebSocket, req: IncomingMessage) => {
    const from = peerOf(req);
    const answers = new HeldAnswers(ws, hold_ms);
    ws.on('close', () => answers.drop());
    ws.on('error', (err) => onError(err));
    ws.on('message', (data, isBinary) => {
      if (!isBinary) {
        ws.close(1003, 'binary frames only');
        return;
      }
      let req: ForwardRequest;
      try {
        req = decodeForwardRequest(data as Buffer);
      } catch (err) {
        onError(err as Error);
        ws.close(1007, 'bad frame');
        return;
      }
      handle(req.term, req.items, from).then(
        (results) => answers.add(encodeForwardAnswer(req.id, results), results.every(isAccepted)),
        (err: unknown) => {
          onError(err as Error);
          answers.add(encodeForwardAnswer(req.id, null), false);
        },
      );
    });
  });
}

const isAccepted = (r: ForwardResult) => r.ok;

/** The answers one connection holds (serveForwards): sent together, in one socket write where the socket allows. */
class HeldAnswers {
  private frames: Buffer[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly ws: WebSocket,
    private readonly hold_ms: number,
  ) {}

  /** Holds `frame` (an answer that only accepts), or sends it now with everything held. */
  add(frame: Buffer, holdable: boolean): void {
    this.frames.push(frame);
    if (!holdable || this.hold_ms <= 0 || this.frames.length >= MAX_HELD_FORWARD_ANSWERS) this.flush();
    else if (this.timer === null) this.timer = setTimeout(() => this.flush(), this.hold_ms);
  }

  /** The connection closed: what it held goes nowhere (the follower's forwards on it end unanswered). */
  drop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.frames = [];
  }

  private flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const frames = this.frames;
    this.frames = [];
    if (frames.length === 0 || this.ws.readyState !== WebSocket.OPEN) return;
    // ws writes each frame to its socket on its own; corked, the frames leave in one write (one TLS write, one
    // wake-up of the follower) instead of one each
    const socket = (this.ws as unknown as { _socket?: { cork?: () => void; uncork?: () => void } })._socket;
    socket?.cork?.();
    try {
      for (const f of frames) this.ws.send(f, { binary: true });
    } finally {
      socket?.uncork?.();
    }
  }
}

export interface ForwardTls {
  key: string | Buffer;
  cert: string | Buffer;
  ca: string | Buffer | Array<string | Buffer>;
  /** Who may answer (member-identity.ts): a member's certificate, not only one for the address's host name. */
  checkServerIdentity?: ServerCheck;
}

interface Pending {
  /** The connection it was sent on: only that one closing leaves it unanswered. */
  ws: WebSocket;
  resolve: (r: ForwardResult[]) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/** The forward channel to one member (its peer listener at `address`); dials when a forward needs it. */
export class ForwardClient {
  private ws: WebSocket | null = null;
  private opening: Promise<boolean> | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closed = false;

  constructor(
    private readonly address: string,
    private readonly tls?: ForwardTls,
    /** The peer protocol check of each connection (peer-protocol.ts): a refused member is never sent a frame. */
    private readonly dial: PeerDial = { check: PEER_LINK },
  ) {}

  /**
   * Sends one forward message, addressed to the leader of `term` (the term in which this member saw it lead).
   * Resolves with one result per command once answered; with null when it was not sent
   * (no open connection within `connect_ms`, too many unanswered): nothing was proposed. Rejects when it was sent
   * and no answer came (the connection closed, `answer_ms` passed, the leader failed to tell): outcome unknown.
   */
  async send(
    term: number,
    items: readonly Uint8Array[],
    connect_ms: number,
    answer_ms: number,
  ): Promise<ForwardResult[] | null> {
    if (!(await this.open(connect_ms))) return null;
    const ws = this.ws;
    if (ws === null || ws.readyState !== WebSocket.OPEN || this.pending.size >= MAX_PENDING_FORWARDS) return null;
    const id = this.nextId++;
    return new Promise<ForwardResult[]>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`forward to ${this.address}: no answer within ${answer_ms} ms`));
      }, answer_ms);
      timer.unref();
      this.pending.set(id, { ws, resolve, reject, timer });
      ws.send(encodeForwardRequest(id, term, items), { binary: true });
    });
  }

  close(): void {
    this.closed = true;
    const ws = this.ws;
    this.ws = null;
    ws?.terminate();
    this.failPending(null, new Error(`forward channel to ${this.address} closed`));
  }

  /** True once a connection is open (at once when it is), false after `timeout_ms` or when it fails. */
  private open(timeout_ms: number): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.ws !== null && this.ws.readyState === WebSocket.OPEN) return Promise.resolve(true);
    if (this.opening !== null) return this.opening;
    const opening = new Promise<boolean>((resolve) => {
      const tls = this.tls;
      const ws = new WebSocket(`${tls ? 'wss' : 'ws'}://${this.address}${FORWARD_PATH}`, {
        maxPayload: MAX_FORWARD_FRAME_BYTES,
        perMessageDeflate: false,
        handshakeTimeout: timeout_ms,
        headers: { ...this.dial.check.headers },
        ...(tls ? { key: tls.key, cert: tls.cert, ca: tls.ca } : {}),
        ...(tls?.checkServerIdentity ? { checkServerIdentity: tls.checkServerIdentity } : {}),
      });
      guardDial(ws, this.address, this.dial);
      this.ws = ws;
      const timer = setTimeout(() => settle(false), timeout_ms);
      timer.unref();
      let settled = false;
      const settle = (ok: boolean) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (this.opening === opening) this.opening = null;
        if (!ok && this.ws === ws) {
          this.ws = null;
          ws.terminate();
        }
        resolve(ok);
      };
      ws.on('open', () => settle(true));
      ws.on('error', () => settle(false));
      ws.on('message', (data) => this.onAnswer(ws, data as Buffer));
      ws.on('close', () => {
        settle(false);
        if (this.ws === ws) this.ws = null;
        this.failPending(ws, new Error(`forward channel to ${this.address} closed before answering`));
      });
    });
    this.opening = opening;
    return opening;
  }

  private onAnswer(ws: WebSocket, frame: Buffer): void {
    let answer: { id: number; results: ForwardResult[] | null };
    try {
      answer = decodeForwardAnswer(frame);
    } catch {
      ws.terminate(); // every request on it ends unknown (close)
      return;
    }
    const p = this.pending.get(answer.id);
    if (p === undefined) return; // answered after its timeout
    this.pending.delete(answer.id);
    clearTimeout(p.timer);
    if (answer.results === null) p.reject(new Error(`forward to ${this.address}: the leader failed to tell`));
    else p.resolve(answer.results);
  }

  /** Rejects what was sent on `ws` (on any connection: null) and is still unanswered. */
  private failPending(ws: WebSocket | null, err: Error): void {
    for (const [id, p] of this.pending) {
      if (ws !== null && p.ws !== ws) continue;
      this.pending.delete(id);
      clearTimeout(p.timer);
      p.reject(err);
    }
  }
}
