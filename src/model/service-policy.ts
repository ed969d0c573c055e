import type { Entity } from '../api/entity.js';
import { s } from '../schema/s.js';
import { identities } from './identity.js';
import { definePolicy, dialBind, roleIndexName } from './policy.js';
import { postureChecks } from './posture-check.js';
import { services } from './service.js';

const index = (field: string) => roleIndexName('service-policies', field);

/** Service policies: which identities may dial or bind which services and which posture checks they require. */
export const servicePolicies: Entity<'service-policies'> = definePolicy({
  name: 'service-policies',
  type: 'servicePolicy',
  tag: 'Service Policy',
  singular: 'ServicePolicy',
  plural: 'ServicePolicies',
  permission: 'service-policy',
  schemaBase: 'servicePolicy',
  roleLists: [
    { field: 'identityRoles', entity: 'identities' },
    { field: 'serviceRoles', entity: 'services' },
    { field: 'postureCheckRoles', entity: 'posture-checks' },
  ],
  extraFields: {
    type: { type: 'string', index: true, body: s.enum(['Dial', 'Bind'] as const), api: true },
  },
  extraDetail: { type: dialBind },
  extraRequired: ['type'],
  relations: [
    {
      path: 'identities',
      listed: (): Entity => identities,
      via: { index: index('identityRoles'), side: 'targets' },
      operationId: 'listServicePolicyIdentities',
      summary: 'List identities a service policy affects',
    },
    {
      path: 'services',
      listed: (): Entity => services,
      via: { index: index('serviceRoles'), side: 'targets' },
      operationId: 'listServicePolicyServices',
      summary: 'List services a service policy affects',
    },
    {
      path: 'posture-checks',
      listed: (): Entity => postureChecks,
      via: { index: index('postureCheckRoles'), side: 'targets' },
      operationId: 'listServicePolicyPostureChecks',
      summary: 'List posture checks a service policy includes',
    },
  ],
});
