/**
 * Majority and joint-majority arithmetic (etcd's quorum package).
 * A joint configuration needs a majority of *both* the incoming and the outgoing voter sets; an empty
 * set imposes no constraint (it "wins" every vote and never limits the commit index).
 */
import type { NodeId } from '../types.js';

export type VoteResult = 'won' | 'lost' | 'pending';

/** Commit index for an empty voter set: no constraint. */
export const NO_COMMIT_LIMIT = Number.MAX_SAFE_INTEGER;

/** Largest index acknowledged by a majority of `voters`. */
export function majorityCommittedIndex(voters: ReadonlySet<NodeId>, acked: (id: NodeId) => number): number {
  const n = voters.size;
  if (n === 0) return NO_COMMIT_LIMIT;
  if (n > scratch.length) scratch = new Float64Array(Math.max(n, 2 * scratch.length));
  // asked on every acknowledgement: sorted in place in the reused buffer (insertion sort: n is the voter count)
  let i = 0;
  for (const id of voters) {
    const v = acked(id);
    let j = i++;
    for (; j > 0 && scratch[j - 1]! > v; j--) scratch[j] = scratch[j - 1]!;
    scratch[j] = v;
  }
  return scratch[n - (Math.floor(n / 2) + 1)]!;
}

/** The acknowledged indexes of one commit computation; grown (never shrunk) to the largest voter set seen. */
let scratch = new Float64Array(16);

export function majorityVoteResult(voters: ReadonlySet<NodeId>, vote: (id: NodeId) => boolean | undefined): VoteResult {
  const n = voters.size;
  if (n === 0) return 'won';
  let yes = 0;
  let missing = 0;
  for (const id of voters) {
    const v = vote(id);
    if (v === undefined) missing++;
    else if (v) yes++;
  }
  const q = Math.floor(n / 2) + 1;
  if (yes >= q) return 'won';
  if (yes + missing >= q) return 'pending';
  return 'lost';
}

export function jointCommittedIndex(
  incoming: ReadonlySet<NodeId>,
  outgoing: ReadonlySet<NodeId>,
  acked: (id: NodeId) => number,
): number {
  return Math.min(majorityCommittedIndex(incoming, acked), majorityCommittedIndex(outgoing, acked));
}

export function jointVoteResult(
  incoming: ReadonlySet<NodeId>,
  outgoing: ReadonlySet<NodeId>,
  vote: (id: NodeId) => boolean | undefined,
): VoteResult {
  const r1 = majorityVoteResult(incoming, vote);
  const r2 = majorityVoteResult(outgoing, vote);
  if (r1 === r2) return r1;
  if (r1 === 'lost' || r2 === 'lost') return 'lost';
  return 'pending';
}
