import type { Row } from '../../storage/types.js';
import { requireRow } from '../api/entity.js';
import { notFound } from '../api/errors.js';
import { listQuery, listResponse } from '../api/list.js';
import { LIST_QUERY, type OpContext, type OpDef, op } from '../api/op.js';
import { okJson } from '../api/respond.js';
import type { Services } from '../api/services.js';
import { permissionsOf, type ServiceAccess, serviceAccessOf } from '../model/access.js';
import { detailEnvelope, listEnvelope } from '../model/common.js';
import { configMap, serviceDetail, services } from '../model/service.js';
import { roleAttributeOp } from './identity.js';

/**
 * A service as its caller sees it on the client API: `permissions` from the policies granting it, the `config` map
 * of the config types asked for (the `configTypes` query parameter, else those of the API session), and one
 * `postureQueries` entry per granting policy (posture checks are not served yet: each passes with no query).
 */
function renderForCaller(ctx: OpContext<unknown>, row: Row, access: ServiceAccess): string {
  const svc: Services = ctx.svc;
  const asked = ctx.req.query.getAll('configTypes');
  const types = asked.length > 0 ? asked : ((ctx.caller!.session.configTypes as string[] | undefined) ?? []);
  const postureQueries = [
    ...access.dial.map((policyId) => ({ isPassing: true, policyId, policyType: 'Dial', postureQueries: [] })),
    ...access.bind.map((policyId) => ({ isPassing: true, policyId, policyType: 'Bind', postureQueries: [] })),
  ];
  return JSON.stringify({
    ...services.render(row, svc),
    config: configMap(svc, row, types),
    permissions: permissionsOf(access),
    postureQueries,
  });
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
        const result = listQuery(services, ctx, new Set(access.keys()));
        return listResponse(
          result,
          (row) => renderForCaller(ctx, row, access.get(row.id)!),
          services.symbolTable(ctx.svc),
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
    roleAttributeOp('/service-role-attributes', 'listServiceRoleAttributes', 'services', 'roleAttributes', 'service'),
    roleAttributeOp(
      '/edge-router-role-attributes',
      'listEdgeRouterRoleAttributes',
      'edge-routers',
      'roleAttributes',
      'router',
    ),
  ];
}
