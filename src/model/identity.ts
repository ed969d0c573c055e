import type { Row } from '../../storage/types.js';
import {
  bodyFieldsOf,
  checkRoleAttributes,
  defineEntity,
  detailSchema,
  type Entity,
  type EntityFields,
  type RowOf,
} from '../api/entity.js';
import { Errors, fieldError, unauthorized } from '../api/errors.js';
import type { Services } from '../api/services.js';
import { DEFAULT_ENROLLMENT_DURATION_MS } from '../pki/enrollment-jwt.js';
import { type Schema, s } from '../schema/s.js';
import { shortId } from '../util/ids.js';
import { authenticators } from './authenticator.js';
import { attributes, entityRef, envInfo, ref, sdkInfo, tags } from './common.js';
import { enrollmentFields, enrollments, identityEnrollments as enrollmentsOf, ottcaCaId } from './enrollment.js';
import { identityPolicyRelations } from './identity-relations.js';
import { callerIsAdmin, guardAdminTarget, usernameFree } from './preconditions.js';
import type { Command, Expect, RowFor } from './rows.js';

export const PERMISSIONS = [
  'admin_readonly',
  ...[
    'auth-policy',
    'ca',
    'config',
    'config-type',
    'edge-router-policy',
    'enrollment',
    'external-jwt-signer',
    'identity',
    'posture-check',
    'router',
    'service',
    'service-edge-router-policy',
    'service-policy',
    'terminator',
  ].flatMap((e) => [e, `${e}.read`, `${e}.create`, `${e}.update`, `${e}.delete`]),
  'ops',
  'ops.read',
  'ops.update',
  'ops.delete',
] as const;

const terminatorCost = s.named('terminatorCost', s.int({ minimum: 0, maximum: 65535 }));
const terminatorPrecedence = s.named('terminatorPrecedence', s.enum(['default', 'required', 'failed'] as const));
const terminatorCostMap = s.named('terminatorCostMap', s.map(terminatorCost));
const terminatorPrecedenceMap = s.named('terminatorPrecedenceMap', s.map(terminatorPrecedence));
const identityType = s.named('identityType', s.enum(['User', 'Device', 'Service', 'Router', 'Default'] as const));
const permissions = s.named('permissions', s.nullable(s.arr(s.enum(PERMISSIONS))));

const enrollmentRef = (extra: Record<string, Schema<unknown>> = {}) =>
  s.obj({ expiresAt: s.datetime(), id: s.str(), jwt: s.str(), token: s.str(), ...extra });
const identityEnrollments = s.named(
  'identityEnrollments',
  s.obj({ ott: enrollmentRef(), ottca: enrollmentRef({ ca: entityRef, caId: s.str() }), updb: enrollmentRef() }),
);
const identityAuthenticators = s.named(
  'identityAuthenticators',
  s.obj({
    cert: s.obj({ fingerprint: s.str(), id: s.str() }),
    updb: s.obj({ id: s.str(), username: s.str() }),
  }),
);

export const identityDetail = detailSchema(
  'identityDetail',
  s.obj(
    {
      appData: tags,
      authPolicy: entityRef,
      authPolicyId: s.str(),
      authenticators: identityAuthenticators,
      defaultHostingCost: terminatorCost,
      defaultHostingPrecedence: terminatorPrecedence,
      disabled: s.bool(),
      disabledAt: s.nullable(s.datetime()),
      disabledUntil: s.nullable(s.datetime()),
      edgeRouterConnectionStatus: s.enum(['online', 'offline', 'unknown'] as const),
      enrollment: identityEnrollments,
      envInfo,
      externalId: s.nullable(s.str()),
      hasApiSession: s.bool(),
      hasEdgeRouterConnection: s.bool(),
      isAdmin: s.bool(),
      isDefaultAdmin: s.bool(),
      isMfaEnabled: s.bool(),
      name: s.str(),
      permissions,
      roleAttributes: attributes,
      sdkInfo,
      serviceHostingCosts: terminatorCostMap,
      serviceHostingPrecedences: terminatorPrecedenceMap,
      type: entityRef,
      typeId: s.str(),
    },
    [
      'name',
      'type',
      'typeId',
      'isDefaultAdmin',
      'isAdmin',
      'authenticators',
      'enrollment',
      'envInfo',
      'sdkInfo',
      'roleAttributes',
      'hasEdgeRouterConnection',
      'edgeRouterConnectionStatus',
      'hasApiSession',
      'isMfaEnabled',
      'serviceHostingPrecedences',
      'serviceHostingCosts',
      'defaultHostingCost',
      'authPolicyId',
      'authPolicy',
      'externalId',
      'disabled',
      'permissions',
    ],
  ),
);

