import { availableParallelism } from 'node:os';
import { Errors } from '../../http/errors.js';

/**
 * The authentication rate limiter: a gate in front of expensive credential checks (argon2) with a bounded,
 * adaptive queue and per-source fairness.
 *
 * - At most `maxInFlight` checks run at once; the others wait in a queue per source (client address), served
 *   round robin, so one flooding client cannot starve the others.
 * - The queue is bounded twice: by `maxWaiting` overall and `maxWaitingPerSource` per source, and adaptively by
 *   the time a newcomer would wait: the gate keeps a moving average of how long a check takes and refuses
 *   (429 `SERVER_TOO_MANY_REQUESTS`, as OpenZiti's adaptive auth limiter does) when the queue ahead would take
 *   longer than `targetWait_ms`. Under a flood the excess gets 429 at once instead of a slow 401 or a timeout.
 */
export interface GateOptions {
  maxInFlight: number;
  maxWaiting: number;
  maxWaitingPerSource: number;
  /** A newcomer is refused when the checks queued ahead of it would take longer than this. */
  targetWait_ms: number;
}

/** Weight of the newest sample in the moving average of a check's duration. */
const EWMA_WEIGHT = 0.2;
/** The first estimate of a check's duration, before any was measured. */
const INITIAL_SERVICE_MS = 50;

/** A queued credential check: started (`resolve`: the slot is its) or refused (`reject`: evicted, 429). */
interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class FairGate {
  private inFlight = 0;
  private waiting = 0;
  /** Waiters per source; the Map's order is the round-robin order (a served source moves to the end). */
  private readonly queues = new Map<string, Waiter[]>();
  private service_ms = INITIAL_SERVICE_MS;

  constructor(private readonly opts: GateOptions) {
    if (!(opts.maxInFlight >= 1 && opts.maxWaiting >= 0 && opts.maxWaitingPerSource >= 1)) {
      throw new RangeError('FairGate: bad bounds');
    }
  }

  /** How many may wait now: the hard bound, lowered to what can be served within `targetWait_ms`. */
  capacity(): number {
    const servable = Math.floor((this.opts.targetWait_ms * this.opts.maxInFlight) / this.service_ms);
    return Math.max(1, Math.min(this.opts.maxWaiting, servable));
  }

  stats(): { inFlight: number; waiting: number; service_ms: number; capacity: number } {
    return { inFlight: this.inFlight, waiting: this.waiting, service_ms: this.service_ms, capacity: this.capacity() };
  }

  /** When a refused caller may try again: once the queue ahead has drained (whole seconds, at least 1, at most 60). */
  retryAfter_s(): number {
    const drain_ms = ((this.waiting + 1) * this.service_ms) / this.opts.maxInFlight;
    return Math.min(60, Math.max(1, Math.ceil(drain_ms / 1_000)));
  }

  async run<T>(source: string, work: () => Promise<T>): Promise<T> {
    if (this.inFlight < this.opts.maxInFlight && this.waiting === 0) {
      this.inFlight++;
    } else {
      const queue = this.queues.get(source);
      const held = queue?.length ?? 0;
      if (held >= this.opts.maxWaitingPerSource) throw this.refusal();
      if (this.waiting >= this.capacity() && !this.evictFromLargest(held)) throw this.refusal();
      // the slot is handed over by `release` (inFlight stays counted for us)
      await new Promise<void>((resolve, reject) => {
        const waiter = { resolve, reject };
        if (queue) queue.push(waiter);
        else this.queues.set(source, [waiter]);
        this.waiting++;
      });
    }
    const started = performance.now();
    try {
      return await work();
    } finally {
      this.service_ms += EWMA_WEIGHT * (performance.now() - started - this.service_ms);
      this.release();
    }
  }

  private refusal() {
    return Errors.SERVER_TOO_MANY_REQUESTS(undefined, { headers: { 'retry-after': String(this.retryAfter_s()) } });
  }

  /**
   * A full queue and a newcomer whose source holds `held` waiters: the source holding the most waiters, when it
   * holds at least two more than that, gives up its newest one (429) to the newcomer. So however a flooding source
   * filled the queue, another source always gets a place (max-min fairness): one client cannot lock others out.
   * Bounded by the sources waiting (at most maxWaiting).
   */
  private evictFromLargest(held: number): boolean {
    let largest: Waiter[] | undefined;
    for (const queue of this.queues.values()) if (queue.length > (largest?.length ?? 0)) largest = queue;
    if (largest === undefined || largest.length < held + 2) return false;
    const evicted = largest.pop()!;
    this.waiting--;
    if (largest.length === 0) {
      for (const [source, queue] of this.queues) if (queue === largest) this.queues.delete(source);
    }
    evicted.reject(this.refusal());
    return true;
  }

  /** Passes the slot to the next source in round-robin order, or frees it. */
  private release(): void {
    for (const [source, queue] of this.queues) {
      const next = queue.shift()!;
      this.queues.delete(source);
      if (queue.length > 0) this.queues.set(source, queue); // to the end of the round
      this.waiting--;
      if (!(this.waiting >= 0)) throw new Error('FairGate: waiting count went negative');
      next.resolve();
      return;
    }
    this.inFlight--;
    if (!(this.inFlight >= 0)) throw new Error('FairGate: in-flight count went negative');
  }
}

