import type { Row } from '../../storage/types.js';
import { type Entity, requireRow } from '../api/entity.js';
import { type OpDef, op } from '../api/op.js';
import { hasAdminAccess } from '../api/register.js';
import { ok } from '../api/respond.js';
import { identityEdgeRouters, serviceAccessOf, serviceEdgeRouters } from '../model/access.js';
import { entityRef, meta, ref } from '../model/common.js';
import { identities } from '../model/identity.js';
import { ENTITIES } from '../model/index.js';
import { services } from '../model/service.js';
import { routerPresenceOf } from '../routers/presence.js';
import { s } from '../schema/s.js';

const routerEntityRef = s.named('routerEntityRef', s.allOf(entityRef, s.obj({ isOnline: s.bool() }, ['isOnline'])));
const policyAdvice = s.named(
  'policyAdvice',
  s.obj({
    commonRouters: s.arr(routerEntityRef),
    identity: entityRef,
    identityId: s.str(),
    identityRouterCount: s.num({ format: 'int32' }),
    isBindAllowed: s.bool(),
    isDialAllowed: s.bool(),
    service: entityRef,
    serviceId: s.str(),
    serviceRouterCount: s.num({ format: 'int32' }),
  }),
);

const camel = (name: string) => name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

/** The rows of a collection scan that `hidden` does not hide (one pass, bounded by the collection's size). */
function countVisible(rows: Iterable<Row>, hidden: (row: Row) => boolean): number {
  let n = 0;
  for (const row of rows) if (!hidden(row)) n++;
  return n;
}

/** Policy advice (from the policy engine) and the entity counts of `/summary`. */
export function adviceOps(): OpDef<unknown>[] {
  // the list operation of each listed entity type: `/summary` counts what the caller may list
  const listed = ENTITIES.map((e) => ({
    key: camel(e.name),
    name: e.name,
    hiddenFrom: (e as { hiddenFrom?: Entity['hiddenFrom'] }).hiddenFrom,
    list: e.ops().find((o) => o.method === 'GET' && o.path === `/${e.name}` && o.apis.includes('management')),
  })).filter((x) => x.list !== undefined);
  return [
    op({
      method: 'GET',
      path: '/identities/{id}/policy-advice/{serviceId}',
      apis: ['management'],
      operationId: 'getIdentityPolicyAdvice',
      tags: ['Identity'],
      summary: 'Analyze policies relating the given identity and service',
      description:
        'Whether the identity may dial or bind the service, and the edge routers both its edge router policies and ' +
        "the service's service edge router policies allow.",
      access: 'admin',
      // OpenZiti files the advice under the service it is about (identity_router.go)
      permission: 'service',
      responses: {
        200: {
          description: 'Returns the document that represents the policy advice',
          schema: s.named('getIdentityPolicyAdviceEnvelope', s.obj({ data: policyAdvice, meta }, ['meta', 'data'])),
        },
      },
      handler: ({ svc, params }) => {
        const identity = requireRow(identities, svc, params.id!);
        const service = requireRow(services, svc, params.serviceId!);
        const access = serviceAccessOf(svc, identity.id, service.id).get(service.id);
        const identityRouters = identityEdgeRouters(svc, identity.id);
        const serviceRouters = serviceEdgeRouters(svc, service.id);
        const common = [...identityRouters].filter((id) => serviceRouters.has(id)).sort();
        return ok({
          commonRouters: common.map((id) => ({
            ...ref('edge-routers', id, svc.get('edge-routers', id)?.name),
            isOnline: routerPresenceOf(svc).isOnline(id),
          })),
          identity: ref('identities', identity.id, identity.name!),
          identityId: identity.id,
          identityRouterCount: identityRouters.size,
          isBindAllowed: (access?.bind.length ?? 0) > 0,
          isDialAllowed: (access?.dial.length ?? 0) > 0,
          service: ref('services', service.id, service.name!),
          serviceId: service.id,
          serviceRouterCount: serviceRouters.size,
        });
      },
    }),
    op({
      method: 'GET',
      path: '/summary',
      apis: ['management'],
      operationId: 'listSummary',
      tags: ['Informational'],
      summary: 'Returns a list of accessible resource counts',
      description: 'The number of entities of each type the caller may list.',
      access: 'authenticated',
      responses: {
        200: {
          description: "Entity counts scopped to the current identitie's access",
          schema: s.named(
            'listSummaryCountsEnvelope',
            s.obj({ data: s.named('listSummaryCounts', s.map(s.int())), meta }, ['meta', 'data']),
          ),
        },
      },
      handler: ({ svc, caller }) => {
        const counts: Record<string, number> = {};
        for (const { key, name, list, hiddenFrom } of listed) {
          if (!hasAdminAccess(caller!.identity, list!)) continue;
          // rows hidden from the caller are out of its lists' totalCount, so out of its count here too
          const hidden = hiddenFrom?.(caller, svc);
          counts[key] = hidden
            ? countVisible(svc.store.collection(name).scan(), hidden)
            : svc.store.collection(name).size;
        }
        return ok(counts);
      },
    }),
  ];
}
