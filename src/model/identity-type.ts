import { defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import { s } from '../schema/s.js';

const identityTypeFields = { name: { type: 'string', unique: true } } as const satisfies EntityFields;

/** Identity types: fixed rows `Default` and `Router` created at initialisation; read-only over the API. */
export const identityTypes: Entity<'identity-types', typeof identityTypeFields> = defineEntity({
  name: 'identity-types',
  type: 'identityType',
  tag: 'Identity',
  singular: 'IdentityType',
  plural: 'IdentityTypes',
  permission: 'identity',
  fields: identityTypeFields,
  detail: detailSchema('identityTypeDetail', s.obj({ name: s.str() })),
  toApi: (row) => ({ name: row.name }),
  reads: [],
  // any full session reads them (OpenZiti v2's identity_type_router.go: IsAuthenticated, no permission)
  operations: {
    list: { access: 'authenticated', permission: null },
    detail: { access: 'authenticated', permission: null },
    create: false,
    update: false,
    patch: false,
    delete: false,
  },
});
