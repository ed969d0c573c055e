/**
 * Bootstrapping a new cluster (etcd's Bootstrap): the initial membership is written into the log as
 * committed `conf` entries at term 1, one `addVoter` per initial voter, then one `addLearner` per initial
 * learner, so every node, including those that join later and replay the log from index 1, learns the
 * membership the same way.
 */
import type { Entry, HardState, NodeId } from '../types.js';
import { encodeConfChange } from './codec.js';
import { assert } from './util.js';

export function bootstrapEntries(
  voters: readonly NodeId[],
  learners: readonly NodeId[] = [],
): { entries: Entry[]; hardState: HardState } {
  assert(voters.length > 0, 'bootstrap: at least one voter');
  assert(new Set([...voters, ...learners]).size === voters.length + learners.length, 'bootstrap: duplicate member');
  const changes = [
    ...voters.map((node) => ({ type: 'addVoter' as const, node })),
    ...learners.map((node) => ({ type: 'addLearner' as const, node })),
  ];
  const entries: Entry[] = changes.map((change, i) => ({
    term: 1,
    index: i + 1,
    type: 'conf',
    data: encodeConfChange({ changes: [change] }),
  }));
  return { entries, hardState: { term: 1, vote: null, commit: entries.length } };
}
