/**
 * The edge routers a session shows (`edgeRouters`, with their listener `urls`): the routers online on this
 * controller that both the identity's edge router policies and the service's service edge router policies allow.
 * Cost: per online router, the smaller of its policies and the caller's (read from the role indexes); no policy is
 * evaluated.
 */
import type { RoleIndex } from '../../storage/role-index.js';
import type { Services } from '../api/services.js';
import { roleIndexName } from '../model/policy.js';
import { routerPresenceOf, SYNC_DONE } from './presence.js';

/** At most this many routers per session (OpenZiti lists at most 25 per session too). */
export const MAX_SESSION_EDGE_ROUTERS = 25;

const ERP_IDENTITIES = roleIndexName('edge-router-policies', 'identityRoles');
const ERP_ROUTERS = roleIndexName('edge-router-policies', 'edgeRouterRoles');
const SERP_SERVICES = roleIndexName('service-edge-router-policies', 'serviceRoles');
const SERP_ROUTERS = roleIndexName('service-edge-router-policies', 'edgeRouterRoles');

/** Whether one policy selects both `entityId` (through `near`) and `routerId` (through `far`). */
function sharePolicy(svc: Services, near: string, far: string, entityId: string, routerId: string): boolean {
  const a = svc.store.derived.get<RoleIndex>(near).policiesOf(entityId);
  const b = svc.store.derived.get<RoleIndex>(far).policiesOf(routerId);
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  for (const policyId of small) if (large.has(policyId)) return true;
  return false;
}

/** Whether the identity's and the service's policies both allow the edge router. */
export function routerAllowedFor(svc: Services, identityId: string, serviceId: string, routerId: string): boolean {
  return (
    sharePolicy(svc, ERP_IDENTITIES, ERP_ROUTERS, identityId, routerId) &&
    sharePolicy(svc, SERP_SERVICES, SERP_ROUTERS, serviceId, routerId)
  );
}

/** A session's `edgeRouters`: OpenZiti's sessionEdgeRouter (common edge router properties and `urls`). */
export function sessionEdgeRouters(svc: Services, identityId: string, serviceId: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const on of routerPresenceOf(svc).onlineRouters()) {
    if (out.length >= MAX_SESSION_EDGE_ROUTERS) break;
    const row = svc.get('edge-routers', on.routerId);
    if (!row || !routerAllowedFor(svc, identityId, serviceId, row.id)) continue;
    out.push({
      appData: row.appData ?? {},
      cost: row.cost ?? 0,
      disabled: row.disabled === true,
      hostname: on.hostname,
      isOnline: true,
      name: row.name,
      noTraversal: row.noTraversal === true,
      supportedProtocols: { ...on.protocols },
      syncStatus: SYNC_DONE,
      urls: { ...on.protocols },
    });
  }
  return out;
}
