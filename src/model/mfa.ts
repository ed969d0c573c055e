import { randomInt } from 'node:crypto';
import { generateSecret, generateURI, verify } from 'otplib';
import { fail } from '../../storage/types.js';
import { defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import type { Services } from '../api/services.js';
import { s } from '../schema/s.js';
import type { ApplyContext, RowFor } from './rows.js';

/**
 * TOTP MFA enrollments, one per identity (RFC 6238: SHA-1, 6 digits, 30 s — what authenticator apps expect).
 *
 * The secret and the recovery codes are credentials: never filterable, never logged, and rendered only by
 * `GET /current-identity/mfa` before the enrollment is verified (as OpenZiti does); the recovery codes afterwards
 * only to their identity with a valid code.
 */
export const MFA_ISSUER = 'ziti.dev';
export const RECOVERY_CODE_COUNT = 20;
const RECOVERY_CODE_LENGTH = 8;
const RECOVERY_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
/** Codes of the previous and next 30 s step are accepted too (clock skew between phone and controller). */
const TOLERANCE_S = 30;
/** Anything longer is neither a TOTP nor a recovery code: refused before any work. */
export const MAX_CODE_LENGTH = 64;
/**
 * Wrong codes on `POST /authenticate/mfa` a partial session may send before it is ended: 6-digit codes must not be
 * guessable by a flood on one session. Counted on the session's row (countMfaFailure), so on every node at once.
 */
export const MAX_MFA_FAILURES = 5;

export const detailMfa = detailSchema(
  'detailMfa',
  s.obj({ isVerified: s.bool(), provisioningUrl: s.str(), recoveryCodes: s.arr(s.str()) }, ['isVerified']),
);

const mfaFields = {
  identityId: {
    type: 'string',
    unique: true,
    ref: { entity: 'identities', onDelete: 'cascade' },
    conflictCode: 'MFA_EXISTS',
  },
  isVerified: { type: 'bool' },
  secret: { type: 'string', filter: false },
  recoveryCodes: { type: 'string', set: true, filter: false },
  /** The time step of the last TOTP a login used: a code is accepted once (useTotp). */
  lastTimeStep: { type: 'number', filter: false },
} as const satisfies EntityFields;

export const mfas: Entity<'mfas', typeof mfaFields> = defineEntity({
  name: 'mfas',
  type: 'mfa',
  tag: 'MFA',
  singular: 'Mfa',
  plural: 'Mfas',
  permission: 'identity',
  fields: mfaFields,
  detail: detailMfa,
  // served only through the current-identity and identity MFA operations (src/ops/mfa.ts)
  operations: { list: false, detail: false, create: false, update: false, patch: false, delete: false },
  toApi: (row) => ({ isVerified: row.isVerified === true }),
  reads: [],
});

export function newRecoveryCodes(): string[] {
  return Array.from({ length: RECOVERY_CODE_COUNT }, () =>
    Array.from({ length: RECOVERY_CODE_LENGTH }, () => RECOVERY_ALPHABET[randomInt(RECOVERY_ALPHABET.length)]).join(''),
  );
}

export function newTotpSecret(): string {
  return generateSecret();
}

export function provisioningUrl(secret: string, identityName: string): string {
  return generateURI({ issuer: MFA_ISSUER, label: identityName, secret });
}

/** The identity's MFA row, if any. */
export function mfaOf(svc: Services, identityId: string): RowFor<'mfas'> | undefined {
  const ids = svc.store.lookup('mfas', 'identityId', identityId);
  return ids.length === 1 ? svc.get('mfas', ids[0]!) : undefined;
}

/** The 30 s time step `code` is the TOTP of (now on the controller's clock, give or take one step), or null. */
export async function totpStep(svc: Services, secret: string, code: string): Promise<number | null> {
  if (!/^[0-9]{6}$/.test(code)) return null;
  try {
    const r = await verify({
      secret,
      token: code,
      epoch: Math.floor(svc.clock.now() / 1000),
      epochTolerance: TOLERANCE_S,
    });
    return r.valid && 'timeStep' in r ? r.timeStep : null;
  } catch {
    return null;
  }
}

/** Whether `code` is a current TOTP of `secret` (for checks that spend nothing: replays are harmless there). */
export async function isValidTotp(svc: Services, secret: string, code: string): Promise<boolean> {
  return (await totpStep(svc, secret, code)) !== null;
}

/** A failed spend of a code: one recorded error for both kinds, so that the answer does not tell which failed. */
function failSpend(mfaId: string): never {
  fail({ code: 'INVALID', entity: 'mfas', id: mfaId, reason: 'invalid or spent code', apiCode: 'MFA_INVALID_TOKEN' });
}

/** Spends a code of the enrollment (`set` records it) and completes the API session's MFA. */
function spendCode(
  ctx: ApplyContext,
  mfa: RowFor<'mfas'>,
  set: Record<string, unknown>,
  sessionId: string,
  at: string,
): void {
  ctx.update('mfas', mfa.id, set, at, true);
  if (ctx.txn.get('api-sessions', sessionId))
    ctx.update('api-sessions', sessionId, { isMfaComplete: true, mfaCompletedAt: at }, at, true);
}

/**
 * Custom command: a login's TOTP (RFC 6238 §5.2: a code is accepted once) completes the API session's MFA. The
 * code's time step must be later than the last one used, decided in apply, so two sessions racing with one code
 * get one success.
 */
export function useTotp(
  ctx: ApplyContext,
  args: { mfaId: string; timeStep: number; sessionId: string },
  at: string,
): void {
  const mfa = ctx.txn.get('mfas', args.mfaId);
  if (mfa?.isVerified !== true || (mfa.lastTimeStep ?? -1) >= args.timeStep) {
    failSpend(args.mfaId);
  }
  spendCode(ctx, mfa, { lastTimeStep: args.timeStep }, args.sessionId, at);
}

/**
 * Custom command: spends one recovery code of an identity's verified MFA — each works once, even when two
 * requests race with the same code (apply decides) — and completes the API session's MFA.
 */
export function useRecoveryCode(
  ctx: ApplyContext,
  args: { mfaId: string; code: string; sessionId: string },
  at: string,
): void {
  const mfa = ctx.txn.get('mfas', args.mfaId);
  const codes = mfa?.recoveryCodes ?? [];
  if (mfa?.isVerified !== true || !codes.includes(args.code)) failSpend(args.mfaId);
  spendCode(ctx, mfa, { recoveryCodes: codes.filter((c) => c !== args.code) }, args.sessionId, at);
}

/**
 * Custom command: a wrong code a session sent to a code check (src/ops/mfa.ts, refuseCode). Counted on the session's
 * row, in apply (so the count is the cluster's, whichever node each code reached, and racing codes are all
 * counted); at `max` the session is ended. A session gone, or complete unless `completeToo` (the checks that reveal
 * the recovery codes or remove the second factor count for every session), is left alone: each session costs at
 * most `max` such writes. Returns whether this failure ended the session.
 */
export function countMfaFailure(
  ctx: ApplyContext,
  args: { sessionId: string; max: number; completeToo?: boolean },
  at: string,
): boolean {
  const session = ctx.txn.get('api-sessions', args.sessionId);
  if (!session || (session.isMfaComplete === true && args.completeToo !== true)) return false;
  const failures = (session.mfaFailures ?? 0) + 1;
  if (failures >= args.max) {
    ctx.delete('api-sessions', session.id, at, true);
    return true;
  }
  ctx.update('api-sessions', session.id, { mfaFailures: failures }, at, true);
  return false;
}