/** Identity `type` on the wire → identity-type id: create always stores Default; User/Device/Service map to Default. */
function typeIdOf(type: unknown, mode: 'create' | 'update' | 'patch', svc: Services): string {
  if (mode === 'create' || type === 'User' || type === 'Device' || type === 'Service' || type === 'Default') {
    return 'Default';
  }
  const found = svc.store.lookup('identity-types', 'name', type);
  if (found.length === 0) throw fieldError('type', `no identity type with name ${String(type)}`, type);
  return found[0]!;
}

/** Whether the identity is disabled now (a disable with an expiry lapses by itself). */
export function isDisabled(row: RowFor<'identities'>, nowMs: number): boolean {
  if (!row.disabledAt) return false;
  return !row.disabledUntil || Date.parse(row.disabledUntil as string) > nowMs;
}

/** What an identity renders beyond its `api` fields. */
function renderIdentityExtras(row: IdentityRow, svc: Services): Record<string, unknown> {
  const policy = svc.get('auth-policies', row.authPolicyId!);
  const type = svc.get('identity-types', row.typeId!);
  const authenticators: Record<string, unknown> = {};
  for (const aid of svc.store.lookup('authenticators', 'identityId', row.id)) {
    const a = svc.get('authenticators', aid)!;
    if (a.method === 'updb') authenticators.updb = { id: a.id, username: a.username };
    else if (a.method === 'cert') authenticators.cert = { fingerprint: a.fingerprint, id: a.id };
  }
  const disabled = isDisabled(row, svc.clock.now());
  return {
    authPolicy: ref('auth-policies', row.authPolicyId!, policy?.name),
    authenticators,
    disabled,
    disabledAt: disabled ? (row.disabledAt ?? null) : null,
    disabledUntil: disabled ? (row.disabledUntil ?? null) : null,
    edgeRouterConnectionStatus: 'offline',
    enrollment: enrollmentsOf(svc, row.id),
    hasApiSession: svc.store.lookup('api-sessions', 'identityId', row.id).length > 0,
    hasEdgeRouterConnection: false,
    type: ref('identity-types', row.typeId!, type?.name),
  };
}

/**
 * The identity's stored fields: storage semantics, and in the same entry whether a request body may set it
 * (`body`, with its schema), whether it renders as stored (`api`) and its `default` (rendering of an absent value,
 * and what a PUT that leaves it out resets it to).
 */
const identityFields = {
  name: { type: 'string', unique: true, nonEmpty: true, body: s.str(), api: true },
  typeId: { type: 'string', ref: { entity: 'identity-types', onDelete: 'restrict' }, api: true },
  isAdmin: { type: 'bool', index: true, body: s.bool(), api: true, default: false },
  isDefaultAdmin: { type: 'bool', api: true, default: false },
  isMfaEnabled: { type: 'bool', api: true, default: false },
  roleAttributes: { type: 'string', set: true, index: true, body: attributes, api: true, default: [] },
  authPolicyId: {
    type: 'string',
    ref: { entity: 'auth-policies', onDelete: 'restrict' },
    body: s.nullable(s.str()),
    api: true,
    default: 'default',
  },
  externalId: { type: 'string', unique: true, body: s.nullable(s.str()), api: true, default: null, emptyIsNull: true },
  defaultHostingCost: { type: 'number', body: terminatorCost, api: true, default: 0 },
  defaultHostingPrecedence: { type: 'string', body: terminatorPrecedence, api: true, default: 'default' },
  serviceHostingCosts: { type: 'map', body: terminatorCostMap, api: true, default: {} },
  serviceHostingPrecedences: { type: 'map', body: terminatorPrecedenceMap, api: true, default: {} },
  appData: { type: 'map', body: tags, api: true, default: {} },
  permissions: { type: 'string', set: true, body: permissions, api: true, default: [] },
  disabledAt: { type: 'datetime' },
  disabledUntil: { type: 'datetime' },
  /** Failed password logins since the last success, counted only under a policy with `maxAttempts` (lockout.ts). */
  failedLoginAttempts: { type: 'number', filter: false },
  envInfo: { type: 'object', api: true, default: {} },
  sdkInfo: { type: 'object', api: true, default: {} },
} as const satisfies EntityFields;

