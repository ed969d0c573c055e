import type { ForwardResult } from './forward-channel.js';

/** Bound on the commands one forward message carries. */
export const MAX_FORWARD_BATCH_ITEMS = 256;
/**
 * Bound on the command bytes one forward message carries (a single larger command still goes alone, up to the
 * forward channel's per-command cap): with the msgpack framing it stays well inside the channel's 4 MiB frames.
 */
export const MAX_FORWARD_BATCH_BYTES = 2 << 20;

/**
 * Sends one forward message carrying `items` (encoded commands) to `leader`, addressed to it as the leader of `term`
 * (it refuses them, nothing proposed, unless it leads in exactly that term). Resolves with one result per item, in
 * order; rejects when the outcome is unknown (sent, no answer); resolves with refusals when nothing was sent.
 */
export type Transmit = (leader: string, term: number, items: Uint8Array[]) => Promise<ForwardResult[]>;

interface Pending {
  item: Uint8Array;
  resolve: (r: ForwardResult) => void;
  reject: (err: unknown) => void;
}

interface Outbox {
  leader: string;
  term: number;
  pending: Pending[];
  bytes: number;
}

/**
 * Coalesces the forwards a follower makes in one turn of the event loop into one peer message per leader: the
 * commands of every request that arrived together for the same leader and term travel (and are answered) together, instead of one tRPC round trip
 * each. Each command keeps its own outcome: accepted, refused (nothing proposed), or unknown (the whole message went
 * unanswered). A message leaves at the end of the turn (setImmediate) or as soon as it is full.
 */
export class ForwardBatcher {
  /** Keyed by term and leader (outboxKey). */
  private readonly outboxes = new Map<string, Outbox>();

  constructor(private readonly transmit: Transmit) {}

  send(leader: string, term: number, item: Uint8Array): Promise<ForwardResult> {
    return new Promise<ForwardResult>((resolve, reject) => {
      const key = outboxKey(leader, term);
      let box = this.outboxes.get(key);
      if (box !== undefined && box.bytes + item.byteLength > MAX_FORWARD_BATCH_BYTES) {
        this.dispatch(key, box);
        box = undefined;
      }
      if (box === undefined) {
        const fresh: Outbox = { leader, term, pending: [], bytes: 0 };
        this.outboxes.set(key, fresh);
        setImmediate(() => this.dispatch(key, fresh));
        box = fresh;
      }
      box.pending.push({ item, resolve, reject });
      box.bytes += item.byteLength;
      if (box.pending.length >= MAX_FORWARD_BATCH_ITEMS) this.dispatch(key, box);
    });
  }

  /** Sends `box` (once: a box already sent, or replaced, is left alone). */
  private dispatch(key: string, box: Outbox): void {
    if (this.outboxes.get(key) === box) this.outboxes.delete(key);
    const leader = box.leader;
    const pending = box.pending;
    if (pending.length === 0) return;
    box.pending = [];
    let sent: Promise<ForwardResult[]>;
    try {
      sent = this.transmit(
        leader,
        box.term,
        pending.map((p) => p.item),
      );
    } catch (err) {
      sent = Promise.reject(err);
    }
    sent.then(
      (results) => {
        if (results.length !== pending.length) {
          const err = new Error(`forward to ${leader}: ${results.length} answers for ${pending.length} commands`);
          for (const p of pending) p.reject(err);
          return;
        }
        for (let i = 0; i < pending.length; i++) pending[i]!.resolve(results[i]!);
      },
      (err: unknown) => {
        for (const p of pending) p.reject(err);
      },
    );
  }
}

/** Member ids hold no NUL: one outbox per (term, leader). */
function outboxKey(leader: string, term: number): string {
  return `${term}\0${leader}`;
}
