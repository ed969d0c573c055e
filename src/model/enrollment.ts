import { defineEntity, defineInternalEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import { fieldError } from '../api/errors.js';
import type { Caller } from '../api/op.js';
import type { Services } from '../api/services.js';
import { signEnrollmentJwt } from '../pki/enrollment-jwt.js';
import { s } from '../schema/s.js';
import { uuid } from '../util/ids.js';
import { entityRef, ref } from './common.js';
import { guardAdminTarget, usernameFree } from './preconditions.js';
import type { RowFor } from './rows.js';

/** How far ahead an enrollment may expire (Keel's bound; OpenZiti's default window is 180 minutes). */
export const MAX_ENROLLMENT_DURATION_MS = 366 * 24 * 60 * 60 * 1000;

/**
 * The stored fields of a new outstanding enrollment: a fresh token and the JWT that carries it. The same for an
 * enrollment created with its identity and one created or refreshed over `/enrollments`.
 */
export async function enrollmentFields(
  svc: Services,
  identityId: string,
  method: string,
  expiresAtMs: number,
): Promise<Record<string, unknown>> {
  return { identityId, ...(await tokenFields(svc, identityId, method, expiresAtMs)) };
}

/** What identifies whom an enrollment enrolls: the identity, the edge router or the transit router. */
export function enrollmentSubject(row: RowFor<'enrollments'>): string {
  return (row.identityId ?? row.edgeRouterId ?? row.transitRouterId) as string;
}

/** Whether the enrollment enrolls an admin identity (router enrollments enroll none). */
function enrollsAdmin(svc: Services, row: RowFor<'enrollments'>): boolean {
  return !!row.identityId && svc.get('identities', row.identityId)?.isAdmin === true;
}

/**
 * A write by `caller` to an enrollment of identity `identityId` (none: a router's): refused (401) when the caller
 * lacks admin rights and the identity is an admin; else the condition apply re-checks (see guardAdminTarget).
 */
export function adminTargetGuard(svc: Services, caller: Caller | null, identityId: string | null | undefined) {
  if (!identityId) return [];
  return guardAdminTarget(caller, svc.get('identities', identityId)?.isAdmin === true, identityId);
}

/** A fresh token, the JWT that carries it (subject `subjectId`), the expiry and the one-per-method key. */
export async function tokenFields(svc: Services, subjectId: string, method: string, expiresAtMs: number) {
  const token = uuid();
  return {
    method,
    token,
    jwt: await signEnrollmentJwt(svc, { identityId: subjectId, token, method, expiresAtMs }),
    expiresAt: new Date(expiresAtMs).toISOString(),
    methodKey: `${subjectId}:${method}`,
  };
}

/** The CA of an `ottca` enrollment: it must exist, be verified and allow OTT CA enrollment (else 400 on `field`). */
export function ottcaCaId(svc: Services, caId: unknown, field: string): string {
  const id = typeof caId === 'string' ? caId : '';
  const ca = svc.get('cas', id);
  if (!ca) throw fieldError(field, `ca with id ${id} not found`, id);
  if (ca.isVerified !== true) throw fieldError(field, `ca with id ${id} is not verified`, id);
  if (ca.isOttCaEnrollmentEnabled !== true) {
    throw fieldError(field, `ca with id ${id} does not allow ottca enrollment`, id);
  }
  return id;
}

/** A requested `expiresAt`, checked: a date-time in the future, at most MAX_ENROLLMENT_DURATION_MS ahead. */
export function checkedExpiry(svc: Services, value: unknown): number {
  const ms = typeof value === 'string' ? Date.parse(value) : Number.NaN;
  const now = svc.clock.now();
  if (!(ms > now)) throw fieldError('expiresAt', 'expiresAt must be a date-time in the future', String(value));
  if (ms - now > MAX_ENROLLMENT_DURATION_MS) {
    throw fieldError('expiresAt', 'expiresAt must be at most 366 days ahead', String(value));
  }
  return ms;
}

export const enrollmentDetail = detailSchema(
  'enrollmentDetail',
  s.obj(
    {
      caId: s.nullable(s.str()),
      details: s.map(s.str()),
      edgeRouter: entityRef,
      edgeRouterId: s.str(),
      expiresAt: s.datetime(),
      identity: entityRef,
      identityId: s.str(),
      jwt: s.str(),
      method: s.str(),
      token: s.str(),
      transitRouter: entityRef,
      transitRouterId: s.str(),
      username: s.str(),
    },
    ['token', 'method', 'expiresAt', 'details'],
  ),
);

const enrollmentStoredFields = {
  method: { type: 'string', index: true },
  identityId: { type: 'string', ref: { entity: 'identities', onDelete: 'cascade' } },
  /** The edge router an `erott` enrollment enrolls (deleting the router deletes it). */
  edgeRouterId: { type: 'string', ref: { entity: 'edge-routers', onDelete: 'cascade' } },
  /** The transit router a `trott` enrollment enrolls (deleting the router deletes it). */
  transitRouterId: { type: 'string', ref: { entity: 'transit-routers', onDelete: 'cascade' } },
  token: { type: 'string', unique: true, filter: false },
  expiresAt: { type: 'datetime' },
  jwt: { type: 'string', filter: false },
  username: { type: 'string', unique: true },
  /** The CA of an `ottca` enrollment: deleting the CA deletes the enrollment. */
  caId: { type: 'string', ref: { entity: 'cas', onDelete: 'cascade' } },
  /** `<identityId>:<method>`: one outstanding enrollment per method and identity. */
  methodKey: { type: 'string', unique: true, filter: false, conflictCode: 'ENROLLMENT_EXISTS' },
} as const satisfies EntityFields;

/**
 * Outstanding enrollments of identities (one-time token, or username/password), created with the identity or over
 * `/enrollments`; the client's enroll operations consume them (src/auth/enrollment.ts, docs/enrollment.md).
 */
export const enrollments: Entity<'enrollments', typeof enrollmentStoredFields> = defineEntity({
  name: 'enrollments',
  type: 'enrollment',
  tag: 'Enrollment',
  singular: 'Enrollment',
  plural: 'Enrollments',
  permission: 'enrollment',
  fields: enrollmentStoredFields,
  detail: enrollmentDetail,
  create: s.named(
    'enrollmentCreate',
    s.obj(
      {
        caId: s.nullable(s.str()),
        expiresAt: s.datetime(),
        identityId: s.str(),
        method: s.enum(['ott', 'ottca', 'updb'] as const),
        username: s.nullable(s.str()),
      },
      ['method', 'expiresAt', 'identityId'],
    ),
  ),
  toApi: (row, svc) => {
    const out: Record<string, unknown> = {
      caId: row.caId ?? null,
      // the spec lists `details` as required: an empty map (OpenZiti's model has no such field to fill)
      details: {},
      expiresAt: row.expiresAt,
      jwt: row.jwt,
      method: row.method,
      token: row.token,
    };
    const identityId = row.identityId;
    if (identityId) {
      out.identity = ref('identities', identityId, svc.get('identities', identityId)?.name);
      out.identityId = identityId;
    }
    const routerId = row.edgeRouterId;
    if (routerId) {
      out.edgeRouter = ref('edge-routers', routerId, svc.get('edge-routers', routerId)?.name);
      out.edgeRouterId = routerId;
    }
    const transitId = row.transitRouterId;
    if (transitId) {
      const name = svc.get('transit-routers', transitId)?.name;
      out.transitRouter = ref('transit-routers', transitId, name);
      out.transitRouterId = transitId;
    }
    if (row.method === 'updb') out.username = row.username;
    return out;
  },
  reads: ['identities', 'edge-routers', 'transit-routers'],
  // As OpenZiti: a caller without admin rights neither sees nor touches an admin identity's enrollments
  hiddenFrom: (caller, svc) => (caller?.identity.isAdmin === true ? undefined : (row) => enrollsAdmin(svc, row)),
  beforeDelete: (row, svc, caller) => adminTargetGuard(svc, caller, row.identityId),
  // the token and JWT are credentials: admins see them, other readers (admin_readonly, enrollment.read) do not
  redact: (data) => {
    const { jwt: _jwt, ...rest } = data;
    return { ...rest, token: '' };
  },
  operations: { update: false, patch: false },
  async fromApi(body, { svc, expect, caller }) {
    const identityId = body.identityId as string;
    const method = body.method as string;
    const expiresAtMs = checkedExpiry(svc, body.expiresAt);
    if (!svc.get('identities', identityId)) {
      throw fieldError('identityId', `identity with id ${identityId} not found`, identityId);
    }
    expect.push(...adminTargetGuard(svc, caller, identityId));
    const data = await enrollmentFields(svc, identityId, method, expiresAtMs);
    if (method === 'ottca') data.caId = ottcaCaId(svc, body.caId, 'caId');
    if (method === 'updb') {
      const u = body.username;
      if (typeof u !== 'string' || u.length < 4 || u.length > 100) {
        throw fieldError('username', 'username must be 4 to 100 characters', String(u ?? ''));
      }
      const free = usernameFree(u, 'username');
      if (svc.store.lookup('authenticators', 'username', u).length > 0) throw fieldError('username', free.reason, u);
      expect.push(free);
      data.username = u;
    }
    return data;
  },
});

/** The `enrollment` block of an identity's detail. */
export function identityEnrollments(svc: Services, identityId: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const id of svc.store.lookup('enrollments', 'identityId', identityId)) {
    const e = svc.get('enrollments', id)!;
    const block: Record<string, unknown> = { expiresAt: e.expiresAt, id: e.id, jwt: e.jwt, token: e.token };
    if (e.caId) {
      block.caId = e.caId;
      block.ca = ref('cas', e.caId, svc.get('cas', e.caId)?.name);
    }
    out[e.method!] = block;
  }
  return out;
}

const controllerKeyFields = {
  kid: { type: 'string', filter: false },
  alg: { type: 'string', filter: false },
  privateJwk: { type: 'object', filter: false },
  publicJwk: { type: 'object', filter: false },
} as const satisfies EntityFields;

/** Controller signing keys (replicated, never served). */
export const controllerKeys: Entity<'controller-keys', typeof controllerKeyFields> = defineInternalEntity(
  'controller-keys',
  'controllerKey',
  controllerKeyFields,
);
