import type { Row } from '../../storage/types.js';
import { defineEntity } from '../api/entity.js';
import type { Services } from '../api/services.js';
import { s } from '../schema/s.js';

/**
 * Outstanding enrollments of identities (one-time token or username/password), created with the identity.
 * The client's enroll operations consume them (src/auth/enrollment.ts); their management operations are to come.
 * The rows also back the `enrollment` block of an identity.
 */
export const enrollments = defineEntity({
  name: 'enrollments',
  type: 'enrollment',
  tag: 'Enrollment',
  singular: 'Enrollment',
  plural: 'Enrollments',
  permission: 'enrollment',
  fields: {
    method: { type: 'string', index: true },
    identityId: { type: 'string', ref: { entity: 'identities', onDelete: 'cascade' } },
    token: { type: 'string', unique: true },
    expiresAt: { type: 'datetime' },
    jwt: { type: 'string', filter: false },
    username: { type: 'string', unique: true },
    /** `<identityId>:<method>`: one outstanding enrollment per method and identity. */
    methodKey: { type: 'string', unique: true, filter: false, conflictCode: 'ENROLLMENT_EXISTS' },
  },
  detail: s.named('enrollmentDetail', s.obj({})),
  toApi: (row) => ({ method: row.method, identityId: row.identityId, token: row.token, expiresAt: row.expiresAt }),
  operations: { list: false, detail: false, create: false, update: false, patch: false, delete: false },
});

/** The `enrollment` block of an identity's detail. */
export function identityEnrollments(svc: Services, identityId: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const id of svc.store.lookup('enrollments', 'identityId', identityId)) {
    const e = svc.get('enrollments', id) as Row;
    out[e.method as string] = { expiresAt: e.expiresAt, id: e.id, jwt: e.jwt, token: e.token };
  }
  return out;
}

/** Controller signing keys (replicated, never served). */
export const controllerKeys = defineEntity({
  name: 'controller-keys',
  type: 'controllerKey',
  tag: 'Internal',
  singular: 'ControllerKey',
  plural: 'ControllerKeys',
  fields: {
    kid: { type: 'string', filter: false },
    alg: { type: 'string', filter: false },
    privateJwk: { type: 'object', filter: false },
    publicJwk: { type: 'object', filter: false },
  },
  detail: s.named('controllerKeyDetail', s.obj({})),
  toApi: () => ({}),
  operations: { list: false, detail: false, create: false, update: false, patch: false, delete: false },
});
