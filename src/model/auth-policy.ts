import { fail } from '../../storage/types.js';
import { defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import { Errors, fieldError } from '../api/errors.js';
import type { Services } from '../api/services.js';
import { type Schema, type SchemaNode, s } from '../schema/s.js';
import { tags } from './common.js';
import type { ApplyContext, RowFor } from './rows.js';

const primaryCert = s.named(
  'authPolicyPrimaryCert',
  s.obj({ allowExpiredCerts: s.bool(), allowed: s.bool() }, ['allowed', 'allowExpiredCerts']),
);
const primaryUpdb = s.named(
  'authPolicyPrimaryUpdb',
  s.obj(
    {
      allowed: s.bool(),
      lockoutDurationMinutes: s.int(),
      maxAttempts: s.int(),
      minPasswordLength: s.int(),
      requireMixedCase: s.bool(),
      requireNumberChar: s.bool(),
      requireSpecialChar: s.bool(),
    },
    [
      'allowed',
      'minPasswordLength',
      'requireSpecialChar',
      'requireNumberChar',
      'requireMixedCase',
      'maxAttempts',
      'lockoutDurationMinutes',
    ],
  ),
);
const primaryExtJwt = s.named(
  'authPolicyPrimaryExtJwt',
  s.obj({ allowed: s.bool(), allowedSigners: s.nullable(s.arr(s.str())) }, ['allowed', 'allowedSigners']),
);
const primary = s.named(
  'authPolicyPrimary',
  s.obj({ cert: primaryCert, extJwt: primaryExtJwt, updb: primaryUpdb }, ['updb', 'cert', 'extJwt']),
);
const secondary = s.named(
  'authPolicySecondary',
  s.obj({ requireExtJwtSigner: s.nullable(s.str()), requireTotp: s.bool() }, ['requireTotp']),
);

export type AuthPolicyPrimary = {
  cert: { allowed: boolean; allowExpiredCerts: boolean };
  updb: {
    allowed: boolean;
    minPasswordLength: number;
    requireSpecialChar: boolean;
    requireNumberChar: boolean;
    requireMixedCase: boolean;
    maxAttempts: number;
    lockoutDurationMinutes: number;
  };
  extJwt: { allowed: boolean; allowedSigners: string[] | null };
};

export const DEFAULT_AUTH_POLICY_ID = 'default';

/** The default auth policy (REFERENCE §7), created at initialisation with id `default`. */
export const DEFAULT_AUTH_POLICY = {
  name: 'Default',
  primary: {
    cert: { allowed: true, allowExpiredCerts: true },
    updb: {
      allowed: true,
      minPasswordLength: 5,
      requireSpecialChar: false,
      requireNumberChar: false,
      requireMixedCase: false,
      maxAttempts: 0,
      lockoutDurationMinutes: 0,
    },
    extJwt: { allowed: true, allowedSigners: null },
  },
  secondary: { requireTotp: false, requireExtJwtSigner: null },
};

/** Bounds of the policy's numbers (a password is 5 to 100 characters long whatever the policy says). */
export const MIN_PASSWORD_LENGTH = 5;
export const MAX_PASSWORD_LENGTH = 100;
/** A lockout longer than a year is an indefinite one in disguise: say 0. */
const MAX_LOCKOUT_MINUTES = 525_600;
const MAX_ATTEMPTS = 1_000_000;
const MAX_ALLOWED_SIGNERS = 100;

/** A PATCH's sub-object: every property optional and nullable (null = leave unchanged), the object itself too. */
const nullableObj = (name: string, x: SchemaNode): Schema<Record<string, unknown> | null> => ({
  ...x,
  name,
  nullable: true,
  required: [],
  properties: Object.fromEntries(Object.entries(x.properties ?? {}).map(([k, v]) => [k, { ...v, nullable: true }])),
});
const primaryPatch = s.named(
  'authPolicyPrimaryPatch',
  s.obj({
    cert: nullableObj('authPolicyPrimaryCertPatch', primaryCert),
    extJwt: nullableObj('authPolicyPrimaryExtJwtPatch', primaryExtJwt),
    updb: nullableObj('authPolicyPrimaryUpdbPatch', primaryUpdb),
  }),
);
const secondaryPatch = nullableObj('authPolicySecondaryPatch', secondary);

type Secondary = { requireTotp: boolean; requireExtJwtSigner: string | null };

/**
 * Copies the non-null values of `patch` over `base` (a PATCH's null means "leave unchanged"); only the keys `base`
 * has (the policy's declared properties: an unknown key, `__proto__` too, is ignored as the body schema allows it).
 */
function merge<T extends object>(base: T, patch: Partial<Record<keyof T, unknown>> | null | undefined): T {
  const out = { ...base } as Record<string, unknown>;
  for (const [k, v] of Object.entries(patch ?? {})) {
    if (v !== null && v !== undefined && Object.hasOwn(base, k)) out[k] = v;
  }
  return out as T;
}

/** What a PATCH changes in the nested objects: per sub-object of `primary`, and `secondary` (null: nothing). */
export interface NestedPatch {
  primary: Partial<Record<keyof AuthPolicyPrimary, Record<string, unknown> | null>> | null;
  secondary: Record<string, unknown> | null;
}

/** The non-null values of `v` (a PATCH's sub-object) under the keys `schema` declares; null when there are none. */
function declaredValues(schema: SchemaNode, v: unknown): Record<string, unknown> | null {
  if (v === null || typeof v !== 'object') return null;
  const out: Record<string, unknown> = {};
  let any = false;
  for (const k of Object.keys(schema.properties ?? {})) {
    const x = (v as Record<string, unknown>)[k];
    if (Object.hasOwn(v, k) && x !== null && x !== undefined) {
      out[k] = x;
      any = true;
    }
  }
  return any ? out : null;
}

/** What a PATCH body changes in the nested objects (declared properties with a value only). */
function nestedPatchOf(body: Record<string, unknown>): NestedPatch {
  const bp = body.primary as Record<string, unknown> | null | undefined;
  const cert = declaredValues(primaryCert, bp?.cert);
  const updb = declaredValues(primaryUpdb, bp?.updb);
  const extJwt = declaredValues(primaryExtJwt, bp?.extJwt);
  return {
    primary: cert || updb || extJwt ? { cert, updb, extJwt } : null,
    secondary: declaredValues(secondary, body.secondary),
  };
}

/** The nested objects of policy `row` with `patch` merged in. */
function merged(row: RowFor<'auth-policies'>, patch: NestedPatch): { p: AuthPolicyPrimary; sec: Secondary } {
  const old = row.primary as AuthPolicyPrimary;
  const bp = patch.primary ?? {};
  return {
    p: { cert: merge(old.cert, bp.cert), updb: merge(old.updb, bp.updb), extJwt: merge(old.extJwt, bp.extJwt) },
    sec: merge(row.secondary as Secondary, patch.secondary),
  };
}

/** The stored nested fields of a policy: `primary`, `secondary` and the signers they name (`signerIds`). */
function nestedFields(p: AuthPolicyPrimary, sec: Secondary): Record<string, unknown> {
  return {
    primary: {
      cert: { allowed: p.cert.allowed, allowExpiredCerts: p.cert.allowExpiredCerts },
      updb: { ...p.updb },
      extJwt: { allowed: p.extJwt.allowed, allowedSigners: p.extJwt.allowedSigners ?? null },
    },
    secondary: { requireTotp: sec.requireTotp, requireExtJwtSigner: sec.requireExtJwtSigner ?? null },
    signerIds: [
      ...new Set([...(p.extJwt.allowedSigners ?? []), ...(sec.requireExtJwtSigner ? [sec.requireExtJwtSigner] : [])]),
    ].sort(),
  };
}

/**
 * Custom command, applied with a PATCH's update: merges the PATCH's nested values into the policy as it is when the
 * command applies, not as the handler saw it, so that two PATCHes of different nested values both take effect (a
 * merge computed by the handler would write back the values it read: a `secondary.requireTotp` set meanwhile
 * reverted by a PATCH of `primary.updb`). Every merged value passed the handler's checks or was stored already;
 * the signers named are checked by `signerIds`' reference.
 */
export function patchAuthPolicy(ctx: ApplyContext, args: { id: string } & NestedPatch, at: string): void {
  const row = ctx.txn.get('auth-policies', args.id);
  if (!row)
    fail({ code: 'NOT_FOUND', entity: 'auth-policies', id: args.id, reason: `authPolicy ${args.id} not found` });
  const { p, sec } = merged(row, args);
  ctx.update('auth-policies', args.id, nestedFields(p, sec), at);
}

function checkRange(field: string, value: number, min: number, max: number): void {
  if (value < min || value > max) throw fieldError(field, `must be between ${min} and ${max}`, value);
}

/** The entity of external JWT signers (policies name signers by id). */
const SIGNERS = 'external-jwt-signers';

function checkSigner(svc: Services, field: string, id: string): void {
  const known = svc.store.get(SIGNERS, id) !== undefined;
  if (!known) throw fieldError(field, `external jwt signer with id ${id} not found`, id);
}

/** The checks of a whole policy (after a PATCH is merged): number ranges; named signers must exist. */
function checkPolicy(svc: Services, primary: AuthPolicyPrimary, sec: Secondary): void {
  const u = primary.updb;
  checkRange('primary.updb.minPasswordLength', u.minPasswordLength, MIN_PASSWORD_LENGTH, MAX_PASSWORD_LENGTH);
  checkRange('primary.updb.maxAttempts', u.maxAttempts, 0, MAX_ATTEMPTS);
  checkRange('primary.updb.lockoutDurationMinutes', u.lockoutDurationMinutes, 0, MAX_LOCKOUT_MINUTES);
  const signers = primary.extJwt.allowedSigners ?? [];
  if (signers.length > MAX_ALLOWED_SIGNERS) {
    throw fieldError('primary.extJwt.allowedSigners', `at most ${MAX_ALLOWED_SIGNERS} signers`, signers.length);
  }
  for (const id of signers) checkSigner(svc, 'primary.extJwt.allowedSigners', id);
  if (sec.requireExtJwtSigner) checkSigner(svc, 'secondary.requireExtJwtSigner', sec.requireExtJwtSigner);
}

/** Whether the identity's policy allows a primary method (`extJwt` with the signer that issued the token). */
export function isPrimaryAllowed(
  policy: RowFor<'auth-policies'> | undefined,
  method: 'updb' | 'cert' | 'extJwt',
  signerId?: string,
): boolean {
  const primary = policy?.primary as AuthPolicyPrimary | undefined;
  if (primary?.[method].allowed !== true) return false;
  if (method !== 'extJwt') return true;
  const allowed = primary.extJwt.allowedSigners;
  // no list (or an empty one) allows every signer
  return !allowed || allowed.length === 0 || (signerId !== undefined && allowed.includes(signerId));
}

const authPolicieFields = {
  name: { type: 'string', unique: true, nonEmpty: true, body: s.str(), api: true },
  primary: { type: 'object' },
  secondary: { type: 'object' },
  /**
   * Every signer the policy names (`allowedSigners` and `requireExtJwtSigner`): a restricting reference, so the
   * store refuses a policy naming a missing signer and the delete of a named signer (409), both in apply.
   */
  signerIds: { type: 'string', set: true, ref: { entity: SIGNERS, onDelete: 'restrict' }, filter: false },
} as const satisfies EntityFields;

export const authPolicies: Entity<'auth-policies', typeof authPolicieFields> = defineEntity({
  name: 'auth-policies',
  type: 'authPolicy',
  tag: 'Auth Policy',
  singular: 'AuthPolicy',
  plural: 'AuthPolicies',
  permission: 'auth-policy',
  fields: authPolicieFields,
  detail: detailSchema(
    'authPolicyDetail',
    s.obj({ name: s.str(), primary, secondary }, ['name', 'primary', 'secondary']),
  ),
  create: s.named(
    'authPolicyCreate',
    s.obj({ name: s.str(), primary, secondary, tags }, ['name', 'primary', 'secondary']),
  ),
  update: s.named(
    'authPolicyUpdate',
    s.obj({ name: s.str(), primary, secondary, tags }, ['name', 'primary', 'secondary']),
  ),
  patch: s.named(
    'authPolicyPatch',
    s.obj({ name: s.nullable(s.str()), primary: primaryPatch, secondary: secondaryPatch, tags }),
  ),
  toApi: (row) => {
    const primary = row.primary as AuthPolicyPrimary;
    // the spec requires an array: a policy without signer restrictions lists none
    return {
      primary: { ...primary, extJwt: { ...primary.extJwt, allowedSigners: primary.extJwt.allowedSigners ?? [] } },
      secondary: row.secondary,
    };
  },
  reads: [],
  fromApi(body, { mode, existing, copied, svc }) {
    const out: Record<string, unknown> = { ...copied };
    if (mode === 'patch') {
      // checked as merged into the policy as seen now; merged again where it applies (alsoOnUpdate)
      const { p, sec } = merged(existing!, nestedPatchOf(body));
      checkPolicy(svc, p, sec);
      return out;
    }
    const p = body.primary as AuthPolicyPrimary;
    const sec = body.secondary as Secondary;
    checkPolicy(svc, p, sec);
    return Object.assign(out, nestedFields(p, sec));
  },
  alsoOnUpdate(row, set, _svc, at, body) {
    // a PUT's update replaces the nested objects (they are in `set`); a PATCH's are merged in apply
    if (Object.hasOwn(set, 'primary')) return [];
    const patch = nestedPatchOf(body);
    if (patch.primary === null && patch.secondary === null) return [];
    return [{ op: 'custom', name: 'patchAuthPolicy', args: { id: row.id, ...patch }, at }];
  },
  beforeDelete(row) {
    if (row.id === DEFAULT_AUTH_POLICY_ID) {
      throw Errors.ENTITY_CAN_NOT_BE_DELETED({
        code: 'UNHANDLED',
        message: 'the default auth policy cannot be deleted',
      });
    }
  },
});
