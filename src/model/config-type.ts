import { defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import { fieldError } from '../api/errors.js';
import { s } from '../schema/s.js';
import { compileUserSchema } from '../schema/user-schema.js';
import { tags } from './common.js';
import { configs } from './config.js';

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

const target = s.enum(['service', 'router'] as const);
const schema = s.map(true);

/** A config type's stored fields; its `target` is set on create (default `service`) and never changes. */
const configTypeFields = {
  name: { type: 'string', unique: true, nonEmpty: true, body: s.str(), api: true },
  schema: { type: 'object', body: schema, api: true, default: {} },
  target: { type: 'string', index: true, api: true, default: null },
} as const satisfies EntityFields;

export const configTypes: Entity<'config-types', typeof configTypeFields> = defineEntity({
  name: 'config-types',
  type: 'configType',
  tag: 'Config',
  singular: 'ConfigType',
  plural: 'ConfigTypes',
  permission: 'config-type',
  fields: configTypeFields,
  detail: detailSchema(
    'configTypeDetail',
    s.obj({ name: s.str(), schema: s.map(true), target: s.nullable(target) }, ['name', 'schema']),
  ),
  create: s.named('configTypeCreate', s.obj({ name: s.str(), schema, tags, target: s.nullable(target) }, ['name'])),
  update: s.named('configTypeUpdate', s.obj({ name: s.str(), schema, tags }, ['name'])),
  patch: s.named('configTypePatch', s.obj({ name: s.str(), schema, tags })),
  relations: [
    {
      path: 'configs',
      listed: (): Entity => configs,
      via: { ref: 'configTypeId' },
      operationId: 'listConfigsForConfigType',
      summary: 'Lists the configs of a specific config-type',
    },
  ],
  fromApi(body, { mode, existing, copied }) {
    if (mode !== 'create' && 'target' in body && body.target !== existing?.target) {
      throw fieldError('target', 'the target of a config type cannot be changed', body.target);
    }
    const out = { ...copied };
    if (mode === 'create') out.target = body.target ?? 'service';
    if ('schema' in out) {
      const compiled = compileUserSchema(out.schema as Record<string, unknown>);
      if ('error' in compiled) throw fieldError('schema', `invalid JSON schema: ${compiled.error}`, out.schema);
    }
    return out;
  },
});
