import { dataEnvelope } from '../../http/errors.js';
import { Errors, fieldError, notFound } from '../api/errors.js';
import { listQuery, listResponse, mapResult } from '../api/list.js';
import { LIST_QUERY, type OpContext, type OpDef, op } from '../api/op.js';
import { ok, okEmpty, okJson } from '../api/respond.js';
import type { Services } from '../api/services.js';
import { identityEdgeRouters, type ServiceAccess, serviceAccessOf, serviceEdgeRouters } from '../model/access.js';
import { detailEnvelope, empty, listEnvelope, meta, tags } from '../model/common.js';
import { dialBind } from '../model/policy.js';
import { evaluateAccess, postureCacheOf } from '../model/posture.js';
import type { RowFor } from '../model/rows.js';
import { sessionDetail, sessions } from '../model/session.js';
import { s } from '../schema/s.js';
import { shortId, uuid } from '../util/ids.js';

const sessionCreate = s.named('sessionCreate', s.obj({ serviceId: s.str(), tags, type: dialBind }));
type SessionCreate = { serviceId?: string; tags?: Record<string, unknown> | null; type?: string };

/** The caller's own session, or 404 (another identity's session does not exist for it). */
function ownSession(ctx: OpContext<unknown>): RowFor<'sessions'> {
  const row = ctx.svc.get('sessions', ctx.params.id!);
  if (!row || row.identityId !== ctx.caller!.identity.id) throw notFound('session', ctx.params.id!);
  return row;
}

/**
 * OpenZiti: a session needs one granting policy of its type whose posture checks all pass; otherwise 409
 * INVALID_POSTURE, recorded (with every policy's failing checks) as a failed service request of the identity.
 */
function checkPosture(ctx: OpContext<unknown>, serviceId: string, type: 'Dial' | 'Bind', access: ServiceAccess): void {
  const granting = { dial: type === 'Dial' ? access.dial : [], bind: type === 'Bind' ? access.bind : [] };
  const policies = evaluateAccess(ctx.svc, granting, ctx.caller!.session);
  if (policies.some((p) => p.isPassing)) return;
  postureCacheOf(ctx.svc).recordFailure(ctx.caller!.identity.id, {
    apiSessionId: ctx.caller!.session.id,
    serviceId,
    serviceName: ctx.svc.get('services', serviceId)?.name ?? '',
    sessionType: type,
    when: ctx.svc.nowIso(),
    policyFailures: policies.map((p) => ({
      policyId: p.policyId,
      policyName: (ctx.svc.get('service-policies', p.policyId)?.name as string | undefined) ?? '',
      checks: p.checks
        .filter((c) => !c.result.isPassing)
        .map((c) => ({
          postureCheckId: c.check.id,
          postureCheckName: c.check.name!,
          postureCheckType: c.check.typeId!,
        })),
    })),
  });
  throw Errors.INVALID_POSTURE();
}

/**
 * Per node, the session creates being written, by API session, service and type: at most one per key, so bounded by
 * the writes in flight.
 */
const CREATING = new WeakMap<Services, Map<string, Promise<string>>>();

function creatingOf(svc: Services): Map<string, Promise<string>> {
  let m = CREATING.get(svc);
  if (m === undefined) CREATING.set(svc, (m = new Map()));
  return m;
}

/** The session of `type` for `serviceId` that API session `apiSessionId` holds, if any (its sessions are few). */
function sessionOf(
  svc: Services,
  apiSessionId: string,
  serviceId: string,
  type: string,
): RowFor<'sessions'> | undefined {
  for (const id of svc.store.lookup('sessions', 'apiSessionId', apiSessionId)) {
    const row = svc.get('sessions', id);
    if (row?.serviceId === serviceId && row.type === type) return row;
  }
  return undefined;
}

/**
 * The client's sessions: create (Dial/Bind) only when a service policy of that type grants the service to the
 * caller and at least one edge router is allowed by both the caller's edge router policies and the service's
 * service edge router policies; list, detail and delete the caller's own sessions.
 */
