/**
 * Quorum-loss recovery (etcd's --force-new-cluster): makes this member the only voter of its log, so that it
 * elects itself and the cluster goes on with its data once the majority is gone for good. Unsafe by design: a
 * majority that still exists elsewhere would go on as a second cluster; only for members that are not coming back.
 */
import { decodeConfChange, encodeConfChange } from '../core/codec.js';
import { computeConfChange, restoreTracker } from '../core/confchange.js';
import { ProgressTracker } from '../core/tracker.js';
import { confMembers, type DurableLog } from '../storage/durable-log.js';
import type { ConfChangeSingle, ConfState, Entry, NodeId } from '../types.js';

/**
 * The configuration the whole of `log` leads to: the one applied, then the membership changes in the entries after
 * it (the log's tail, which forceNewCluster commits too), under the core's own rules (an invalid one throws).
 */
function confAtEnd(log: DurableLog, last: number): ConfState {
  const applied = log.appliedConf();
  let tracker = restoreTracker(applied.conf, last, 1);
  const from = Math.max(applied.index + 1, log.firstIndex());
  for (const e of from <= last ? log.entries(from, last + 1, Infinity) : []) {
    if (e.type !== 'conf') continue;
    const r = computeConfChange(tracker, decodeConfChange(e.data), e.index);
    tracker = new ProgressTracker(r.config, r.progress, 1);
  }
  return tracker.confState();
}

/**
 * Appends, after the last entry of `log`, committed membership changes, one at a time (simple changes): `self`
 * made a voter if it is a learner, then every other member (voter or learner) removed; and commits every entry
 * the log holds: what this member has is what the new cluster starts from (nothing it holds is dropped,
 * committed elsewhere or not). The members are those of the configuration the whole log leads to (confAtEnd).
 * The driver applies them on start like any committed entries. Returns the ids removed (empty: `self` was
 * already alone).
 */
export async function forceNewCluster(log: DurableLog, self: NodeId): Promise<NodeId[]> {
  const last = log.lastIndex();
  const conf = confAtEnd(log, last);
  const members = confMembers(conf);
  if (!members.has(self)) throw new Error(`raft: ${self} is not a member of its own log's configuration`);
  if (conf.votersOutgoing.length > 0 || conf.learnersNext.length > 0) {
    throw new Error('raft: the configuration is joint (a membership change was under way): not forced');
  }
  const others = [...members].filter((id) => id !== self).sort();
  const promote = conf.learners.includes(self);
  if (others.length === 0 && !promote) return [];
  // a learner first becomes a voter: removing the voters before would leave a configuration without any
  const changes: ConfChangeSingle[] = [
    ...(promote ? [{ type: 'addVoter' as const, node: self }] : []),
    ...others.map((node) => ({ type: 'removeNode' as const, node })),
  ];
  const hs = log.initialState().hardState;
  const term = Math.max(hs.term, log.term(last), 1);
  const entries: Entry[] = changes.map((change, i) => ({
    index: last + 1 + i,
    term,
    type: 'conf',
    data: encodeConfChange({ changes: [change] }),
  }));
  await log.persist({ snapshot: null, entries, hardState: { term, vote: self, commit: last + entries.length } });
  return others;
}
