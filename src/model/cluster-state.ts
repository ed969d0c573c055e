/**
 * The cluster's state-machine version (replicated, never served): the newest version every member has stated it
 * applies, raised by the leader once they all have (src/cluster/node.ts, docs/cluster.md "Rolling upgrades"). A
 * write that needs a newer version than this is refused before it reaches the log, so a member of the older
 * release never meets a command it cannot apply as the newer members do. One row, written only by
 * `raiseStateMachineVersion`; absent, the version is 1.
 */
import type { ApplyContext, CustomCommand } from '../../storage/schema.js';
import type { Store } from '../../storage/store.js';
import { fail, UnknownCommandError } from '../../storage/types.js';
import { defineInternalEntity, type Entity, type EntityFields } from '../api/entity.js';
import { KEEL_VERSION } from '../version.js';

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
 * Why a member whose release applies versions up to `supported` cannot go on with `store` (the cluster was raised
 * past its release: a downgrade, or a snapshot installed from newer members), or null. A store of another schema
 * (the storage library's tests) has no such row.
 */
export function releaseTooOld(store: Store, supported: number): string | null {
  if (!store.schema.defs.has('cluster-state')) return null;
  const cluster = clusterStateMachineVersion(store);
  if (cluster <= supported) return null;
  return `the cluster applies state-machine version ${cluster}; this release (Keel ${KEEL_VERSION}) applies versions up to ${supported}: run a newer release on this data`;
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