type IdentityRow = RowOf<typeof identityFields>;

/** The fields that carry an identity's rights: only admins may name them in an update or patch. */
const RIGHTS_FIELDS = ['isAdmin', 'isDefaultAdmin', 'permissions'] as const;

/** Fields shared by create, update and patch bodies: the writable stored fields, `tags`, and the wire `type`. */
const writable = { ...bodyFieldsOf(identityFields), type: identityType };

export const identities: Entity<'identities', typeof identityFields> = defineEntity({
  name: 'identities',
  type: 'identity',
  tag: 'Identity',
  singular: 'Identity',
  plural: 'Identities',
  permission: 'identity',
  roleAttributesField: 'roleAttributes',
  fields: identityFields,
  relations: [
    {
      path: 'authenticators',
      listed: () => authenticators,
      via: { ref: 'identityId' },
      // OpenZiti: `authenticator.read`, a permission it does not grant (admins and admin_readonly only)
      permission: 'authenticator',
      operationId: 'getIdentityAuthenticators',
      summary: 'Retrieve the current authenticators of a specific identity',
    },
    ...identityPolicyRelations,
    {
      path: 'enrollments',
      listed: () => enrollments,
      via: { ref: 'identityId' },
      // tokens and JWTs are credentials: holders of the enrollment permission (and admins) only
      permission: 'enrollment',
      operationId: 'getIdentityEnrollments',
      summary: 'Retrieve the outstanding enrollments of a specific identity',
    },
  ],
  symbols: (svc) => ({
    type: { type: 'string', set: false, get: (r: Row) => r.typeId, indexed: false },
    isDisabled: { type: 'bool', set: false, get: (r: Row) => isDisabled(r, svc.clock.now()) },
  }),
  detail: identityDetail,
  create: s.named(
    'identityCreate',
    s.obj({ ...writable, enrollment: s.obj({ ott: s.bool(), ottca: s.str(), updb: s.str() }) }, [
      'name',
      'type',
      'isAdmin',
    ]),
  ),
  update: s.named('identityUpdate', s.obj(writable, ['type', 'name', 'isAdmin'])),
  patch: s.named('identityPatch', s.obj({ ...writable, isAdmin: s.nullable(s.bool()), name: s.nullable(s.str()) })),
  // OpenZiti's identity_router.go: "non-admins may not use the PUT method, use PATCH instead"
  operations: { update: { adminsOnly: true } },
  toApi: renderIdentityExtras,
  reads: ['auth-policies', 'identity-types', 'authenticators', 'enrollments', 'cas', 'api-sessions'],
  // enrollment tokens and JWTs are credentials: only admins see them
  redact: (data) => {
    const enrollment: Record<string, unknown> = {};
    for (const [method, e] of Object.entries(data.enrollment ?? {})) {
      const { jwt: _jwt, token: _token, ...rest } = e;
      enrollment[method] = rest;
    }
    return { ...data, enrollment };
  },
  // `disabled` lapses with the clock when the disable has an end
  cacheable: (row) => !row.disabledUntil,
  // synchronous when no enrollment is asked for (the common create): no promise, no await on the write path
  alsoOnCreate(id, body, svc, at) {
    const e = body.enrollment as EnrollmentRequest | undefined;
    return e ? enrollmentOnCreate(e, id, svc, at) : [];
  },
  beforeDelete(row, svc, caller): Expect[] {
    const expect = guardAdminTarget(caller, row.isAdmin === true, row.id);
    if (row.isDefaultAdmin) {
      throw Errors.ENTITY_CAN_NOT_BE_DELETED({
        code: 'UNHANDLED',
        message: `cannot delete the default admin identity (id=${row.id})`,
      });
    }
    // a tunneling edge router's identity goes with its router (OpenZiti's identity store refuses it the same way)
    if (isRouterIdentity(row, svc)) {
      throw Errors.ENTITY_CAN_NOT_BE_DELETED({
        code: 'UNHANDLED',
        message: `cannot delete router identity ${row.name} until associated router is deleted`,
      });
    }
    return expect;
  },
  fromApi(body, { mode, svc, existing, caller, copied, expect }) {
    // Only admins make admins: a caller with `identity` permissions may not grant more than it holds, and (as
    // OpenZiti's identity PATCH: "non-admins may not modify the identity field …") may not change another identity's
    // rights at all, revoking included. Both rules are checked here and again inside apply (the caller's and the
    // target's admin flags may change meanwhile).
    const rightsTouched =
      mode === 'create'
        ? body.isAdmin === true || (Array.isArray(body.permissions) && body.permissions.length > 0)
        : RIGHTS_FIELDS.some((field) => Object.hasOwn(body, field));
    if (caller && caller.identity.isAdmin !== true && rightsTouched) throw unauthorized('forbidden');
    if (caller && rightsTouched) expect.push(callerIsAdmin(caller));
    if (existing) expect.push(...guardAdminTarget(caller, existing.isAdmin === true, existing.id));
    const out = copied;
    if (existing?.isDefaultAdmin && out.isAdmin === false) {
      throw Errors.ENTITY_CAN_NOT_BE_UPDATED({
        code: 'UNHANDLED',
        message: `cannot remove admin from the default admin identity (id=${existing.id})`,
      });
    }
    if (Object.hasOwn(body, 'roleAttributes'))
      out.roleAttributes = checkRoleAttributes('roleAttributes', body.roleAttributes);
    if (Object.hasOwn(body, 'authPolicyId') || mode === 'create') {
      const id = (body.authPolicyId as string | null | undefined) || 'default';
      if (!svc.get('auth-policies', id)) throw fieldError('authPolicyId', `auth policy with id ${id} not found`, id);
      out.authPolicyId = id;
    }
    if (Object.hasOwn(body, 'type') || mode === 'create') out.typeId = typeIdOf(body.type, mode, svc);
    if (existing && out.typeId !== undefined && out.typeId !== existing.typeId && isRouterIdentity(existing, svc)) {
      throw Errors.ENTITY_CAN_NOT_BE_UPDATED({ code: 'UNHANDLED', message: 'cannot change type of router identity' });
    }
    if (mode === 'create') {
      out.isDefaultAdmin = false;
      out.roleAttributes ??= [];
    }
    return out;
  },
});

