/**
 * A router's outstanding enrollment, kept on its `transit-routers` row (every router has one: an edge router's
 * row is created with it). Created with the router: a one-time token and a JWT signed like identity enrollment
 * JWTs (src/pki/enrollment-jwt.ts: `em` = `erott` for an edge router, `trott` for a transit router, `sub` = the
 * router id, `jti` = the token, `exp` = the expiry). The router enrollment (`POST /enroll/erott`) finds the row by
 * its token (`routerByEnrollmentToken`), checks `enrollmentExpiresAt`, and on success writes `fingerprint`,
 * `isVerified: true` and ENROLLMENT_CLEARED in one update (docs/routers.md).
 */
import { assert, type Row } from '../../storage/types.js';
import type { Services } from '../api/services.js';
import { DEFAULT_ENROLLMENT_DURATION_MS, signEnrollmentJwt } from '../pki/enrollment-jwt.js';
import { uuid } from '../util/ids.js';

export type RouterEnrollmentMethod = 'erott' | 'trott';

/** The stored fields of a router's enrollment (all null once enrolled). */
export const ROUTER_ENROLLMENT_FIELDS = [
  'enrollmentMethod',
  'enrollmentToken',
  'enrollmentJwt',
  'enrollmentCreatedAt',
  'enrollmentExpiresAt',
] as const;

/** The set of an update that ends the enrollment (the router enrolled). */
export const ENROLLMENT_CLEARED: Readonly<Record<(typeof ROUTER_ENROLLMENT_FIELDS)[number], null>> = {
  enrollmentMethod: null,
  enrollmentToken: null,
  enrollmentJwt: null,
  enrollmentCreatedAt: null,
  enrollmentExpiresAt: null,
};

/** A fresh enrollment of router `routerId`: OpenZiti's default window (180 minutes) from now. */
export async function routerEnrollmentFields(
  svc: Services,
  routerId: string,
  method: RouterEnrollmentMethod,
): Promise<Record<string, string>> {
  assert(routerId.length > 0, 'a router enrollment names its router');
  const nowMs = svc.clock.now();
  const expiresAtMs = nowMs + DEFAULT_ENROLLMENT_DURATION_MS;
  const token = uuid();
  return {
    enrollmentMethod: method,
    enrollmentToken: token,
    enrollmentJwt: await signEnrollmentJwt(svc, { identityId: routerId, token, method, expiresAtMs }),
    enrollmentCreatedAt: new Date(nowMs).toISOString(),
    enrollmentExpiresAt: new Date(expiresAtMs).toISOString(),
  };
}

/** The router (its `transit-routers` row) whose outstanding enrollment holds `token`, if any. */
export function routerByEnrollmentToken(svc: Services, token: string): Row | undefined {
  const [id] = svc.store.lookup('transit-routers', 'enrollmentToken', token);
  return id === undefined ? undefined : svc.get('transit-routers', id);
}

/** The enrollment fields of a router's API view: the outstanding enrollment, or nulls once verified. */
export function enrollmentView(row: Row | undefined): Record<string, unknown> {
  const pending = row !== undefined && row.isVerified !== true && typeof row.enrollmentToken === 'string';
  return {
    enrollmentCreatedAt: pending ? row.enrollmentCreatedAt : null,
    enrollmentExpiresAt: pending ? row.enrollmentExpiresAt : null,
    enrollmentJwt: pending ? row.enrollmentJwt : null,
    enrollmentToken: pending ? row.enrollmentToken : null,
  };
}
