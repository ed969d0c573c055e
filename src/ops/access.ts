import type { Row } from '../../storage/types.js';
import { requireRow } from '../api/entity.js';
import { notFound, unauthorized } from '../api/errors.js';
import { type ListResult, listQuery, listResponse, mapResult } from '../api/list.js';
import { LIST_QUERY, type OpContext, type OpDef, op } from '../api/op.js';
import { ok, okJson } from '../api/respond.js';
import type { Services } from '../api/services.js';
import {
  identityEdgeRouters,
  permissionsOf,
  type ServiceAccess,
  serviceAccessOf,
  serviceEdgeRouters,
} from '../model/access.js';
import { detailEnvelope, listEnvelope, meta } from '../model/common.js';
import {
  commonEdgeRouterProperties,
  currentIdentityEdgeRouterDetail,
  edgeRouters,
  isVerifiedRouter,
} from '../model/edge-router.js';
import { evaluateAccess, renderQuery } from '../model/posture.js';
import type { RowFor } from '../model/rows.js';
import { configMap, serviceDetail, services } from '../model/service.js';
import { lastServiceChangeMs } from '../model/service-updates.js';
import { s } from '../schema/s.js';
import { adviceOps } from './advice.js';
import { clientServiceWriteOps } from './client-service-writes.js';
import { roleAttributeOp } from './identity.js';
import { postureOps } from './posture.js';
import { postureCheckTypeOps } from './posture-check-types.js';
import { serviceConfigOps } from './service-configs.js';
import { sessionOps } from './sessions.js';

/**
 * A service as its caller sees it on the client API: `permissions` from the policies granting it, the `config` map
 * of the config types asked for (the `configTypes` query parameter, else those of the API session), and one
 * `postureQueries` entry per granting policy: its posture checks evaluated for the caller's API session
 * (src/model/posture.ts).
 */
function renderForCaller(ctx: OpContext<unknown>, row: RowFor<'services'>, access: ServiceAccess): string {
  const svc: Services = ctx.svc;
  const asked = ctx.req.query.getAll('configTypes');
  const types = asked.length > 0 ? asked : (ctx.caller!.session.configTypes ?? []);
  const postureQueries = evaluateAccess(svc, access, ctx.caller!.session).map((p) => ({
    isPassing: p.isPassing,
    policyId: p.policyId,
    policyType: p.policyType,
    postureQueries: p.checks.map((c) => renderQuery(c.check, c.result)),
  }));
  return JSON.stringify({
    ...services.render(row, svc),
    config: configMap(svc, row, types, ctx.caller!.identity.id),
    permissions: permissionsOf(access),
    postureQueries,
  });
}

/** An edge router as the client API shows it: its common properties (with the base fields for a list item). */
function routerForClient(svc: Services, row: RowFor<'edge-routers'>, withBase: boolean): Record<string, unknown> {
  const full = edgeRouters.render(row, svc);
  const out: Record<string, unknown> = {};
  const keys = [
    ...Object.keys(commonEdgeRouterProperties.properties ?? {}),
    ...(withBase ? ['_links', 'createdAt', 'id', 'tags', 'updatedAt'] : []),
  ];
  for (const k of keys) if (k in full) out[k] = full[k];
  return out;
}

/**
 * OpenZiti: `GET /services/{id}/edge-routers` takes an optional `session-token` header, a service access token that
 * must be valid for the caller's API session, else 401 UNAUTHORIZED. Keel's service access tokens are the tokens of
 * its sessions (`POST /sessions`): valid while that session lives, for the API session that created it.
 */
function checkSessionToken(ctx: OpContext<unknown>): void {
  const token = ctx.req.headers['session-token'];
  // go-openapi binds an empty optional header as absent
  if (token === undefined || token === '') return;
  const [id] = ctx.svc.store.lookup('sessions', 'token', token);
  const session = id === undefined ? undefined : ctx.svc.get('sessions', id);
  if (session?.apiSessionId !== ctx.caller!.session.id) throw unauthorized('forbidden');
}

function pageOf(result: ListResult) {
  return { limit: result.limit, offset: result.offset, totalCount: result.totalCount };
}

