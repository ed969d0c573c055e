/** The entity types the storage tests use (a restrict ref, a set index, cascades, a self-referencing clear). */
import type { Command, EntityDef } from '../../storage/types.js';

export const defs: EntityDef[] = [
  { name: 'policies', type: 'policy', fields: { name: { type: 'string', unique: true } } },
  {
    name: 'people',
    type: 'person',
    fields: {
      name: { type: 'string', unique: true },
      policyId: { type: 'string', ref: { entity: 'policies', onDelete: 'restrict' } },
      attrs: { type: 'string', set: true, index: true },
      friendIds: { type: 'string', set: true, ref: { entity: 'people', onDelete: 'clear' } },
    },
  },
  {
    name: 'keys',
    type: 'key',
    fields: { personId: { type: 'string', ref: { entity: 'people', onDelete: 'cascade' } } },
  },
  {
    name: 'tokens',
    type: 'token',
    fields: { keyId: { type: 'string', ref: { entity: 'keys', onDelete: 'cascade' } } },
  },
];

export const AT = '2026-01-01T00:00:00.000Z';

export const create = (entity: string, id: string, data: Record<string, unknown>): Command => ({
  op: 'create',
  entity,
  id,
  data,
  at: AT,
});
