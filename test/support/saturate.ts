/** Fills a lane of the auth rate limiter (src/auth/rate-limit.ts) so that the next check on it is refused. */
import type { FairGate } from '../../src/auth/rate-limit.js';

/** Upper bound on the checks parked in a gate (its queue holds at most 64 plus the ones in flight). */
const MAX_PARKED = 256;

/**
 * Parks checks that hold the gate until released, from distinct sources, until its queue is at capacity: a new
 * check is then refused with 429. Returns the release, which lets the parked checks finish.
 */
function saturate(gate: FairGate): () => Promise<void> {
  let open!: () => void;
  const held = new Promise<void>((resolve) => {
    open = resolve;
  });
  const parked: Promise<unknown>[] = [];
  for (let i = 0; i < MAX_PARKED; i++) {
    const { waiting, capacity } = gate.stats();
    if (waiting > 0 && waiting >= capacity) break;
    // in flight or queued synchronously, so the stats above are current on the next round
    parked.push(gate.run(`parked-${i}`, () => held));
  }
  const { waiting, capacity } = gate.stats();
  if (!(waiting > 0 && waiting >= capacity)) throw new Error('saturate: the gate did not fill');
  return async () => {
    open();
    await Promise.all(parked);
  };
}

/** Runs `body` while `gate` is saturated, then lets the parked checks finish. */
export async function whileSaturated(gate: FairGate, body: () => Promise<void>): Promise<void> {
  const release = saturate(gate);
  try {
    await body();
  } finally {
    await release();
  }
}
