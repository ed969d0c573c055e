import type { Row } from '../../storage/types.js';
import { defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import { fieldError } from '../api/errors.js';
import type { Services } from '../api/services.js';
import { s } from '../schema/s.js';
import { checkAgainstSchema } from '../schema/user-schema.js';
import { entityRef, ref, tags } from './common.js';
import type { RowFor } from './rows.js';
import { services } from './service.js';

const data = s.map(true);

/** A config's stored fields; its type (`configTypeId`) is set on create and never changes. */
const configFields = {
  name: { type: 'string', unique: true, nonEmpty: true, body: s.str(), api: true },
  configTypeId: { type: 'string', ref: { entity: 'config-types', onDelete: 'restrict' }, api: true },
  data: { type: 'object', body: data, api: true, default: {} },
} as const satisfies EntityFields;

/** The config type row, or 400 on `configTypeId` (OpenZiti: "invalid config type"). */
function configTypeOf(svc: Services, id: unknown): RowFor<'config-types'> {
  const type = typeof id === 'string' ? svc.get('config-types', id) : undefined;
  if (!type) throw fieldError('configTypeId', 'invalid config type', id);
  return type;
}

export const configs: Entity<'configs', typeof configFields> = defineEntity({
  name: 'configs',
  type: 'config',
  tag: 'Config',
  singular: 'Config',
  plural: 'Configs',
  permission: 'config',
  fields: configFields,
  symbols: () => ({
    // OpenZiti's filter name for the config's type
    type: { type: 'string', set: false, get: (r: Row) => r.configTypeId, indexed: false },
  }),
  detail: detailSchema(
    'configDetail',
    s.obj({ configType: entityRef, configTypeId: s.str(), data: s.map(true), name: s.str() }, [
      'name',
      'configTypeId',
      'configType',
      'data',
    ]),
  ),
  create: s.named(
    'configCreate',
    s.obj({ configTypeId: s.str(), data, name: s.str(), tags }, ['name', 'configTypeId', 'data']),
  ),
  update: s.named('configUpdate', s.obj({ data, name: s.str(), tags }, ['name', 'data'])),
  patch: s.named('configPatch', s.obj({ data, name: s.str(), tags })),
  toApi: (row, svc): Record<string, unknown> => {
    const type = svc.get('config-types', row.configTypeId!);
    return { configType: ref('config-types', row.configTypeId!, type?.name) };
  },
  reads: ['config-types'],
  relations: [
    {
      path: 'services',
      listed: (): Entity => services,
      via: { ref: 'configs' },
      operationId: 'listConfigServices',
      summary: 'Lists the services that use a config',
    },
  ],
  fromApi(body, { mode, svc, existing, copied }) {
    // a config keeps its type: an update naming another one is not refused, the type is left as it is (OpenZiti's
    // configUpdate and configPatch have no type, and its manager leaves `type` out of every update)
    const type = configTypeOf(svc, mode === 'create' ? body.configTypeId : existing?.configTypeId);
    const out = { ...copied };
    if (mode === 'create') out.configTypeId = type.id;
    else delete out.configTypeId;
    if ('data' in out) {
      const err = checkAgainstSchema(type.schema ?? {}, out.data, 'data');
      if (err) throw fieldError(err.field, err.reason, err.value);
    }
    return out;
  },
});
