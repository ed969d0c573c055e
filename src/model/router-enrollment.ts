/**
 * A router's outstanding enrollment: a row of the `enrollments` entity, as in OpenZiti — method `erott` keyed on
 * the edge router (`edgeRouterId`), `trott` keyed on the transit router (`transitRouterId`). Created with its router
 * (OpenZiti's default window, 180 minutes), listed and refreshable on `/enrollments`, used up by the router
 * enrollment (src/auth/router-enrollment.ts). What enrollment yields (`fingerprint`, `certPem`, `isVerified`) is
 * kept on the router's `transit-routers` row, which every router has (docs/routers.md).
 */
import { assert } from '../../storage/types.js';
import type { Services } from '../api/services.js';
import { DEFAULT_ENROLLMENT_DURATION_MS } from '../pki/enrollment-jwt.js';
import { shortId } from '../util/ids.js';
import { tokenFields } from './enrollment.js';
import type { Command, RowFor } from './rows.js';

/** Edge router one-time-token enrollment (OpenZiti's `erott`). */
export const ROUTER_ENROLL_METHOD = 'erott';
/** Transit router one-time-token enrollment (OpenZiti's `trott`). */
export const TRANSIT_ROUTER_ENROLL_METHOD = 'trott';

export type RouterEnrollMethod = typeof ROUTER_ENROLL_METHOD | typeof TRANSIT_ROUTER_ENROLL_METHOD;

/** The enrollment field naming the router, per method. */
export const ROUTER_KEY: Readonly<Record<RouterEnrollMethod, 'edgeRouterId' | 'transitRouterId'>> = {
  erott: 'edgeRouterId',
  trott: 'transitRouterId',
};

/** The command creating router `routerId`'s enrollment at `at` (the JWT's subject is the router's id). */
export async function routerEnrollmentCommand(
  svc: Services,
  routerId: string,
  method: RouterEnrollMethod,
  at: string,
): Promise<Command> {
  assert(routerId.length > 0, 'a router enrollment names its router');
  const expiresAtMs = Date.parse(at) + DEFAULT_ENROLLMENT_DURATION_MS;
  const data = { [ROUTER_KEY[method]]: routerId, ...(await tokenFields(svc, routerId, method, expiresAtMs)) };
  return { op: 'create', entity: 'enrollments', id: shortId(), at, data };
}

/** The outstanding enrollment of a router (edge or transit: the ids are shared), or undefined. */
export function routerEnrollmentOf(svc: Services, routerId: string): RowFor<'enrollments'> | undefined {
  for (const method of [ROUTER_ENROLL_METHOD, TRANSIT_ROUTER_ENROLL_METHOD] as const) {
    for (const id of svc.store.lookup('enrollments', ROUTER_KEY[method], routerId)) {
      const row = svc.get('enrollments', id);
      if (row?.method === method) return row;
    }
  }
  return undefined;
}

/** The enrollment fields of a router's detail (`/edge-routers`, `/routers`): null once enrolled, as OpenZiti. */
export function routerEnrollmentView(svc: Services, routerId: string): Record<string, unknown> {
  const e = routerEnrollmentOf(svc, routerId);
  return {
    enrollmentCreatedAt: e?.createdAt ?? null,
    enrollmentExpiresAt: e?.expiresAt ?? null,
    enrollmentJwt: e?.jwt ?? null,
    enrollmentToken: e?.token ?? null,
  };
}

/** The enrollment token and JWT are credentials: admins see them, other readers do not. */
export function redactRouterEnrollment(data: Record<string, unknown>): Record<string, unknown> {
  return { ...data, enrollmentJwt: null, enrollmentToken: null };
}
