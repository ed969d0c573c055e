import type { Row } from '../../storage/types.js';
import {
  bodyFieldsOf,
  checkRoleAttributes,
  defineEntity,
  detailSchema,
  type Entity,
  type EntityFields,
} from '../api/entity.js';
import { fieldError, notFound } from '../api/errors.js';
import type { OpContext } from '../api/op.js';
import type { Services } from '../api/services.js';
import { s } from '../schema/s.js';
import { serviceAccessOf } from './access.js';
import { attributes, configIdsField } from './common.js';
import { configs } from './config.js';
import { edgeRouters } from './edge-router.js';
import { identities } from './identity.js';
import { dialBind, relationsThrough } from './policy.js';
import type { RowFor } from './rows.js';
import { serviceEdgeRouterPolicies } from './service-edge-router-policy.js';
import { servicePolicies } from './service-policy.js';
import { renderClientTerminator, terminatorClientDetail, terminators } from './terminator.js';

const postureQueries = s.named(
  'postureQueries',
  s.obj(
    {
      isPassing: s.bool(),
      policyId: s.str(),
      policyType: dialBind,
      postureQueries: s.arr(s.map(true)),
    },
    ['policyId', 'isPassing', 'postureQueries'],
  ),
);

/** The most configs one service may name (one per config type; Keel bounds the list). */
export const MAX_SERVICE_CONFIGS = 100;

/** OpenZiti's default terminator strategy (xt_smartrouting). */
const DEFAULT_TERMINATOR_STRATEGY = 'smartrouting';
/** The terminator strategies OpenZiti's fabric registers (controller/xt_*): a service names one of them. */
const TERMINATOR_STRATEGIES: ReadonlySet<string> = new Set(['smartrouting', 'weighted', 'random', 'sticky']);

/** A service's stored fields; `encryptionRequired` is set on create and by a PUT, never by a PATCH. */
const serviceFields = {
  name: { type: 'string', unique: true, nonEmpty: true, body: s.str(), api: true },
  roleAttributes: { type: 'string', set: true, index: true, body: attributes, api: true, default: [] },
  configs: configIdsField,
  encryptionRequired: { type: 'bool', api: true, default: true },
  terminatorStrategy: { type: 'string', body: s.str(), api: true, default: DEFAULT_TERMINATOR_STRATEGY },
  maxIdleTimeMillis: { type: 'number', body: s.int({ minimum: 0 }), api: true, default: 0 },
} as const satisfies EntityFields;

const writable = { ...bodyFieldsOf(serviceFields), encryptionRequired: s.bool() };

export const serviceDetail = detailSchema(
  'serviceDetail',
  s.obj(
    {
      config: s.map(s.map(true)),
      configs: s.arr(s.str()),
      encryptionRequired: s.bool(),
      maxIdleTimeMillis: s.int(),
      name: s.str(),
      permissions: s.named('dialBindArray', s.arr(dialBind)),
      postureQueries: s.arr(postureQueries),
      roleAttributes: attributes,
      terminatorStrategy: s.str(),
    },
    [
      'name',
      'maxIdleTimeMillis',
      'terminatorStrategy',
      'roleAttributes',
      'permissions',
      'configs',
      'config',
      'encryptionRequired',
      'postureQueries',
    ],
  ),
);

/**
 * OpenZiti's service config rules: every id names a config, of a type that targets services, at most one config
 * per type. The ids' existence is checked again when the write applies (a config deleted meanwhile).
 */
function checkConfigs(svc: Services, ids: string[]): string[] {
  if (ids.length > MAX_SERVICE_CONFIGS) {
    throw fieldError('configs', `at most ${MAX_SERVICE_CONFIGS} configs may be given`, ids.length);
  }
  const unique = [...new Set(ids)];
  const byType = new Map<string, string>();
  for (const id of unique) {
    const config = svc.get('configs', id);
    if (!config) throw fieldError('configs', `no config found with id ${id}`, id);
    const type = svc.get('config-types', config.configTypeId!);
    if (type && type.target !== 'service') {
      throw fieldError('configs', `config ${id} is of type ${String(type.name)}, which is not a service config`, id);
    }
    const other = byType.get(config.configTypeId as string);
    if (other) {
      throw fieldError(
        'configs',
        `duplicate configs named ${String(svc.get('configs', other)?.name)} and ${String(config.name)} found for ` +
          `config type ${String(type?.name)}. Only one config per type allowed`,
        id,
      );
    }
    byType.set(config.configTypeId as string, id);
  }
  return unique;
}

/**
 * The `config` map of a service as a client asks for it: config type name → data, for the service's configs whose
 * type is in `types` (ids or names; `all` selects every type). The identity's own config of a type for this service
 * (`/identities/{id}/service-configs`) replaces the service's.
 */
export function configMap(
  svc: Services,
  service: RowFor<'services'>,
  types: readonly string[],
  identityId?: string,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (types.length === 0) return out;
  const all = types.includes('all');
  const own = identityId
    ? svc.store
        .lookup('identity-service-configs', 'identityId', identityId)
        .map((id) => svc.get('identity-service-configs', id)!)
        .filter((r) => r.serviceId === service.id)
        .map((r) => r.configId!)
    : [];
  for (const id of [...(service.configs ?? []), ...own.sort()]) {
    const config = svc.get('configs', id);
    const type = config && svc.get('config-types', config.configTypeId!);
    if (!config || !type) continue;
    if (all || types.includes(type.id) || types.includes(type.name as string)) out[type.name as string] = config.data;
  }
  return out;
}

