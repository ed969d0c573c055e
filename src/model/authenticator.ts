import { defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import { type ApiError, Errors, fieldError } from '../api/errors.js';
import type { Services } from '../api/services.js';
import { hashPassword } from '../auth/password.js';
import { fingerprintOfDer, parseSinglePem } from '../pki/fingerprint.js';
import { s } from '../schema/s.js';
import type { AuthPolicyPrimary } from './auth-policy.js';
import { entityRef, ref, tags } from './common.js';
import { guardAdminTarget } from './preconditions.js';
import type { Expect, RowFor } from './rows.js';

export const username = s.named('username', s.str({ minLength: 4, maxLength: 100 }));
export const password = s.named('password', s.str({ minLength: 5, maxLength: 100 }));
const usernameNullable = s.named('usernameNullable', s.nullable(s.str({ minLength: 4, maxLength: 100 })));
const passwordNullable = s.named('passwordNullable', s.nullable(s.str({ minLength: 5, maxLength: 100 })));

export const authenticatorDetail = detailSchema(
  'authenticatorDetail',
  s.obj(
    {
      certPem: s.str(),
      extendRequestedAt: s.nullable(s.datetime()),
      fingerprint: s.str(),
      identity: entityRef,
      identityId: s.str(),
      isExtendRequested: s.bool(),
      isIssuedByNetwork: s.bool(),
      isKeyRollRequested: s.bool(),
      lastAuthResolvedToRoot: s.bool(),
      lastExtendRolledKeys: s.bool(),
      method: s.str(),
      username: s.str(),
    },
    ['method', 'identityId', 'identity'],
  ),
);

/** Checks a new password against the identity's auth policy (`primary.updb`). */
export function checkPasswordPolicy(svc: Services, identityId: string, pw: string, field = 'password'): void {
  const identity = svc.get('identities', identityId);
  const policy = identity ? svc.get('auth-policies', identity.authPolicyId!) : undefined;
  const updb = (policy?.primary as AuthPolicyPrimary | undefined)?.updb;
  if (!updb) return;
  if (pw.length < updb.minPasswordLength) {
    throw fieldError(field, `password must be at least ${updb.minPasswordLength} characters`, '******');
  }
  if (updb.requireSpecialChar && !/[^A-Za-z0-9]/.test(pw))
    throw fieldError(field, 'password must contain a special character', '******');
  if (updb.requireNumberChar && !/[0-9]/.test(pw)) throw fieldError(field, 'password must contain a number', '******');
  if (updb.requireMixedCase && !(/[a-z]/.test(pw) && /[A-Z]/.test(pw))) {
    throw fieldError(field, 'password must contain upper and lower case letters', '******');
  }
}

/** The API view of an authenticator (secrets never leave: the password hash is not a field of it). */
export function renderAuthenticatorFields(row: RowFor<'authenticators'>, svc: Services): Record<string, unknown> {
  const identity = svc.get('identities', row.identityId!);
  const out: Record<string, unknown> = {
    identity: ref('identities', row.identityId!, identity?.name),
    identityId: row.identityId,
    method: row.method,
    isIssuedByNetwork: row.isIssuedByNetwork ?? false,
    isExtendRequested: row.isExtendRequested ?? false,
    isKeyRollRequested: row.isKeyRollRequested ?? false,
    extendRequestedAt: row.extendRequestedAt ?? null,
    lastAuthResolvedToRoot: row.lastAuthResolvedToRoot ?? false,
    lastExtendRolledKeys: row.lastExtendRolledKeys ?? false,
  };
  if (row.method === 'updb') out.username = row.username;
  if (row.method === 'cert') {
    out.certPem = row.certPem ?? '';
    out.fingerprint = row.fingerprint ?? '';
  }
  return out;
}

const authenticatorFields = {
  method: { type: 'string', index: true },
  identityId: { type: 'string', ref: { entity: 'identities', onDelete: 'cascade' } },
  username: { type: 'string', unique: true },
  password: { type: 'string', filter: false },
  certPem: { type: 'string', filter: false },
  fingerprint: { type: 'string', unique: true, conflictCode: 'CERT_IN_USE' },
  /** `<identityId>:<method>`: an identity holds at most one authenticator per method. */
  methodKey: { type: 'string', unique: true, filter: false, conflictCode: 'MAX_AUTHENTICATOR_METHODS_REACHED' },
  isIssuedByNetwork: { type: 'bool' },
  /** Extension (docs/enrollment.md, "Extending a certificate"): requested by an admin, pending until verified. */
  isExtendRequested: { type: 'bool' },
  extendRequestedAt: { type: 'datetime' },
  isKeyRollRequested: { type: 'bool' },
  lastExtendRolledKeys: { type: 'bool' },
  unverifiedCertPem: { type: 'string', filter: false },
  unverifiedFingerprint: { type: 'string', filter: false },
  /** The CA the certificate was enrolled through (ottca): deleting the CA deletes the authenticator. */
  caId: { type: 'string', ref: { entity: 'cas', onDelete: 'cascade' } },
} as const satisfies EntityFields;

export const authenticators: Entity<'authenticators', typeof authenticatorFields> = defineEntity({
  name: 'authenticators',
  type: 'authenticator',
  tag: 'Authenticator',
  singular: 'Authenticator',
  plural: 'Authenticators',
  permission: 'identity',
  fields: authenticatorFields,
  detail: authenticatorDetail,
  create: s.named(
    'authenticatorCreate',
    s.obj({ certPem: s.str(), identityId: s.str(), method: s.str(), password: s.str(), tags, username: s.str() }, [
      'method',
      'identityId',
    ]),
  ),
  update: s.named('authenticatorUpdate', s.obj({ password, tags, username }, ['username', 'password'])),
  patch: s.named('authenticatorPatch', s.obj({ password: passwordNullable, tags, username: usernameNullable })),
  toApi: renderAuthenticatorFields,
  reads: ['identities'],
  // OpenZiti (authenticator_router.go): reads need admin or admin_readonly, writes need an admin
  operations: {
    list: { permission: 'admin_readonly' },
    detail: { permission: 'admin_readonly' },
    create: { permission: null },
    update: { permission: null },
    patch: { permission: null },
    delete: { permission: null },
  },
  beforeDelete(row, svc, caller): Expect[] {
    const targetId = row.identityId!;
    return guardAdminTarget(caller, svc.get('identities', targetId)?.isAdmin === true, targetId);
  },
  async fromApi(body, { mode, svc, existing, caller, expect }) {
    // A caller with `identity` permissions but no admin rights may not take over an admin's credentials
    // (checked here and again inside apply).
    const targetId = (existing?.identityId ?? body.identityId) as string;
    expect.push(...guardAdminTarget(caller, svc.get('identities', targetId)?.isAdmin === true, targetId));
    if (mode === 'create') {
      const method = body.method;
      const identityId = body.identityId as string;
      if (method === 'updb') {
        const u = body.username as string | undefined;
        const p = body.password as string | undefined;
        if (!u || u.length < 4 || u.length > 100)
          throw fieldError('username', 'username must be 4 to 100 characters', u ?? '');
        if (!p || p.length < 5 || p.length > 100)
          throw fieldError('password', 'password must be 5 to 100 characters', '******');
        if (body.certPem !== undefined)
          throw Errors.INVALID_AUTHENTICATOR_PROPERTIES({
            field: 'certPem',
            reason: 'certPem is not valid for method updb',
            value: '',
          });
        checkPasswordPolicy(svc, identityId, p);
        return { method, identityId, username: u, password: await hashPassword(p), methodKey: `${identityId}:updb` };
      }
      if (method === 'cert') {
        if (body.username !== undefined || body.password !== undefined) {
          throw Errors.INVALID_AUTHENTICATOR_PROPERTIES({
            field: 'method',
            reason: 'username and password are not valid for method cert',
            value: method,
          });
        }
        const cert = parseSinglePem((body.certPem as string | undefined) ?? '');
        if (!cert)
          throw Errors.INVALID_CERT_PEM({
            field: 'certPem',
            reason: 'expected exactly one PEM certificate',
            value: '',
          });
        return {
          method,
          identityId,
          certPem: cert.toString(),
          fingerprint: fingerprintOfDer(cert.raw),
          methodKey: `${identityId}:cert`,
          isIssuedByNetwork: false,
        };
      }
      throw fieldError('method', "method must be one of 'updb', 'cert'", method);
    }
    return updbChanges(svc, existing!, body);
  },
});

/** 409 CAN_NOT_UPDATE_AUTHENTICATOR: an authenticator other than updb has no username or password to change. */
export function notUpdatable(row: RowFor<'authenticators'>): ApiError {
  return Errors.CAN_NOT_UPDATE_AUTHENTICATOR({
    field: 'method',
    reason: `authenticator of method ${row.method} has no username or password`,
    value: String(row.method),
  });
}

/**
 * The stored changes of an update or patch of a username/password authenticator: a new username, a new password
 * (checked against the identity's auth policy, then hashed). Any other method has no such secrets to update
 * (409 CAN_NOT_UPDATE_AUTHENTICATOR).
 */
export async function updbChanges(
  svc: Services,
  existing: RowFor<'authenticators'>,
  body: { username?: unknown; password?: unknown },
): Promise<Record<string, unknown>> {
  if (existing.method !== 'updb' && (body.username != null || body.password != null)) throw notUpdatable(existing);
  const set: Record<string, unknown> = {};
  if (body.username != null) set.username = body.username;
  if (body.password != null) {
    checkPasswordPolicy(svc, existing.identityId!, body.password as string);
    set.password = await hashPassword(body.password as string);
  }
  return set;
}

/** The caller's own authenticator `id`; another identity's is NOT_FOUND, as an unknown one (OpenZiti's ReadForIdentity). */
export function ownAuthenticator(svc: Services, identityId: string, id: string): RowFor<'authenticators'> {
  const row = svc.get('authenticators', id);
  if (!row || row.identityId !== identityId)
    throw Errors.NOT_FOUND({ code: 'UNHANDLED', message: `authenticator with id ${id} not found` });
  return row;
}
