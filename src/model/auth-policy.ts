import { defineEntity, detailSchema } from '../api/entity.js';
import { s } from '../schema/s.js';
import { tags } from './common.js';

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

export const authPolicies = defineEntity({
  name: 'auth-policies',
  type: 'authPolicy',
  tag: 'Auth Policy',
  singular: 'AuthPolicy',
  plural: 'AuthPolicies',
  permission: 'auth-policy',
  fields: {
    name: { type: 'string', unique: true },
    primary: { type: 'object' },
    secondary: { type: 'object' },
  },
  detail: detailSchema(
    'authPolicyDetail',
    s.obj({ name: s.str(), primary, secondary }, ['name', 'primary', 'secondary']),
  ),
  create: s.named(
    'authPolicyCreate',
    s.obj({ name: s.str(), primary, secondary, tags }, ['name', 'primary', 'secondary']),
  ),
  // Create, update and patch of auth policies belong to the auth-policy work; only reads are served for now.
  operations: { create: false, update: false, patch: false, delete: false },
  toApi: (row) => {
    const primary = row.primary as AuthPolicyPrimary;
    // the spec requires an array: a policy without signer restrictions lists none
    return {
      name: row.name,
      primary: { ...primary, extJwt: { ...primary.extJwt, allowedSigners: primary.extJwt.allowedSigners ?? [] } },
      secondary: row.secondary,
    };
  },
});