/** `GET /services/{id}/terminators`, on both APIs (src/model/terminator.ts). */
const serviceTerminators = {
  path: 'terminators',
  listed: (): Entity => terminators,
  via: { ref: 'serviceId' },
  operationId: 'listServiceTerminators',
  summary: 'List of terminators assigned to a service',
} as const;

/**
 * The config types a request asks for: the `configTypes` query parameter (repeated, or comma-separated as OpenZiti's
 * management list splits it), else those of the caller's API session.
 */
export function askedConfigTypes(ctx: OpContext<unknown>): string[] {
  const asked = ctx.req.query
    .getAll('configTypes')
    .flatMap((v) => v.split(','))
    .filter((v) => v !== '');
  if (asked.length > 0) return asked;
  return ctx.caller?.session.configTypes ?? [];
}

export const services: Entity<'services', typeof serviceFields> = defineEntity({
  name: 'services',
  type: 'service',
  tag: 'Service',
  singular: 'Service',
  plural: 'Services',
  permission: 'service',
  roleAttributesField: 'roleAttributes',
  fields: serviceFields,
  detail: serviceDetail,
  create: s.named('serviceCreate', s.obj(writable, ['name', 'encryptionRequired'])),
  update: s.named('serviceUpdate', s.obj(writable, ['name'])),
  patch: s.named('servicePatch', s.obj(writable)),
  // the client API lists only the services the caller may use (src/ops/access.ts)
  operations: { list: { apis: ['management'] }, detail: { apis: ['management'] } },
  relations: [
    {
      path: 'configs',
      listed: (): Entity => configs,
      via: { field: 'configs' },
      operationId: 'listServiceConfig',
      summary: 'List configs associated to a specific service',
    },
    serviceTerminators,
    {
      // the client's view: only for a service the caller may dial or bind (else it does not exist for it)
      ...serviceTerminators,
      apis: ['client'],
      access: 'authenticated',
      guard: (ctx, service) => {
        if (serviceAccessOf(ctx.svc, ctx.caller!.identity.id, service.id).size === 0) {
          throw notFound('service', service.id);
        }
      },
      view: {
        envelope: 'listClientTerminatorsEnvelope',
        detail: terminatorClientDetail,
        render: renderClientTerminator,
      },
    },
    ...relationsThrough({
      policy: (): Entity => servicePolicies,
      policyName: 'service-policies',
      near: 'serviceRoles',
      far: 'identityRoles',
      listed: (): Entity => identities,
      policies: [
        'service-policies',
        'listServiceServicePolicies',
        'List service policies that affect a specific service',
      ],
      targets: ['identities', 'listServiceIdentities', 'List identities that have access to this service'],
      policyType: true,
    }),
    ...relationsThrough({
      policy: (): Entity => serviceEdgeRouterPolicies,
      policyName: 'service-edge-router-policies',
      near: 'serviceRoles',
      far: 'edgeRouterRoles',
      listed: (): Entity => edgeRouters,
      policies: [
        'service-edge-router-policies',
        'listServiceServiceEdgeRouterPolicies',
        'List service edge router policies that affect a specific service',
      ],
      targets: ['edge-routers', 'listServiceEdgeRouters', 'List accessible edge-routers'],
    }),
  ],
  toApi: () => ({ config: {}, permissions: [], postureQueries: [] }),
  reads: [],
  // the management list fills `config` for the config types asked for (OpenZiti's PublicQueryForMgmtAccess), with
  // the caller's own service configs in place of the service's; the detail leaves it empty, as OpenZiti's does
  listView: {
    query: [{ name: 'configTypes', type: 'array' }],
    render(ctx): ((row: Row) => string) | undefined {
      const types = askedConfigTypes(ctx);
      if (types.length === 0) return undefined;
      return (row) =>
        JSON.stringify({
          ...services.render(row, ctx.svc),
          config: configMap(ctx.svc, row, types, ctx.caller?.identity.id),
        });
    },
  },
  fromApi(body, { mode, svc, existing, copied }) {
    const out = { ...copied };
    if ('roleAttributes' in out) out.roleAttributes = checkRoleAttributes('roleAttributes', out.roleAttributes);
    if ('configs' in out) out.configs = checkConfigs(svc, (out.configs as string[] | null) ?? []);
    // as OpenZiti's service manager: a PATCH never changes it; a PUT (every field) sets it, false when left out
    out.encryptionRequired =
      mode === 'create'
        ? body.encryptionRequired
        : mode === 'update'
          ? body.encryptionRequired === true
          : existing?.encryptionRequired;
    if (mode === 'create') out.roleAttributes ??= [];
    // none or an empty one is the default, stored as such (OpenZiti's service store: every write, so filters see it)
    if (out.terminatorStrategy === '' || (mode === 'create' && out.terminatorStrategy === undefined)) {
      out.terminatorStrategy = DEFAULT_TERMINATOR_STRATEGY;
    }
    // one the fabric has (OpenZiti's service store looks it up in its strategy registry and answers 404 for another,
    // a status its spec does not declare on a create: here the spec's 400 on the field)
    if (typeof out.terminatorStrategy === 'string' && !TERMINATOR_STRATEGIES.has(out.terminatorStrategy)) {
      const known = [...TERMINATOR_STRATEGIES].join(', ');
      throw fieldError(
        'terminatorStrategy',
        `no terminator strategy with that name (${known})`,
        out.terminatorStrategy,
      );
    }
    return out;
  },
});
