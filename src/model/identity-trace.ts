/**
 * Identity tracing (`PUT /identities/{id}/trace`, docs/operations.md): the trace an admin turned on for an identity
 * until a time. OpenZiti's routers tag the circuits of a traced identity and report their path setup; Keel records
 * the setting, replicated like any row, and has no data plane to trace yet. No CRUD operations: the row is written by
 * the trace operation and goes with its identity.
 */
import { defineEntity, type Entity, type EntityFields } from '../api/entity.js';
import { s } from '../schema/s.js';

const identityTraceFields = {
  identityId: { type: 'string', unique: true, ref: { entity: 'identities', onDelete: 'cascade' } },
  traceId: { type: 'string', filter: false },
  until: { type: 'datetime' },
  channels: { type: 'string', set: true, filter: false },
} as const satisfies EntityFields;

export const identityTraces: Entity<'identity-traces', typeof identityTraceFields> = defineEntity({
  name: 'identity-traces',
  type: 'identityTrace',
  tag: 'Tracing',
  singular: 'IdentityTrace',
  plural: 'IdentityTraces',
  fields: identityTraceFields,
  detail: s.obj({}),
  operations: { list: false, detail: false, create: false, update: false, patch: false, delete: false },
});
