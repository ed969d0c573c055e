/**
 * The writes that take access away: ending API sessions (a logout, an admin's delete, a revocation), deleting or
 * disabling an identity, taking an identity's admin rights or changing its management permissions. On a cluster
 * member such a write is answered only once the other members have applied it too (Services.write,
 * src/cluster/applied-everywhere.ts), so the token or the right it revokes is refused on every member from the moment
 * the caller hears back.
 */
import type { Command } from './rows.js';

const REVOKING_DELETES: ReadonlySet<string> = new Set(['api-sessions', 'identities']);
const REVOKING_CUSTOM: ReadonlySet<string> = new Set(['applyRevocation', 'disableIdentity']);

/** Whether `cmd` (or a command of its batch) revokes access, as listed above. */
export function revokesAccess(cmd: Command): boolean {
  switch (cmd.op) {
    case 'delete':
      return REVOKING_DELETES.has(cmd.entity);
    case 'custom':
      return REVOKING_CUSTOM.has(cmd.name);
    case 'update':
      // an admin's rights taken, or its management permissions changed (any change may remove one)
      return cmd.entity === 'identities' && (cmd.set.isAdmin === false || Object.hasOwn(cmd.set, 'permissions'));
    case 'batch':
      return cmd.ops.some(revokesAccess);
    default:
      return false;
  }
}
