/**
 * Bootstrapping a new cluster (etcd's Bootstrap): the initial membership is written into the log as
 * committed `conf` entries at term 1, one `addVoter` per initial voter, so every node, including those
 * that join later and replay the log from index 1, learns the membership the same way.
 */
import type { Entry, HardState, NodeId } from '../types.js';
import { encodeConfChange } from './codec.js';
import { assert } from './util.js';

export function bootstrapEntries(voters: readonly NodeId[]): { entries: Entry[]; hardState: HardState } {
  assert(voters.length > 0, 'bootstrap: at least one voter');
  assert(new Set(voters).size === voters.length, 'bootstrap: duplicate voter');
  const entries: Entry[] = voters.map((node, i) => ({
    term: 1,
    index: i + 1,
    type: 'conf',
    data: encodeConfChange({ changes: [{ type: 'addVoter', node }] }),
  }));
  return { entries, hardState: { term: 1, vote: null, commit: entries.length } };
}
