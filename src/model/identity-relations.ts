import type { Entity } from '../api/entity.js';
import type { RelationSpec } from '../api/relations.js';
import { edgeRouters } from './edge-router.js';
import { edgeRouterPolicies } from './edge-router-policy.js';
import { relationsThrough } from './policy.js';
import { services } from './service.js';
import { servicePolicies } from './service-policy.js';

/** An identity's association lists through the policies that select it. */
export const identityPolicyRelations: RelationSpec[] = [
  ...relationsThrough({
    policy: (): Entity => servicePolicies,
    policyName: 'service-policies',
    near: 'identityRoles',
    far: 'serviceRoles',
    listed: (): Entity => services,
    policies: ['service-policies', 'listIdentityServicePolicies', 'List the service policies that affect an identity'],
    targets: ['services', 'listIdentityServices', 'List the services the identity may dial or bind'],
    policyType: true,
  }),
  ...relationsThrough({
    policy: (): Entity => edgeRouterPolicies,
    policyName: 'edge-router-policies',
    near: 'identityRoles',
    far: 'edgeRouterRoles',
    listed: (): Entity => edgeRouters,
    policies: [
      'edge-router-policies',
      'listIdentitysEdgeRouterPolicies',
      'List the edge router policies that affect an identity',
    ],
    targets: ['edge-routers', 'listIdentityEdgeRouters', 'List the edge routers the identity may connect to'],
  }),
];