/** The client API's services: only those the caller may dial or bind (the policy engine, src/model/access.ts). */
export function accessOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'GET',
      path: '/services',
      apis: ['client'],
      operationId: 'listServices',
      tags: ['Service'],
      summary: 'List services',
      description: 'Retrieves the services the current identity may dial or bind.',
      access: 'authenticated',
      query: [
        ...LIST_QUERY,
        { name: 'configTypes', type: 'array' },
        { name: 'roleFilter', type: 'array' },
        { name: 'roleSemantic', type: 'string' },
      ],
      responses: {
        200: { description: 'A list of services', schema: listEnvelope('listServicesEnvelope', serviceDetail) },
      },
      handler: (ctx) => {
        const access = serviceAccessOf(ctx.svc, ctx.caller!.identity.id);
        return mapResult(listQuery(services, ctx, new Set(access.keys())), (result) =>
          listResponse(result, (row) => renderForCaller(ctx, row, access.get(row.id)!), services.symbolTable(ctx.svc)),
        );
      },
    }),
    op({
      method: 'GET',
      path: '/services/{id}',
      apis: ['client'],
      operationId: 'detailService',
      tags: ['Service'],
      summary: 'Retrieves a single service',
      access: 'authenticated',
      responses: {
        200: { description: 'A single service', schema: detailEnvelope('detailServiceEnvelope', serviceDetail) },
      },
      handler: (ctx) => {
        const row = requireRow(services, ctx.svc, ctx.params.id!);
        const access = serviceAccessOf(ctx.svc, ctx.caller!.identity.id, row.id).get(row.id);
        // a service the caller may not use does not exist for it
        if (!access) throw notFound('service', row.id);
        return okJson(renderForCaller(ctx, row, access));
      },
    }),
    op({
      method: 'GET',
      path: '/current-identity/edge-routers',
      apis: ['client'],
      operationId: 'getCurrentIdentityEdgeRouters',
      tags: ['Current Identity', 'Edge Router'],
      summary: 'Return this identities edge routers',
      description:
        'The verified (enrolled) edge routers the current identity may use: those its edge router policies allow ' +
        '(for an admin, every one).',
      access: 'authenticated',
      query: LIST_QUERY,
      responses: {
        200: {
          description: 'A list of edge routers',
          schema: listEnvelope('listCurrentIdentityEdgeRoutersEnvelope', currentIdentityEdgeRouterDetail),
        },
      },
      handler: (ctx) => {
        // OpenZiti's filter: `isVerified = true`, and for a non-admin its edge router policies' routers
        const identity = ctx.caller!.identity;
        const mine = identity.isAdmin === true ? undefined : identityEdgeRouters(ctx.svc, identity.id);
        const unverified = (row: Row) => !isVerifiedRouter(ctx.svc, row.id);
        return mapResult(listQuery(edgeRouters, ctx, mine, unverified), (result) =>
          listResponse(
            result,
            (row) => JSON.stringify(routerForClient(ctx.svc, row, true)),
            edgeRouters.symbolTable(ctx.svc),
          ),
        );
      },
    }),
    op({
      method: 'GET',
      path: '/services/{id}/edge-routers',
      apis: ['client'],
      operationId: 'listServiceEdgeRouters',
      tags: ['Service'],
      summary: 'List accessible edge-routers',
      description:
        'The edge routers through which the current identity may reach the service: those its edge router policies ' +
        'and the service edge router policies of the service both allow.',
      access: 'authenticated',
      query: LIST_QUERY,
      responses: {
        200: {
          description: 'A list of edge routers suitable for dialing or binding the specified service',
          schema: s.named(
            'listServiceEdgeRoutersEnvelope',
            s.obj(
              { data: s.named('serviceEdgeRouters', s.obj({ edgeRouters: s.arr(commonEdgeRouterProperties) })), meta },
              ['meta', 'data'],
            ),
          ),
        },
      },
      handler: (ctx) => {
        checkSessionToken(ctx);
        const service = requireRow(services, ctx.svc, ctx.params.id!);
        const identityId = ctx.caller!.identity.id;
        if (serviceAccessOf(ctx.svc, identityId, service.id).size === 0) throw notFound('service', service.id);
        const mine = identityEdgeRouters(ctx.svc, identityId);
        const usable = new Set([...serviceEdgeRouters(ctx.svc, service.id)].filter((id) => mine.has(id)));
        return mapResult(listQuery(edgeRouters, ctx, usable), (result) =>
          ok(
            { edgeRouters: result.rows.map((row) => routerForClient(ctx.svc, row, false)) },
            { pagination: pageOf(result) },
          ),
        );
      },
    }),
    op({
      method: 'GET',
      path: '/current-api-session/service-updates',
      apis: ['client'],
      operationId: 'listServiceUpdates',
      tags: ['Current API Session', 'Services'],
      summary: 'Returns data indicating whether a client should updates it service list',
      access: 'authenticated',
      responses: {
        200: {
          description: 'Data indicating necessary service updates',
          schema: s.named(
            'listCurrentApiSessionServiceUpdatesEnvelope',
            s.obj(
              {
                data: s.named(
                  'currentApiSessionServiceUpdateList',
                  s.obj({ lastChangeAt: s.datetime() }, ['lastChangeAt']),
                ),
                meta,
              },
              ['meta', 'data'],
            ),
          ),
        },
      },
      handler: (ctx) => {
        // OpenZiti: the session's creation time until a change that concerns it
        const sessionMs = Date.parse(ctx.caller!.session.createdAt);
        const lastMs = Math.max(sessionMs, lastServiceChangeMs(ctx.svc.store, ctx.svc.clock));
        return ok({ lastChangeAt: new Date(lastMs).toISOString() });
      },
    }),
    ...serviceConfigOps(),
    ...adviceOps(),
    ...sessionOps(),
    ...clientServiceWriteOps(),
    roleAttributeOp('/service-role-attributes', 'listServiceRoleAttributes', 'services', 'roleAttributes', 'service'),
    ...postureCheckTypeOps(),
    ...postureOps(),
    roleAttributeOp(
      '/posture-check-role-attributes',
      'listPostureCheckRoleAttributes',
      'posture-checks',
      'roleAttributes',
      'posture-check',
    ),
    roleAttributeOp(
      '/edge-router-role-attributes',
      'listEdgeRouterRoleAttributes',
      'edge-routers',
      'roleAttributes',
      'router',
    ),
  ];
}
