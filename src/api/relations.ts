import type { RoleIndex } from '../../storage/role-index.js';
import type { Row } from '../../storage/types.js';
import { listEnvelope } from '../model/common.js';
import type { EntityName } from '../model/index.js';
import type { SchemaNode } from '../schema/s.js';
import { type Entity, requireRow } from './entity.js';
import { fieldError } from './errors.js';
import { listQuery, listResponse, mapResult } from './list.js';
import { type Access, type ApiName, LIST_QUERY, type OpContext, type OpDef, op } from './op.js';
import type { Services } from './services.js';

/**
 * Where the ids of a relation come from:
 * - `ref`: a stored reference — the listed rows whose `ref` field holds the parent's id
 *   (`/identities/{id}/authenticators`: authenticators.identityId);
 * - `field`: the ids the parent row holds in one of its fields (`/services/{id}/configs`: services.configs);
 * - `index`: a derived role index (storage/role-index.ts) — `targets` lists what a policy matches
 *   (`/service-policies/{id}/identities`), `policies` the policies matching an entity
 *   (`/identities/{id}/service-policies`);
 * - `through`: two role indexes of the same policies — the targets on the far side of the policies that match
 *   the parent (`/identities/{id}/services`: the services of the service policies matching the identity). With
 *   `policyType`, the query parameter `policyType=dial|bind` keeps the policies whose `type` is Dial / Bind.
 */
export type RelationSource =
  | { ref: string }
  | { field: string }
  | { index: string; side: 'targets' | 'policies' }
  | { through: { policies: string; targets: string }; policyType?: boolean };

/** An association list of an entity: `GET /<entity>/{id}/<path>`, served with the list's filter, sort and paging. */
export interface RelationSpec {
  /** Path segment after `/{id}/`, e.g. `authenticators`. */
  path: string;
  /** The listed entity type (a thunk: declarations may list each other; annotate it `(): Entity => x` then). */
  listed: () => Entity<string>;
  via: RelationSource;
  /** OpenZiti's operation id, e.g. `getIdentityAuthenticators`. */
  operationId: string;
  summary?: string;
  apis?: ApiName[];
  access?: Access;
  /**
   * Management permission entity, read action (default: the listed entity's, as OpenZiti's routers file an
   * association list under what it lists: `/services/{id}/identities` needs `identity.read`).
   */
  permission?: string;
  /** Refuses a caller the route lets in but who may not see this parent (throw an ApiError, e.g. 404). */
  guard?: (ctx: OpContext<unknown>, parent: Row) => void;
  /** A rendering of the listed rows other than their own (e.g. the client API's limited view). */
  view?: { envelope: string; detail: SchemaNode; render(row: Row, svc: Services): Record<string, unknown> };
}

/** The far-side targets of the policies matching `id` (policies kept by `keep`), through two role indexes. */
export function targetsThrough(
  svc: Services,
  through: { policies: string; targets: string },
  id: string,
  keep?: (policyId: string) => boolean,
): Set<string> {
  const near = svc.store.derived.get<RoleIndex>(through.policies);
  const far = svc.store.derived.get<RoleIndex>(through.targets);
  const out = new Set<string>();
  for (const p of near.policiesOf(id)) {
    if (keep && !keep(p)) continue;
    for (const t of far.targetsOf(p)) out.add(t);
  }
  return out;
}

const POLICY_TYPES: Record<string, string> = { dial: 'Dial', bind: 'Bind' };

/** The ids related to `parent` through `via` (`policyType`: the request's `policyType` parameter, if any). */
export function relatedIds(
  svc: Services,
  listed: EntityName,
  via: RelationSource,
  parent: Row,
  policyType?: string | null,
): ReadonlySet<string> {
  const parentId = parent.id;
  if ('ref' in via) return new Set(svc.store.lookup(listed, via.ref, parentId));
  if ('field' in via) return new Set((parent[via.field] as string[] | null | undefined) ?? []);
  if ('through' in via) {
    const type = via.policyType && policyType ? POLICY_TYPES[policyType.toLowerCase()] : undefined;
    if (via.policyType && policyType && !type) throw fieldError('policyType', 'must be dial or bind', policyType);
    const policies = svc.store.derived.get<RoleIndex<EntityName>>(via.through.policies).spec.policy.entity;
    const keep = type ? (p: string) => svc.store.get(policies, p)?.type === type : undefined;
    return targetsThrough(svc, via.through, parentId, keep);
  }
  const idx = svc.store.derived.get<RoleIndex>(via.index);
  return via.side === 'targets' ? idx.targetsOf(parentId) : idx.policiesOf(parentId);
}

/** The list operations of an entity's relations: 404 for an unknown parent, then the listed entity's list query. */
export function relationOps(parent: Entity): OpDef<unknown>[] {
  return (parent.relations ?? []).map((rel) => {
    // served by name, like the parent's own operations (api/entity.ts defineEntity)
    const listed = rel.listed() as Entity;
    return op({
      method: 'GET',
      path: `/${parent.name}/{id}/${rel.path}`,
      apis: rel.apis ?? ['management'],
      operationId: rel.operationId,
      tags: [parent.tag],
      summary: rel.summary ?? `List the ${listed.plural.toLowerCase()} of a ${parent.type}`,
      access: rel.access ?? 'admin',
      permission: rel.permission ?? listed.permission,
      query:
        'through' in rel.via && rel.via.policyType
          ? [...LIST_QUERY, { name: 'policyType', type: 'string', enum: ['dial', 'bind'] }]
          : LIST_QUERY,
      responses: {
        200: {
          description: `A list of ${listed.plural.toLowerCase()}`,
          schema: rel.view
            ? listEnvelope(rel.view.envelope, rel.view.detail)
            : listEnvelope(`list${listed.plural}Envelope`, listed.detail),
        },
      },
      handler: (ctx) => {
        const row = requireRow(parent, ctx.svc, ctx.params.id!);
        rel.guard?.(ctx, row);
        const view = rel.view;
        const render = view
          ? (r: Row) => JSON.stringify(view.render(r, ctx.svc))
          : (r: Row) => listed.renderJsonFor(r, ctx.svc, ctx.caller);
        const only = relatedIds(ctx.svc, listed.name, rel.via, row, ctx.req.query.get('policyType'));
        return mapResult(listQuery(listed, ctx, only), (result) =>
          listResponse(result, render, listed.symbolTable(ctx.svc)),
        );
      },
    });
  });
}
