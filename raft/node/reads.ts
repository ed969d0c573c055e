/**
 * Linearizable reads (ReadIndex), batched: every caller that arrives while no request is outstanding joins the
 * next request; the answer's index serves them all. A caller resolves once the local applied index reaches it.
 * Every waiter is bounded in time (expire) and in number (max).
 */
import { RaftError } from './errors.js';

interface Waiter {
  since_ms: number;
  resolve: (index: number) => void;
  reject: (err: Error) => void;
}

interface Batch {
  context: string;
  waiters: Waiter[];
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class ReadBarrier {
  private queued: Waiter[] = [];
  private inflight: Batch | null = null;
  /** Answered batches waiting for the applied index, in index order. */
  private ready: Array<{ index: number; waiters: Waiter[] }> = [];
  private seq = 0;
  private total = 0;

  /**
   * `request` asks the core for a read index and returns false when it cannot be sent yet (no leader known, the
   * leader's queue full): the callers stay queued and the next pump retries. Anything it throws is a real failure
   * and propagates out of pump() (the callers stay queued; the driver stops the node).
   */
  constructor(
    readonly max: number,
    private readonly request: (context: Uint8Array) => boolean,
  ) {
    if (!(max > 0)) throw new RangeError('raft: maxPendingReads must be positive');
  }

  get size(): number {
    return this.total;
  }

  wait(now_ms: number): Promise<number> {
    if (this.total >= this.max) return Promise.reject(new RaftError('too-many-pending', 'too many pending reads'));
    this.total++;
    return new Promise<number>((resolve, reject) => this.queued.push({ since_ms: now_ms, resolve, reject }));
  }

  /** Sends the next request when none is outstanding. Call after wait(), after each answer and on every tick. */
  pump(): void {
    if (this.inflight !== null || this.queued.length === 0) return;
    const context = `r${++this.seq}`;
    const batch = { context, waiters: this.queued };
    this.queued = [];
    this.inflight = batch;
    let sent = false;
    try {
      sent = this.request(encoder.encode(context));
    } finally {
      if (!sent) {
        // Not sent: keep the callers queued; the next tick retries.
        this.inflight = null;
        this.queued = [...batch.waiters, ...this.queued];
      }
    }
  }

  /** An answer from the core (Ready.readStates). */
  answered(context: Uint8Array, index: number): void {
    const batch = this.inflight;
    if (batch === null || decoder.decode(context) !== batch.context) return;
    this.inflight = null;
    this.ready.push({ index, waiters: batch.waiters });
    this.ready.sort((a, b) => a.index - b.index);
  }

  /** Resolves callers whose read index is ≤ applied. */
  applied(applied: number): void {
    while (this.ready.length > 0 && this.ready[0]!.index <= applied) {
      const { index, waiters } = this.ready.shift()!;
      this.total -= waiters.length;
      for (const w of waiters) w.resolve(index);
    }
  }

  /** Rejects callers still without a read index after timeout_ms (no leader, or the request was lost). */
  expire(now_ms: number, timeout_ms: number): void {
    const expired = (w: Waiter): boolean => now_ms - w.since_ms >= timeout_ms;
    const err = (): RaftError =>
      new RaftError('timeout', `read index not confirmed within ${timeout_ms} ms (no leader?)`);
    const batch = this.inflight;
    if (batch?.waiters.some(expired)) {
      // The whole outstanding request is abandoned; its unexpired callers go back to the queue.
      this.inflight = null;
      this.queued = [...batch.waiters, ...this.queued];
    }
    if (this.queued.some(expired)) {
      const keep: Waiter[] = [];
      for (const w of this.queued) {
        if (!expired(w)) keep.push(w);
        else {
          this.total--;
          w.reject(err());
        }
      }
      this.queued = keep;
    }
  }

  /**
   * Puts the callers of an unanswered request back in the queue (leadership changed: the answer may never
   * come). A new request issued later is still linearizable for them.
   */
  requeueUnanswered(): void {
    const batch = this.inflight;
    this.inflight = null;
    if (batch === null) return;
    this.queued = [...batch.waiters, ...this.queued];
  }

  rejectAll(err: Error): void {
    const all = [...this.queued, ...(this.inflight?.waiters ?? []), ...this.ready.flatMap((r) => r.waiters)];
    this.queued = [];
    this.inflight = null;
    this.ready = [];
    this.total = 0;
    for (const w of all) w.reject(err);
  }
}
