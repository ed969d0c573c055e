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

/** Whether the two policy sets share a policy (walks the smaller). */
function intersects(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  for (const policyId of small) if (large.has(policyId)) return true;
  return false;
}

/** A session's `edgeRouters`: OpenZiti's sessionEdgeRouter (common edge router properties and `urls`). */
export function sessionEdgeRouters(svc: Services, identityId: string, serviceId: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  const online = routerPresenceOf(svc).onlineRouters();
  const index = (name: string) => svc.store.derived.get<RoleIndex>(name);
  // the identity's and the service's policies are the same for every router: read once
  const identityPolicies = index(ERP_IDENTITIES).policiesOf(identityId);
  const servicePolicies = index(SERP_SERVICES).policiesOf(serviceId);
  const erpRouters = index(ERP_ROUTERS);
  const serpRouters = index(SERP_ROUTERS);
  for (const on of online) {
    if (out.length >= MAX_SESSION_EDGE_ROUTERS) break;
    const row = svc.get('edge-routers', on.routerId);
    if (!row) continue;
    // allowed when one edge router policy selects both identity and router, and one service edge router policy
    // both service and router
    if (!intersects(identityPolicies, erpRouters.policiesOf(row.id))) continue;
    if (!intersects(servicePolicies, serpRouters.policiesOf(row.id))) continue;
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
