import { fail } from '../../storage/types.js';
import type { Services } from '../api/services.js';
import type { AuthPolicyPrimary } from '../model/auth-policy.js';
import { isDisabled } from '../model/identity.js';
import type { ApplyContext, RowFor } from '../model/rows.js';

/**
 * Identity disable and password lockout (the auth policy's `primary.updb.maxAttempts` and
 * `lockoutDurationMinutes`).
 *
 * Both are custom commands, so that each node decides the same from the same log: the disable and the end of the
 * identity's API sessions happen in one apply (a session created concurrently cannot survive it), and the failed
 * attempt counter is read and moved inside apply. A failed password costs a replicated write only when the
 * identity's policy locks out (`maxAttempts` > 0); a success resets a non-zero counter in the session's batch.
 */

/** At most this many API sessions are ended by one disable (an identity has far fewer in practice). */
const MAX_SESSIONS_ENDED = 100_000;
const MINUTE_MS = 60_000;

/** The updb lockout rules of an identity's policy, or null when it does not lock out. */
export function lockoutRule(
  policy: RowFor<'auth-policies'> | undefined,
): { maxAttempts: number; lockoutDurationMinutes: number } | null {
  const updb = (policy?.primary as AuthPolicyPrimary | undefined)?.updb;
  if (!updb || !(updb.maxAttempts > 0)) return null;
  return { maxAttempts: updb.maxAttempts, lockoutDurationMinutes: updb.lockoutDurationMinutes };
}

/** The stored fields of a disable starting at `at` for `durationMinutes` (0 = until enabled). */
function disabledFields(at: string, durationMinutes: number): Record<string, unknown> {
  const until = durationMinutes > 0 ? new Date(Date.parse(at) + durationMinutes * MINUTE_MS).toISOString() : null;
  return { disabledAt: at, disabledUntil: until, failedLoginAttempts: 0 };
}

/** Ends every API session of an identity (inside apply). */
export function endSessions(ctx: ApplyContext, identityId: string, at: string): number {
  const ids = ctx.txn.lookup('api-sessions', 'identityId', identityId);
  if (ids.length > MAX_SESSIONS_ENDED)
    fail({ code: 'REJECTED', entity: 'identities', id: identityId, reason: 'too many sessions' });
  for (const id of ids) ctx.delete('api-sessions', id, at, true);
  return ids.length;
}

/** Custom command: disable an identity (`durationMinutes` 0 = indefinitely) and end its API sessions. */
export function disableIdentity(ctx: ApplyContext, args: { id: string; durationMinutes: number }, at: string): number {
  const row = ctx.txn.get('identities', args.id);
  if (!row)
    fail({ code: 'NOT_FOUND', entity: 'identities', id: args.id, reason: `identity with id ${args.id} not found` });
  ctx.update('identities', args.id, disabledFields(at, args.durationMinutes), at, true);
  return endSessions(ctx, args.id, at);
}

/** Custom command: enable an identity (clears the disable and the failed attempts). */
export function enableIdentity(ctx: ApplyContext, args: { id: string }, at: string): void {
  const row = ctx.txn.get('identities', args.id);
  if (!row)
    fail({ code: 'NOT_FOUND', entity: 'identities', id: args.id, reason: `identity with id ${args.id} not found` });
  ctx.update('identities', args.id, { disabledAt: null, disabledUntil: null, failedLoginAttempts: 0 }, at, true);
}

/**
 * Custom command: one failed password login of an identity. Counts it when the identity's policy (as applied,
 * not as the handler saw it) locks out; at `maxAttempts` the identity is disabled for `lockoutDurationMinutes`
 * (0 = until an admin enables it) and its sessions end. Returns whether this attempt locked it out.
 */
export function recordFailedLogin(ctx: ApplyContext, args: { identityId: string }, at: string): boolean {
  const identity = ctx.txn.get('identities', args.identityId);
  // the default admin is never locked out (nor disabled): a flood of bad passwords must not lock everyone out
  if (!identity || identity.isDefaultAdmin === true || isDisabled(identity, Date.parse(at))) return false;
  const rule = lockoutRule(ctx.txn.get('auth-policies', identity.authPolicyId!));
  if (!rule) return false;
  const attempts = (identity.failedLoginAttempts ?? 0) + 1;
  if (attempts < rule.maxAttempts) {
    ctx.update('identities', identity.id, { failedLoginAttempts: attempts }, at, true);
    return false;
  }
  ctx.update('identities', identity.id, disabledFields(at, rule.lockoutDurationMinutes), at, true);
  endSessions(ctx, identity.id, at);
  return true;
}

/** After a wrong password for an existing identity: counts it, but writes only when its policy locks out. */
export async function onFailedPassword(svc: Services, identity: RowFor<'identities'>): Promise<void> {
  if (identity.isDefaultAdmin === true) return;
  if (!lockoutRule(svc.get('auth-policies', identity.authPolicyId!))) return;
  if (isDisabled(identity, svc.clock.now())) return;
  try {
    const locked = await svc.write({
      op: 'custom',
      name: 'recordFailedLogin',
      args: { identityId: identity.id },
      at: svc.nowIso(),
    });
    if (locked) svc.log('warn', 'identity locked out after failed password logins', { identityId: identity.id });
  } catch (err) {
    // the login fails anyway; a write that could not be made (overload, store failure) is not the caller's answer
    svc.log('warn', 'could not record a failed login', { identityId: identity.id, err: String(err) });
  }
}

/** The reset of a non-zero failed-attempt counter, to go into a successful login's batch (or nothing). */
export function resetFailedLogins(identity: RowFor<'identities'>): Record<string, unknown> | null {
  return identity.failedLoginAttempts ? { failedLoginAttempts: 0 } : null;
}
