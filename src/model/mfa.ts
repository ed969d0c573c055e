import { randomInt } from 'node:crypto';
import { generateSecret, generateURI, verify } from 'otplib';
import type { ApplyContext } from '../../storage/schema.js';
import { fail, type Row } from '../../storage/types.js';
import { defineEntity, detailSchema } from '../api/entity.js';
import type { Services } from '../api/services.js';
import { s } from '../schema/s.js';

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

export const detailMfa = detailSchema(
  'detailMfa',
  s.obj({ isVerified: s.bool(), provisioningUrl: s.str(), recoveryCodes: s.arr(s.str()) }, ['isVerified']),
);

export const mfas = defineEntity({
  name: 'mfas',
  type: 'mfa',
  tag: 'MFA',
  singular: 'Mfa',
  plural: 'Mfas',
  permission: 'identity',
  fields: {
    identityId: {
      type: 'string',
      unique: true,
      ref: { entity: 'identities', onDelete: 'cascade' },
      conflictCode: 'MFA_EXISTS',
    },
    isVerified: { type: 'bool' },
    secret: { type: 'string', filter: false },
    recoveryCodes: { type: 'string', set: true, filter: false },
  },
  detail: detailMfa,
  // served only through the current-identity and identity MFA operations (src/ops/mfa.ts)
  operations: { list: false, detail: false, create: false, update: false, patch: false, delete: false },
  toApi: (row) => ({ isVerified: row.isVerified === true }),
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
export function mfaOf(svc: Services, identityId: string): Row | undefined {
  const ids = svc.store.lookup('mfas', 'identityId', identityId);
  return ids.length === 1 ? svc.get('mfas', ids[0]!) : undefined;
}

/** Whether `code` is the TOTP of `secret` now (on the controller's clock), give or take one step. */
export async function isValidTotp(svc: Services, secret: string, code: string): Promise<boolean> {
  if (!/^[0-9]{6}$/.test(code)) return false;
  try {
    const r = await verify({
      secret,
      token: code,
      epoch: Math.floor(svc.clock.now() / 1000),
      epochTolerance: TOLERANCE_S,
    });
    return r.valid;
  } catch {
    return false;
  }
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
  const codes = (mfa?.recoveryCodes as string[] | undefined) ?? [];
  if (mfa?.isVerified !== true || !codes.includes(args.code)) {
    fail({
      code: 'INVALID',
      entity: 'mfas',
      id: args.mfaId,
      reason: 'invalid recovery code',
      apiCode: 'MFA_INVALID_TOKEN',
    });
  }
  ctx.update('mfas', mfa.id, { recoveryCodes: codes.filter((c) => c !== args.code) }, at, true);
  if (ctx.txn.get('api-sessions', args.sessionId)) {
    ctx.update('api-sessions', args.sessionId, { isMfaComplete: true }, at, true);
  }
}
