/**
 * Terminators (OpenZiti's fabric terminators): where a service's traffic leaves the network — a router, a binding
 * (e.g. `transport`, `edge`) and an address. Management CRUD, `GET /services/{id}/terminators` on both APIs (the
 * client's limited view, only for a service the caller may use). A terminator belongs to its service and its
 * router: deleting either deletes it (store cascade). As in OpenZiti, its service, `identity` and `identitySecret`
 * are set on create only (a later `service` is ignored), and the secret is never shown.
 */
import type { Row } from '../../storage/types.js';
import { bodyFieldsOf, defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import { fieldError } from '../api/errors.js';
import type { Services } from '../api/services.js';
import { s } from '../schema/s.js';
import { entityRef, ref } from './common.js';
import type { RowFor } from './rows.js';

export const terminatorCost = s.named('terminatorCost', s.int({ minimum: 0, maximum: 65535 }));
export const terminatorPrecedence = s.named('terminatorPrecedence', s.enum(['default', 'required', 'failed'] as const));
/** Keel's bound on the strings a terminator holds (binding, address, identity). */
export const MAX_TERMINATOR_STRING = 1024;
const bounded = s.str({ maxLength: MAX_TERMINATOR_STRING });

const terminatorFields = {
  serviceId: { type: 'string', ref: { entity: 'services', onDelete: 'cascade' }, api: true },
  routerId: { type: 'string', ref: { entity: 'transit-routers', onDelete: 'cascade' }, api: true },
  binding: { type: 'string', nonEmpty: true, body: bounded, api: true },
  address: { type: 'string', nonEmpty: true, body: bounded, api: true },
  identity: { type: 'string', api: true, default: '' },
  /** Base64 (`format: byte`): kept for the routers, never rendered. */
  identitySecret: { type: 'string', filter: false },
  cost: { type: 'number', body: terminatorCost, api: true, default: 0 },
  precedence: { type: 'string', body: terminatorPrecedence, api: true, default: 'default' },
} as const satisfies EntityFields;

const writable = { ...bodyFieldsOf(terminatorFields), router: s.str(), service: s.str() };
const required = ['service', 'router', 'address', 'binding'] as const;

export const terminatorDetail = detailSchema(
  'terminatorDetail',
  s.obj(
    {
      address: s.str(),
      binding: s.str(),
      cost: terminatorCost,
      dynamicCost: terminatorCost,
      identity: s.str(),
      precedence: terminatorPrecedence,
      router: entityRef,
      routerId: s.str(),
      service: entityRef,
      serviceId: s.str(),
    },
    [
      'serviceId',
      'service',
      'routerId',
      'router',
      'binding',
      'address',
      'identity',
      'cost',
      'precedence',
      'dynamicCost',
    ],
  ),
);

/** The client's view (`terminatorClientDetail`): which router and identity host the service, nothing more. */
export const terminatorClientDetail = detailSchema(
  'terminatorClientDetail',
  s.obj({ identity: s.str(), routerId: s.str(), service: entityRef, serviceId: s.str() }, [
    'serviceId',
    'service',
    'routerId',
    'identity',
  ]),
);

function serviceRef(svc: Services, row: RowFor<'terminators'>): Record<string, unknown> {
  const id = row.serviceId!;
  return ref('services', id, svc.get('services', id)?.name);
}

/** The client's rendering of a terminator. */
export function renderClientTerminator(row: RowFor<'terminators'>, svc: Services): Record<string, unknown> {
  return {
    _links: { self: { href: `./terminators/${row.id}` } },
    createdAt: row.createdAt,
    id: row.id,
    identity: row.identity ?? '',
    routerId: row.routerId,
    service: serviceRef(svc, row),
    serviceId: row.serviceId,
    tags: row.tags ?? {},
    updatedAt: row.updatedAt,
  };
}

/** The id of an existing row named by a body field, or 400 on that field (as the store's reference check says). */
function existing(
  svc: Services,
  entity: 'services' | 'transit-routers',
  type: string,
  field: string,
  value: unknown,
): string {
  const id = typeof value === 'string' ? value : '';
  if (!svc.get(entity, id)) throw fieldError(field, `${type} with id ${id} not found`, value);
  return id;
}

export const terminators: Entity<'terminators', typeof terminatorFields> = defineEntity({
  name: 'terminators',
  type: 'terminator',
  tag: 'Terminator',
  singular: 'Terminator',
  plural: 'Terminators',
  permission: 'terminator',
  fields: terminatorFields,
  // OpenZiti's filter names for the references
  symbols: () => ({
    service: { type: 'string', set: false, get: (r: Row) => r.serviceId, indexed: false },
    router: { type: 'string', set: false, get: (r: Row) => r.routerId, indexed: false },
  }),
  detail: terminatorDetail,
  create: s.named(
    'terminatorCreate',
    s.obj({ ...writable, identity: bounded, identitySecret: s.str({ maxLength: MAX_TERMINATOR_STRING }) }, required),
  ),
  update: s.named('terminatorUpdate', s.obj(writable, required)),
  patch: s.named('terminatorPatch', s.obj(writable)),
  toApi: (row, svc): Record<string, unknown> => {
    const routerId = row.routerId!;
    return {
      service: serviceRef(svc, row),
      router: ref('transit-routers', routerId, svc.get('transit-routers', routerId)?.name),
      // the part of the cost routers report from their circuits: none yet
      dynamicCost: 0,
    };
  },
  reads: ['services', 'transit-routers'],
  fromApi(body, { mode, svc, copied }): Record<string, unknown> {
    const out = { ...copied };
    if (mode === 'create') {
      out.serviceId = existing(svc, 'services', 'service', 'service', body.service);
      if (typeof body.identity === 'string') out.identity = body.identity;
      if (typeof body.identitySecret === 'string') {
        if (!/^[A-Za-z0-9+/]*={0,2}$/.test(body.identitySecret) || body.identitySecret.length % 4 !== 0) {
          throw fieldError('identitySecret', 'must be base64', '');
        }
        out.identitySecret = body.identitySecret;
      }
    }
    if (typeof body.router === 'string')
      out.routerId = existing(svc, 'transit-routers', 'router', 'router', body.router);
    return out;
  },
});
