// Timeouts of one fixed duration, one timer per queue for all its entries. Its users, a queue each: the timeout of a
// request whose handler is pending (app.ts), of a body being read (the uWS engine), and a proposal's budget (the
// cluster's proposer, applyTimeout_ms). Each deadline falls `duration_ms` after it was set, so the order they were
// set in is the order they fall due: the queue is a list kept in that order, adding and cancelling are O(1) and
// allocate nothing beyond the entry the caller already has, instead of a Node timer object (and a closure) per entry.
// The queue holds what its users hold: each bounds its own entries (requests in flight, proposals waiting), so it
// adds no bound.

/** An entry of a DeadlineQueue: extend it (the queue links entries through these fields). */
export class Deadline {
  /** When it falls due (performance.now() time), or -1 while not queued. */
  due_ms = -1;
  prevDue: Deadline | null = null;
  nextDue: Deadline | null = null;
}

/** Upper bound on entries expired in one timer callback; the rest go in the next one, scheduled at once. */
const MAX_EXPIRED_PER_RUN = 4096;

export class DeadlineQueue<T extends Deadline> {
  private head: T | null = null;
  private tail: T | null = null;
  private count = 0;
  private timer: NodeJS.Timeout | null = null;

  /** `expire` is called with each entry whose deadline passed, after it left the queue. */
  constructor(
    readonly duration_ms: number,
    private readonly expire: (entry: T) => void,
  ) {
    if (!(Number.isFinite(duration_ms) && duration_ms > 0)) throw new RangeError('DeadlineQueue: duration_ms > 0');
  }

  get size(): number {
    return this.count;
  }

  /** Queues `entry` (not already queued) to expire `duration_ms` from now. */
  add(entry: T): void {
    if (entry.due_ms !== -1) throw new Error('DeadlineQueue: entry already queued');
    entry.due_ms = performance.now() + this.duration_ms;
    entry.prevDue = this.tail;
    entry.nextDue = null;
    if (this.tail === null) this.head = entry;
    else this.tail.nextDue = entry;
    this.tail = entry;
    this.count++;
    if (this.timer === null) this.arm(entry.due_ms);
  }

  /** Takes `entry` out of the queue; false when it was not queued (expired already, cancelled, never added). */
  cancel(entry: T): boolean {
    if (entry.due_ms === -1) return false;
    const prev = entry.prevDue as T | null;
    const next = entry.nextDue as T | null;
    if (prev === null) this.head = next;
    else prev.nextDue = next;
    if (next === null) this.tail = prev;
    else next.prevDue = prev;
    entry.prevDue = null;
    entry.nextDue = null;
    entry.due_ms = -1;
    this.count--;
    // the timer stays armed: when it fires it finds nothing due and is armed again for the head, if any
    return true;
  }

  private arm(due_ms: number): void {
    this.timer = setTimeout(() => this.run(), Math.max(1, Math.ceil(due_ms - performance.now())));
    this.timer.unref(); // a pending deadline alone must not keep the process alive
  }

  private run(): void {
    this.timer = null;
    const now = performance.now();
    const expired: T[] = [];
    while (expired.length < MAX_EXPIRED_PER_RUN) {
      const entry = this.head;
      if (entry === null || entry.due_ms > now) break;
      this.cancel(entry);
      expired.push(entry);
    }
    // armed before the callbacks run (they may queue entries, or throw)
    if (this.head !== null) this.arm(this.head.due_ms);
    for (const entry of expired) this.expire(entry);
  }
}
