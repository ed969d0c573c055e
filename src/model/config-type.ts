import { defineEntity, detailSchema } from '../api/entity.js';
import { s } from '../schema/s.js';

/** Built-in config types with their fixed ids (REFERENCE §7), created at initialisation. */
export const BUILTIN_CONFIG_TYPES: { id: string; name: string; target: 'service' | 'router' }[] = [
  { id: 'f2dd2df0-9c04-4b84-a91e-71437ac229f1', name: 'ziti-tunneler-client.v1', target: 'service' },
  { id: 'cea49285-6c07-42cf-9f52-09a9b115c783', name: 'ziti-tunneler-server.v1', target: 'service' },
  { id: 'g7cIWbcGg', name: 'intercept.v1', target: 'service' },
  { id: 'NH5p4FpGR', name: 'host.v1', target: 'service' },
  { id: 'host.v2', name: 'host.v2', target: 'service' },
  { id: 'interfaces.v1', name: 'interfaces.v1', target: 'service' },
  { id: 'proxy.v1', name: 'proxy.v1', target: 'service' },
  { id: 'router.link.v1', name: 'router.link.v1', target: 'router' },
];

export const configTypes = defineEntity({
  name: 'config-types',
  type: 'configType',
  tag: 'Config',
  singular: 'ConfigType',
  plural: 'ConfigTypes',
  permission: 'config-type',
  fields: {
    name: { type: 'string', unique: true },
    schema: { type: 'object' },
    target: { type: 'string', index: true },
  },
  detail: detailSchema(
    'configTypeDetail',
    s.obj({ name: s.str(), schema: s.map(true), target: s.nullable(s.enum(['service', 'router'] as const)) }, [
      'name',
      'schema',
    ]),
  ),
  toApi: (row) => ({ name: row.name, schema: row.schema ?? {}, target: row.target ?? null }),
  // Config types are readable now; their create/update/delete (with JSON-schema checks) arrive with configs.
  operations: { create: false, update: false, patch: false, delete: false },
});
