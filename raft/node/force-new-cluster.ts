/**
 * Quorum-loss recovery (etcd's --force-new-cluster): makes this member the only voter of its log, so that it
 * elects itself and the cluster goes on with its data once the majority is gone for good. Unsafe by design: a
 * majority that still exists elsewhere would go on as a second cluster; only for members that are not coming back.
 */
import { encodeConfChange } from '../core/codec.js';
import { confMembers, type DurableLog } from '../storage/durable-log.js';
import type { Entry, NodeId } from '../types.js';

/**
 * Appends, after the last entry of `log`, one committed membership change per other member removing it (voters
 * and learners, one at a time: simple changes), and commits every entry the log holds: what this member has is
 * what the new cluster starts from (nothing it holds is dropped, committed elsewhere or not). The driver applies
 * them on start like any committed entries. Returns the ids removed (empty: `self` was already alone).
 */
export async function forceNewCluster(log: DurableLog, self: NodeId): Promise<NodeId[]> {
  const { conf } = log.appliedConf();
  const members = confMembers(conf);
  if (!members.has(self)) throw new Error(`raft: ${self} is not a member of its own log's configuration`);
  if (conf.votersOutgoing.length > 0 || conf.learnersNext.length > 0) {
    throw new Error('raft: the configuration is joint (a membership change was under way): not forced');
  }
  const others = [...members].filter((id) => id !== self).sort();
  if (others.length === 0) return [];
  const hs = log.initialState().hardState;
  const last = log.lastIndex();
  const term = Math.max(hs.term, log.term(last), 1);
  const entries: Entry[] = others.map((node, i) => ({
    index: last + 1 + i,
    term,
    type: 'conf',
    data: encodeConfChange({ changes: [{ type: 'removeNode', node }] }),
  }));
  await log.persist({ snapshot: null, entries, hardState: { term, vote: self, commit: last + others.length } });
  return others;
}