/** The Router identity a tunneling edge router brought (same id), while that router exists. */
function isRouterIdentity(row: RowFor<'identities'>, svc: Services): boolean {
  return row.typeId === 'Router' && svc.get('edge-routers', row.id) !== undefined;
}

type EnrollmentRequest = { ott?: boolean; ottca?: string; updb?: string };

/** The enrollment an identity create asks for (`enrollment` in its body), as commands of the same write. */
async function enrollmentOnCreate(e: EnrollmentRequest, id: string, svc: Services, at: string): Promise<Command[]> {
  const out: Command[] = [];
  const expiresAtMs = svc.clock.now() + DEFAULT_ENROLLMENT_DURATION_MS;
  const add = async (method: string, extra: Record<string, unknown>, expect: Expect[] = []) => {
    const data = { ...(await enrollmentFields(svc, id, method, expiresAtMs)), ...extra };
    out.push({
      op: 'create',
      entity: 'enrollments',
      id: shortId(),
      at,
      data,
      ...(expect.length > 0 ? { expect } : {}),
    });
  };
  // As OpenZiti: one enrollment, the first of ott → ottca → updb that is asked for.
  if (e.ott === true) {
    await add('ott', {});
  } else if (e.ottca) {
    await add('ottca', { caId: ottcaCaId(svc, e.ottca, 'enrollment.ottca') });
  } else if (typeof e.updb === 'string' && e.updb !== '') {
    if (e.updb.length < 4 || e.updb.length > 100)
      throw fieldError('enrollment.updb', 'username must be 4 to 100 characters', e.updb);
    const free = usernameFree(e.updb, 'enrollment.updb');
    if (svc.store.lookup('authenticators', 'username', e.updb).length > 0) {
      throw fieldError(free.errorField!, free.reason, e.updb);
    }
    await add('updb', { username: e.updb }, [free]);
  }
  return out;
}
