/**
 * Removed cluster members (replicated, never served): one row per member id that a membership change removed and
 * no later one added again. The rows come from the Raft log's membership entries themselves, applied in log order
 * with every other command (`removalCommands`, called by the cluster's state machine), so every member holds the
 * same rows at the same index, and a member that joins later gets them in the store's snapshot. A removed id is
 * refused on the peer listener (docs/cluster.md, "A removed member stays out"): its certificate stays valid, but it
 * can no longer join by itself, send Raft messages or forward writes; only an explicit add by an operator admits the
 * id again (that membership change deletes its row).
 */
import type { ConfChange } from '../../raft/index.js';
import { defineInternalEntity, type Entity, type EntityFields } from '../api/entity.js';
import type { Command } from './rows.js';

const clusterRemovalFields = {
  /** The Raft index of the membership change that removed it. */
  confIndex: { type: 'number', filter: false },
} as const satisfies EntityFields;

export const clusterRemovals: Entity<'cluster-removals', typeof clusterRemovalFields> = defineInternalEntity(
  'cluster-removals',
  'clusterRemoval',
  clusterRemovalFields,
);

/**
 * The rows were written by the log, not by a clock: every member must write the same row, and a membership entry
 * carries no time. The row's `confIndex` says when.
 */
const LOGGED_AT = new Date(0).toISOString();

/**
 * The commands that keep the removed ids in step with the membership change at `index`: a removal records the id
 * (replacing an older record of it), an addition (learner or voter) deletes its record.
 */
export function removalCommands(cc: ConfChange, index: number): Command[] {
  const out: Command[] = [];
  for (const c of cc.changes) {
    const forget: Command = {
      op: 'delete',
      entity: 'cluster-removals',
      id: c.node,
      at: LOGGED_AT,
      system: true,
      ifExists: true,
    };
    if (c.type !== 'removeNode') {
      out.push(forget);
      continue;
    }
    const record: Command = {
      op: 'create',
      entity: 'cluster-removals',
      id: c.node,
      data: { confIndex: index },
      at: LOGGED_AT,
      system: true,
    };
    out.push({ op: 'batch', ops: [forget, record] });
  }
  return out;
}
