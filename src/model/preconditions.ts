import type { Expect } from './rows.js';
/**
 * Conditions on state that handlers check before proposing and that apply checks again (storage `Expect`): on a
 * cluster member the state a handler sees may lag the log, so apply decides.
 */

import { unauthorized } from '../api/errors.js';
import type { Caller } from '../api/op.js';

/** `field` of row `id` of `entity` still holds `value` (a primitive: compared with ===) where the write applies. */
export function stillEquals(
  entity: Expect['entity'],
  id: string,
  field: string,
  value: unknown,
  reason: string,
  apiCode: string,
): Expect {
  return { check: 'eq', entity, id, field, value, reason, apiCode };
}

/**
 * Row `row` of `entity` has not changed since the handler read it (its `updatedAt`): for a write computed from the
 * row's current value (a PATCH merging a sub-object into the stored one), which must not overwrite a change that
 * applied in between. The generic update handler retries such a write from the fresh row (MAX_MERGE_ATTEMPTS), so
 * the caller sees the refusal (400 on `errorField`) only when the row keeps changing. Two changes stamped with the
 * same millisecond are not told apart.
 */
export function rowUnchanged(
  entity: Expect['entity'],
  row: { id: string; updatedAt: unknown },
  errorField: string,
): Expect {
  return {
    check: 'eq',
    entity,
    id: row.id,
    field: 'updatedAt',
    value: row.updatedAt,
    reason: 'changed by another write while this one was prepared; try again',
    errorField,
  };
}

/** Whether `e` is a rowUnchanged condition on row `id` of `entity`. */
export function isRowUnchanged(e: Expect, entity: string, id: string): boolean {
  return e.check === 'eq' && e.entity === entity && e.id === id && e.field === 'updatedAt' && e.apiCode === undefined;
}

/** Identity `id` is not an admin (what a caller without admin rights may act on). */
export function targetNotAdmin(id: string): Expect {
  return {
    check: 'ne',
    entity: 'identities',
    id,
    field: 'isAdmin',
    value: true,
    reason: 'only an admin may change an admin identity or its credentials',
    apiCode: 'UNAUTHORIZED',
  };
}

/** The caller is (still) an admin: only admins make admins. */
export function callerIsAdmin(caller: Caller): Expect {
  return {
    check: 'eq',
    entity: 'identities',
    id: caller.identity.id,
    field: 'isAdmin',
    value: true,
    reason: 'only an admin may grant admin rights or permissions',
    apiCode: 'UNAUTHORIZED',
  };
}

/** No authenticator holds `username` (reported on `errorField`, as the pre-check does). */
export function usernameFree(username: string, errorField: string): Expect {
  return {
    check: 'absent',
    entity: 'authenticators',
    field: 'username',
    value: username,
    reason: `duplicate value '${username}' in unique index on authenticators store`,
    errorField,
  };
}

/**
 * The rights rule shared by identity and authenticator writes: a caller without admin rights may not act on an
 * admin identity (refused now if the local state shows one, and re-checked in apply).
 */
export function guardAdminTarget(caller: Caller | null, targetIsAdmin: boolean, targetId: string): Expect[] {
  if (!caller || caller.identity.isAdmin === true) return [];
  if (targetIsAdmin) throw unauthorized('forbidden');
  return [targetNotAdmin(targetId)];
}
