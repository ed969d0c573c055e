import type { Entity } from '../api/entity.js';
import { s } from '../schema/s.js';
import { edgeRouters } from './edge-router.js';
import { identities } from './identity.js';
import { definePolicy, roleIndexName } from './policy.js';

const index = (field: string) => roleIndexName('edge-router-policies', field);

/** Edge router policies: which identities may connect through which edge routers. */
export const edgeRouterPolicies: Entity<'edge-router-policies'> = definePolicy({
  name: 'edge-router-policies',
  type: 'edgeRouterPolicy',
  tag: 'Edge Router Policy',
  singular: 'EdgeRouterPolicy',
  plural: 'EdgeRouterPolicies',
  permission: 'edge-router-policy',
  schemaBase: 'edgeRouterPolicy',
  roleLists: [
    { field: 'edgeRouterRoles', entity: 'edge-routers' },
    { field: 'identityRoles', entity: 'identities' },
  ],
  extraDetail: { isSystem: s.bool() },
  toApi: (row) => ({ isSystem: row.isSystem === true }),
  reads: [],
  relations: [
    {
      path: 'edge-routers',
      listed: (): Entity => edgeRouters,
      via: { index: index('edgeRouterRoles'), side: 'targets' },
      operationId: 'listEdgeRouterPolicyEdgeRouters',
      summary: 'List edge routers an edge router policy affects',
    },
    {
      path: 'identities',
      listed: (): Entity => identities,
      via: { index: index('identityRoles'), side: 'targets' },
      operationId: 'listEdgeRouterPolicyIdentities',
      summary: 'List identities an edge router policy affects',
    },
  ],
});
