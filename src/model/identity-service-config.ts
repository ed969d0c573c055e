import { createHash } from 'node:crypto';
import { defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import { s } from '../schema/s.js';
import { entityRef } from './common.js';

/**
 * A config an identity uses for one service instead of the service's own config of that type (OpenZiti's identity
 * service configs): one per identity, service and config type (`slot`). Deleting the identity or the service
 * removes it; a config in use this way cannot be deleted (409), as in OpenZiti.
 */
const identityServiceConfigFields = {
  identityId: { type: 'string', ref: { entity: 'identities', onDelete: 'cascade' } },
  serviceId: { type: 'string', ref: { entity: 'services', onDelete: 'cascade' } },
  configId: { type: 'string', ref: { entity: 'configs', onDelete: 'restrict' } },
  /** `<identityId> <serviceId> <configTypeId>`: one config per type for an identity and a service. */
  slot: { type: 'string', unique: true, filter: false },
} as const satisfies EntityFields;

export const serviceConfigDetail = s.named(
  'serviceConfigDetail',
  s.obj({ config: entityRef, configId: s.str(), service: entityRef, serviceId: s.str() }, [
    'serviceId',
    'service',
    'configId',
    'config',
  ]),
);

/** Stored only: served by `/identities/{id}/service-configs` (src/ops/service-configs.ts). */
export const identityServiceConfigs: Entity<'identity-service-configs', typeof identityServiceConfigFields> =
  defineEntity({
    name: 'identity-service-configs',
    type: 'identityServiceConfig',
    tag: 'Identity',
    singular: 'IdentityServiceConfig',
    plural: 'IdentityServiceConfigs',
    permission: 'identity',
    fields: identityServiceConfigFields,
    detail: detailSchema('identityServiceConfigDetail', serviceConfigDetail),
    operations: { list: false, detail: false, create: false, update: false, patch: false, delete: false },
  });

/** The unique slot of an identity's config for a service and a config type. */
export function serviceConfigSlot(identityId: string, serviceId: string, configTypeId: string): string {
  return `${identityId} ${serviceId} ${configTypeId}`;
}

/**
 * The id of the row that fills a slot: derived from the slot, so that concurrent writes to one slot replace each
 * other at apply time, and opaque (a digest), so that an answer naming the row (a 409 listing what references a
 * config) reveals no identity or service id.
 */
export function serviceConfigRowId(slot: string): string {
  return createHash('sha256').update(slot).digest('base64url').slice(0, 22);
}