/**
 * Ordinary logins may keep every core busy with argon2 (full login throughput), but at most 3 checks: libuv's
 * pool has 4 threads, and the 4th is the admin lane's, so an admin's check never waits for a thread.
 */
export const LOGIN_IN_FLIGHT = Math.max(1, Math.min(3, availableParallelism()));

/**
 * The two lanes of password checks. libuv runs argon2 on its thread pool (4 threads by default): logins share
 * three of them, and an admin's login has a lane of its own (one check at a time, a short queue), so an admin gets
 * in promptly during a flood of bad logins — OpenZiti likewise lets admins bypass its auth limiter. The admin lane
 * is for a credential that names an admin *and* comes from a source (client address) an admin logged in from
 * within ADMIN_SOURCE_TTL_MS (`recordAdminLogin`). Anyone else naming an admin waits in the logins' lane like any
 * login: so an unauthenticated client cannot fill the admin lane, nor tell an admin's username from any other by
 * how the lanes answer (a lane chosen by the username alone would refuse an admin's name sooner).
 */
export const loginGate = new FairGate({
  maxInFlight: LOGIN_IN_FLIGHT,
  maxWaiting: 64,
  maxWaitingPerSource: 16,
  targetWait_ms: 1_000,
});
export const adminGate = new FairGate({ maxInFlight: 1, maxWaiting: 4, maxWaitingPerSource: 4, targetWait_ms: 1_000 });

/** Who asks for a credential check: the client's address (fairness) and whether the credential names an admin. */
export interface LoginSource {
  source: string;
  admin?: boolean;
}

/** How long a source an admin logged in from keeps the admin lane for admins' credentials. */
export const ADMIN_SOURCE_TTL_MS = 24 * 60 * 60 * 1_000;
/** Bound on the sources remembered (the oldest is forgotten first). */
export const MAX_ADMIN_SOURCES = 1_024;
/** Sources an admin logged in from → until when they keep the admin lane (ms); insertion order = age. */
const adminSources = new Map<string, number>();

/** An admin logged in from `source` (any method): admins' credentials from there take the admin lane for a day. */
export function recordAdminLogin(source: string, now_ms = Date.now()): void {
  adminSources.delete(source);
  adminSources.set(source, now_ms + ADMIN_SOURCE_TTL_MS);
  if (adminSources.size > MAX_ADMIN_SOURCES) adminSources.delete(adminSources.keys().next().value!);
}

/** Whether `source` keeps the admin lane (an admin logged in from it within ADMIN_SOURCE_TTL_MS). */
export function isAdminSource(source: string, now_ms = Date.now()): boolean {
  const until = adminSources.get(source);
  if (until === undefined) return false;
  if (until > now_ms) return true;
  adminSources.delete(source);
  return false;
}

/**
 * The lane of a credential check: the admin lane when the credential names an admin and comes from a source an
 * admin logged in from, else the logins' lane.
 */
function gateOf(who: LoginSource): FairGate {
  return who.admin === true && isAdminSource(who.source) ? adminGate : loginGate;
}

/** Runs one credential check (password, certificate chain, external JWT) through its lane of the limiter. */
export function gated<T>(who: LoginSource, work: () => Promise<T>): Promise<T> {
  return gateOf(who).run(who.source, work);
}
