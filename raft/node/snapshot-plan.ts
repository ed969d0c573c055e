import { assert } from '../core/util.js';
import type { NodeId } from '../types.js';

/** What the next snapshot's planning depends on. */
export interface SnapshotPlanInput {
  /** snapshotEvery_entries (> 0). */
  every: number;
  /** The applied index of the last snapshot (taken or installed), or the start's. */
  last: number;
  /** This node's applied index now. */
  applied: number;
  /** snapshotStagger: phase-shifted points instead of N after the last snapshot. */
  stagger: boolean;
  self: NodeId;
  voters: readonly NodeId[];
}

/**
 * The applied index at which the next snapshot is due. Not staggered: N after `last`. Staggered: where the applied
 * index next crosses, after `last`, a multiple of N shifted by this node's phase, rank × N ÷ voters (its rank among
 * the voters' ids in code-unit order; 0 when not a voter). A membership change moves the phase, which may put that
 * point at or below `applied`: it is then planned from `applied` instead (not taken at once, right after the last
 * snapshot, with every member whose phase moved the same way).
 */
export function planSnapshotAt(p: SnapshotPlanInput): number {
  assert(Number.isSafeInteger(p.every) && p.every > 0, `snapshot interval ${p.every}`);
  if (!p.stagger) return p.last + p.every;
  let rank = 0;
  let member = false;
  for (const v of p.voters) {
    if (v === p.self) member = true;
    else if (v < p.self) rank++;
  }
  const phase = member ? Math.floor((rank * p.every) / p.voters.length) : 0;
  if (!(phase >= 0 && phase < p.every)) assert(false, `snapshot phase ${phase} outside [0, ${p.every})`);
  const after = (from: number) => (Math.floor((from + phase) / p.every) + 1) * p.every - phase;
  let at = after(p.last);
  if (!(at > p.last && at <= p.last + p.every)) assert(false, `snapshot planned at ${at} after ${p.last}`);
  if (at <= p.applied) at = after(p.applied);
  return at;
}
