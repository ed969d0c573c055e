import type { Entity } from '../api/entity.js';
import { edgeRouters } from './edge-router.js';
import { definePolicy, roleIndexName } from './policy.js';
import { services } from './service.js';

const index = (field: string) => roleIndexName('service-edge-router-policies', field);

/** Service edge router policies: which services may be reached through which edge routers. */
export const serviceEdgeRouterPolicies: Entity<'service-edge-router-policies'> = definePolicy({
  name: 'service-edge-router-policies',
  type: 'serviceEdgeRouterPolicy',
  tag: 'Service Edge Router Policy',
  singular: 'ServiceEdgeRouterPolicy',
  plural: 'ServiceEdgeRouterPolicies',
  permission: 'service-edge-router-policy',
  schemaBase: 'serviceEdgeRouterPolicy',
  roleLists: [
    { field: 'edgeRouterRoles', entity: 'edge-routers' },
    { field: 'serviceRoles', entity: 'services' },
  ],
  relations: [
    {
      path: 'edge-routers',
      listed: (): Entity => edgeRouters,
      via: { index: index('edgeRouterRoles'), side: 'targets' },
      operationId: 'listServiceEdgeRouterPolicyEdgeRouters',
      summary: 'List the edge routers that a service edge router policy applies to',
    },
    {
      path: 'services',
      listed: (): Entity => services,
      via: { index: index('serviceRoles'), side: 'targets' },
      operationId: 'listServiceEdgeRouterPolicyServices',
      summary: 'List the services that a service edge router policy applies to',
    },
  ],
});