export function sessionOps(): OpDef<unknown>[] {
  const base = { apis: ['client'] as const, tags: ['Session'], access: 'authenticated' as const };
  return [
    op<SessionCreate>({
      ...base,
      method: 'POST',
      path: '/sessions',
      operationId: 'createSession',
      summary: 'Create a session',
      description: 'Creates a session for a service the caller may dial or bind.',
      body: sessionCreate,
      bodyName: 'session',
      responses: {
        201: {
          description: 'Create session response',
          schema: s.named('sessionCreateEnvelope', s.obj({ data: sessionDetail, meta })),
        },
      },
      handler: async (ctx) => {
        const serviceId = ctx.body.serviceId;
        if (!serviceId) throw fieldError('serviceId', 'serviceId is required', serviceId ?? null);
        const type = ctx.body.type ?? 'Dial';
        if (type !== 'Dial' && type !== 'Bind') throw fieldError('type', 'must be Dial or Bind', type);
        const identityId = ctx.caller!.identity.id;
        // a service the caller may neither dial nor bind does not exist for it (404, as OpenZiti's read of the service
        // for the identity); one it may use only the other way is "service not found" on the field (OpenZiti's
        // session manager: a field error, 400 COULD_NOT_VALIDATE)
        const access = serviceAccessOf(ctx.svc, identityId, serviceId).get(serviceId);
        if (!access) throw notFound('service', serviceId);
        if (access[type === 'Dial' ? 'dial' : 'bind'].length === 0) {
          throw fieldError('ServiceId', 'service not found', serviceId);
        }
        checkPosture(ctx, serviceId, type, access);
        const mine = identityEdgeRouters(ctx.svc, identityId);
        if (![...serviceEdgeRouters(ctx.svc, serviceId)].some((id) => mine.has(id))) {
          throw Errors.NO_EDGE_ROUTERS_AVAILABLE();
        }
        // the API session's session of that type for the service, if it has one: OpenZiti answers with it rather
        // than a second one (a client asking again, after a lost answer say, gets the same token). Looked up once
        // the checks passed (OpenZiti looks first): a session is never handed out on a posture that fails now.
        const apiSessionId = ctx.caller!.session.id;
        const existing = sessionOf(ctx.svc, apiSessionId, serviceId, type);
        if (existing !== undefined) return dataEnvelope(sessions.render(existing, ctx.svc), {}, 201);
        // the same request already being written on this node (a client asking again before its answer): that one's
        // session, not a second (two members racing may still make two; OpenZiti decides inside its transaction)
        const creating = creatingOf(ctx.svc);
        const key = `${apiSessionId}\n${serviceId}\n${type}`;
        let write = creating.get(key);
        if (write === undefined) {
          const id = shortId();
          const data = { token: uuid(), apiSessionId, identityId, serviceId, type, tags: ctx.body.tags ?? {} };
          write = ctx.svc
            .write({ op: 'create', entity: 'sessions', id, data, at: ctx.svc.nowIso() })
            .then(() => id)
            .finally(() => creating.delete(key));
          creating.set(key, write);
        }
        const id = await write;
        const row = ctx.svc.get('sessions', id);
        // ended at once (its API session, identity or service deleted meanwhile)
        if (!row) throw notFound('session', id);
        return dataEnvelope(sessions.render(row, ctx.svc), {}, 201);
      },
    }),
    op({
      ...base,
      method: 'GET',
      path: '/sessions',
      operationId: 'listSessions',
      summary: 'List sessions',
      description: "The caller's sessions.",
      query: LIST_QUERY,
      responses: {
        200: { description: 'A list of sessions', schema: listEnvelope('listSessionsEnvelope', sessionDetail) },
      },
      handler: (ctx) => {
        const mine = new Set(ctx.svc.store.lookup('sessions', 'identityId', ctx.caller!.identity.id));
        return mapResult(listQuery(sessions, ctx, mine), (result) =>
          listResponse(result, (row) => sessions.renderJson(row, ctx.svc), sessions.symbolTable(ctx.svc)),
        );
      },
    }),
    op({
      ...base,
      method: 'GET',
      path: '/sessions/{id}',
      operationId: 'detailSession',
      summary: 'Retrieves a single session',
      responses: {
        200: { description: 'A single session', schema: detailEnvelope('detailSessionEnvelope', sessionDetail) },
      },
      handler: (ctx) => okJson(sessions.renderJson(ownSession(ctx), ctx.svc)),
    }),
    routePathOp(),
    op({
      ...base,
      method: 'DELETE',
      path: '/sessions/{id}',
      operationId: 'deleteSession',
      summary: 'Delete a session',
      responses: {
        200: { description: 'The delete request was successful and the resource has been removed', schema: empty },
      },
      handler: async (ctx) => {
        const row = ownSession(ctx);
        await ctx.svc.write({ op: 'delete', entity: 'sessions', id: row.id, at: ctx.svc.nowIso(), ifExists: true });
        return okEmpty();
      },
    }),
  ];
}

/**
 * `GET /sessions/{id}/route-path` (management): the routers of the session's circuit, in order. OpenZiti answers
 * from its live circuits and `[]` for a session without one; no router carries circuits yet, so every session has
 * none. An unknown session is 404 (as the spec declares; OpenZiti answers `[]` for any id), which is why the route
 * needs what reading sessions needs (admin, `ops` or `ops.read`, admin_readonly) where OpenZiti asks only for a
 * session.
 */
function routePathOp(): OpDef<unknown> {
  return op({
    method: 'GET',
    path: '/sessions/{id}/route-path',
    apis: ['management'],
    operationId: 'detailSessionRoutePath',
    tags: ['Session'],
    summary: "Retrieves a single session's route path",
    access: 'admin',
    permission: sessions.permission,
    responses: {
      200: {
        description: "A single session's route path",
        schema: detailEnvelope(
          'detailSessionRoutePathEnvelope',
          s.named('sessionRoutePathDetail', s.obj({ routePath: s.arr(s.str()) })),
        ),
      },
    },
    handler: (ctx) => {
      const row = ctx.svc.get('sessions', ctx.params.id!);
      if (!row) throw notFound('session', ctx.params.id!);
      return ok({ routePath: [] });
    },
  });
}
