/**
 * The policy engine's reads (docs/policies.md). The derived role indexes (storage/role-index.ts, one per policy
 * role list, src/model/policy.ts) keep policy ↔ identity / service / edge router matches up to date inside the
 * publish step; an answer here joins the few policies that match one entity, and never evaluates a policy.
 */
import type { RoleIndex } from '../../storage/role-index.js';
import { targetsThrough } from '../api/relations.js';
import type { Services } from '../api/services.js';
import { roleIndexName } from './policy.js';

export type PolicyType = 'Dial' | 'Bind';

/** What one identity may do with one service, and the service policies that grant it. */
export interface ServiceAccess {
  dial: string[];
  bind: string[];
}

const SP_IDENTITIES = roleIndexName('service-policies', 'identityRoles');
const SP_SERVICES = roleIndexName('service-policies', 'serviceRoles');

/**
 * Service id → the Dial and Bind policies granting `identityId` access to it (`onlyServiceId`: that service alone).
 * Cost: the services of the service policies matching the identity (read from the role indexes), nothing else.
 */
export function serviceAccessOf(svc: Services, identityId: string, onlyServiceId?: string): Map<string, ServiceAccess> {
  const byPolicy = svc.store.derived.get<RoleIndex>(SP_IDENTITIES);
  const targets = svc.store.derived.get<RoleIndex>(SP_SERVICES);
  const out = new Map<string, ServiceAccess>();
  const grant = (serviceId: string, list: keyof ServiceAccess, policyId: string) => {
    let access = out.get(serviceId);
    if (!access) out.set(serviceId, (access = { dial: [], bind: [] }));
    access[list].push(policyId);
  };
  for (const policyId of byPolicy.policiesOf(identityId)) {
    const type = svc.get('service-policies', policyId)?.type;
    const list = type === 'Dial' ? 'dial' : type === 'Bind' ? 'bind' : null;
    if (list === null) continue;
    const matched = targets.targetsOf(policyId);
    if (onlyServiceId === undefined) for (const serviceId of matched) grant(serviceId, list, policyId);
    else if (matched.has(onlyServiceId)) grant(onlyServiceId, list, policyId);
  }
  return out;
}

/** The `permissions` of a service access: `Dial` and/or `Bind`. */
export function permissionsOf(access: ServiceAccess): PolicyType[] {
  const out: PolicyType[] = [];
  if (access.dial.length > 0) out.push('Dial');
  if (access.bind.length > 0) out.push('Bind');
  return out;
}

/** The edge routers an identity may use (through the edge router policies that select it). */
export function identityEdgeRouters(svc: Services, identityId: string): Set<string> {
  return targetsThrough(
    svc,
    {
      policies: roleIndexName('edge-router-policies', 'identityRoles'),
      targets: roleIndexName('edge-router-policies', 'edgeRouterRoles'),
    },
    identityId,
  );
}

/** The edge routers a service may be reached through (through its service edge router policies). */
export function serviceEdgeRouters(svc: Services, serviceId: string): Set<string> {
  return targetsThrough(
    svc,
    {
      policies: roleIndexName('service-edge-router-policies', 'serviceRoles'),
      targets: roleIndexName('service-edge-router-policies', 'edgeRouterRoles'),
    },
    serviceId,
  );
}
