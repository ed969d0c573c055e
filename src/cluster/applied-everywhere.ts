/**
 * Waits until the other members have applied what this member has: the confirmation a revocation (a logout, a
 * session or identity deleted, an identity disabled) waits for before it is answered, so the revoked token is
 * refused on every member the moment the caller hears back, not a replication lag later.
 *
 * One confirmation round asks every other member that answered its last status poll for a read barrier through
 * the peer API (`readIndex`: it resolves once that member has applied everything committed when it was asked),
 * each bounded by `timeout_ms`. A round that starts after a caller's write was applied here covers it: the write
 * was committed before it was applied here. Callers arriving while a round runs share the next one, so any number
 * of concurrent revocations costs at most two rounds in flight (one running, one queued).
 */

/** One round: resolves with the ids of the members that did not confirm within its bound. */
export type ConfirmRound = () => Promise<string[]>;

export class AppliedEverywhere {
  /** The round queued behind the running one, shared by every caller that arrives meanwhile (null: none). */
  private queued: Promise<string[]> | null = null;
  /** The round running now (null: none). */
  private running: Promise<string[]> | null = null;

  constructor(private readonly round: ConfirmRound) {}

  /** Resolves, once a round started after this call has ended, with the members that did not confirm it. */
  confirm(): Promise<string[]> {
    if (this.queued !== null) return this.queued;
    const before = this.running;
    const next = (before === null ? Promise.resolve() : before.then(noop, noop)).then(() => {
      // from now on, a caller needs a round of its own: this one may have started before its write was applied
      this.queued = null;
      const r = this.round();
      this.running = r;
      const clear = () => {
        if (this.running === r) this.running = null;
      };
      r.then(clear, clear);
      return r;
    });
    this.queued = next;
    return next;
  }
}

function noop(): void {}
