/** Exponential backoff with jitter: attempt n waits in [base/2, base], base = min(max, min·2^n). */
export interface BackoffOptions {
  min_ms: number;
  max_ms: number;
}

export function backoffDelay_ms(attempt: number, opts: BackoffOptions, random: () => number = Math.random): number {
  if (!(opts.min_ms > 0 && opts.max_ms >= opts.min_ms)) throw new RangeError('raft transport: invalid backoff bounds');
  const exp = Math.min(Math.max(0, attempt), 30);
  const base = Math.min(opts.max_ms, opts.min_ms * 2 ** exp);
  return Math.round(base / 2 + (random() * base) / 2);
}
