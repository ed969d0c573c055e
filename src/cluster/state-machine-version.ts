/**
 * What each command needs of the cluster's state-machine version (docs/cluster.md, "Rolling upgrades"). Members of
 * two releases share one log during a rolling upgrade; a command only the newer release knows would stop every
 * older member at its entry (an unknown command fails the store) or, for a field or entity type the older release
 * does not have, be refused there and applied elsewhere. So a member proposes a command only when the cluster's
 * version (src/model/cluster-state.ts, raised by the leader once every member states it applies it) is at least
 * the version that introduced each kind the command uses; otherwise the write gets 503
 * `CLUSTER_UPGRADE_INCOMPLETE` and can be made once the last member runs the new release.
 */
import type { Command } from '../../storage/types.js';
import type { MemberStatus } from './peer-api.js';

/**
 * The kinds of command introduced after version 1, with the version that introduced them: `custom:<name>` (a custom
 * command), `entity:<name>` (any write of an entity type), `field:<entity>.<field>` (a create or update that sets
 * the field). Empty in this build: every command it proposes is of version 1. A release that raises
 * STATE_MACHINE_VERSION (src/version.ts) lists here what it added.
 */
export const INTRODUCED_IN: ReadonlyMap<string, number> = new Map<string, number>();

/** Bound on the commands (a batch's included) one check walks: beyond it the command needs the newest version. */
const MAX_WALKED_COMMANDS = 100_000;

/** The state-machine version `cmd` needs under `introduced` (1 when it uses no kind listed there). */
export function versionNeeded(cmd: Command, introduced: ReadonlyMap<string, number> = INTRODUCED_IN): number {
  if (introduced.size === 0) return 1;
  let needed = 1;
  const need = (key: string) => {
    const v = introduced.get(key);
    if (v !== undefined && v > needed) needed = v;
  };
  const stack: Command[] = [cmd];
  for (let walked = 0; stack.length > 0; walked++) {
    if (walked >= MAX_WALKED_COMMANDS) return Math.max(needed, ...introduced.values());
    const c = stack.pop()!;
    switch (c.op) {
      case 'batch':
        for (const op of c.ops) stack.push(op);
        break;
      case 'custom':
        need(`custom:${c.name}`);
        break;
      default: {
        need(`entity:${c.entity}`);
        const fields = c.op === 'create' ? c.data : c.op === 'update' ? c.set : undefined;
        if (fields !== undefined) for (const k of Object.keys(fields)) need(`field:${c.entity}.${k}`);
      }
    }
  }
  return needed;
}

/** The state-machine version a member states in its status: 1 when it states none. */
export function stateMachineVersionOf(status: MemberStatus): number {
  const v = status.stateMachineVersion;
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 1 ? v : 1;
}
