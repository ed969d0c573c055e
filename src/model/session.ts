import { defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import type { Services } from '../api/services.js';
import { sessionEdgeRouters } from '../routers/session-routers.js';
import { s } from '../schema/s.js';
import { entityRef, ref } from './common.js';
import { commonEdgeRouterProperties } from './edge-router.js';
import { dialBind } from './policy.js';
import type { RowFor } from './rows.js';

export const sessionEdgeRouter = s.named(
  'sessionEdgeRouter',
  s.allOf(commonEdgeRouterProperties, s.obj({ urls: s.map(s.str()) }, ['urls'])),
);

export const sessionDetail = detailSchema(
  'sessionDetail',
  s.obj(
    {
      apiSession: entityRef,
      apiSessionId: s.str(),
      edgeRouters: s.arr(sessionEdgeRouter),
      identityId: s.str(),
      service: entityRef,
      serviceId: s.str(),
      token: s.str(),
      type: dialBind,
    },
    ['type', 'apiSessionId', 'apiSession', 'serviceId', 'service', 'token', 'edgeRouters', 'identityId'],
  ),
);

/**
 * What a session shows beyond its stored fields. `edgeRouters` lists the routers online on this controller that
 * the session's identity and service may use, with their listener URLs (src/routers/session-routers.ts).
 */
function renderSession(row: RowFor<'sessions'>, svc: Services): Record<string, unknown> {
  const service = svc.get('services', row.serviceId!);
  return {
    apiSession: ref('api-sessions', row.apiSessionId!, ''),
    edgeRouters: sessionEdgeRouters(svc, row.identityId!, row.serviceId!),
    service: ref('services', row.serviceId!, service?.name),
  };
}

const sessionFields = {
  // a bearer credential: never filterable
  token: { type: 'string', unique: true, filter: false, api: true },
  apiSessionId: { type: 'string', ref: { entity: 'api-sessions', onDelete: 'cascade' }, api: true },
  identityId: { type: 'string', ref: { entity: 'identities', onDelete: 'cascade' }, api: true },
  serviceId: { type: 'string', ref: { entity: 'services', onDelete: 'cascade' }, api: true },
  type: { type: 'string', index: true, api: true },
} as const satisfies EntityFields;

/**
 * A service session: an API session's permission to dial or bind one service (created on the client API only when
 * a service policy grants it and an edge router may carry it). It ends with its API session, its identity or its
 * service.
 */
export const sessions: Entity<'sessions', typeof sessionFields> = defineEntity({
  name: 'sessions',
  type: 'session',
  tag: 'Session',
  singular: 'Session',
  plural: 'Sessions',
  // as API sessions (OpenZiti files sessions with the operational data)
  permission: 'ops',
  fields: sessionFields,
  detail: sessionDetail,
  // shows this controller's router presence, which changes without a write
  cacheable: false,
  toApi: renderSession,
  // only admins see other callers' session tokens (the field stays, as the schema requires it, but empty)
  redact: (data) => ({ ...data, token: '' }),
  operations: { create: false, update: false, patch: false },
});
