/**
 * The cluster's state-machine version (replicated, never served): the newest version every member has stated it
 * applies, raised by the leader once they all have (src/cluster/node.ts, docs/cluster.md "Rolling upgrades"). A
 * write that needs a newer version than this is refused before it reaches the log, so a member of the older
 * release never meets a command it cannot apply as the newer members do. One row, written only by
 * `raiseStateMachineVersion`; absent, the version is 1.
 */
import type { ApplyContext, CustomCommand } from '../../storage/schema.js';
import { fail, UnknownCommandError } from '../../storage/types.js';
import { defineInternalEntity, type Entity, type EntityFields } from '../api/entity.js';

/** The one row's id. */
export const CLUSTER_STATE_ID = 'cluster';

const clusterStateFields = {
  /** The cluster's state-machine version: never lowered. */
  stateMachineVersion: { type: 'number', filter: false },
} as const satisfies EntityFields;

export const clusterState: Entity<'cluster-state', typeof clusterStateFields> = defineInternalEntity(
  'cluster-state',
  'clusterState',
  clusterStateFields,
);

/** The cluster's state-machine version in `state` (1 until a leader raised it). */
export function clusterStateMachineVersion(state: {
  get(entity: 'cluster-state', id: string): Record<string, unknown> | undefined;
}): number {
  const v = state.get('cluster-state', CLUSTER_STATE_ID)?.stateMachineVersion;
  return typeof v === 'number' ? v : 1;
}

/**
 * The command that raises the cluster's version to `args.version`, for a member whose build applies versions up to
 * `supported`. A version at or below the cluster's changes nothing (a raise is never undone). A version above
 * `supported` is a command this member cannot follow: it fails the member's store (UnknownCommandError), so the
 * member stops at this entry, as it would at any command it does not know, instead of serving a state that drifts.
 */
export function raiseStateMachineVersion(supported: number): CustomCommand<{ version: number }> {
  return (ctx: ApplyContext, args: { version: number }, at: string): number => {
    const version = args?.version;
    if (!Number.isSafeInteger(version) || version < 1) {
      fail({
        code: 'INVALID',
        entity: 'cluster-state',
        field: 'stateMachineVersion',
        value: version,
        reason: 'a state-machine version is a positive integer',
      });
    }
    if (version > supported) {
      throw new UnknownCommandError(
        `state-machine version ${version} (this release applies versions up to ${supported})`,
      );
    }
    const current = clusterStateMachineVersion(ctx.txn);
    if (version <= current) return current;
    if (ctx.txn.get('cluster-state', CLUSTER_STATE_ID)) {
      ctx.update('cluster-state', CLUSTER_STATE_ID, { stateMachineVersion: version }, at, true);
    } else {
      ctx.create('cluster-state', CLUSTER_STATE_ID, { stateMachineVersion: version }, at, true);
    }
    return version;
  };
}
