import type { RoleIndex } from '../../storage/role-index.js';
import { listEnvelope } from '../model/common.js';
import { type Entity, requireRow } from './entity.js';
import { listQuery, listResponse, mapResult } from './list.js';
import { type Access, type ApiName, LIST_QUERY, type OpDef, op } from './op.js';
import type { Services } from './services.js';

/**
 * Where the ids of a relation come from:
 * - `ref`: a stored reference — the listed rows whose `ref` field holds the parent's id
 *   (`/identities/{id}/authenticators`: authenticators.identityId);
 * - `index`: a derived role index (storage/role-index.ts) — `targets` lists what a policy matches
 *   (`/service-policies/{id}/identities`), `policies` the policies matching an entity
 *   (`/identities/{id}/service-policies`).
 */
export type RelationSource = { ref: string } | { index: string; side: 'targets' | 'policies' };

/** An association list of an entity: `GET /<entity>/{id}/<path>`, served with the list's filter, sort and paging. */
export interface RelationSpec {
  /** Path segment after `/{id}/`, e.g. `authenticators`. */
  path: string;
  /** The listed entity type (a thunk: declarations may list each other; annotate it `(): Entity => x` then). */
  listed: () => Entity;
  via: RelationSource;
  /** OpenZiti's operation id, e.g. `getIdentityAuthenticators`. */
  operationId: string;
  summary?: string;
  apis?: ApiName[];
  access?: Access;
  /** Management permission entity (default: the parent's). */
  permission?: string;
}

/** The ids related to `parentId` through `via`. */
export function relatedIds(svc: Services, listed: string, via: RelationSource, parentId: string): ReadonlySet<string> {
  if ('ref' in via) return new Set(svc.store.lookup(listed, via.ref, parentId));
  const idx = svc.store.derived.get<RoleIndex>(via.index);
  return via.side === 'targets' ? idx.targetsOf(parentId) : idx.policiesOf(parentId);
}

/** The list operations of an entity's relations: 404 for an unknown parent, then the listed entity's list query. */
export function relationOps(parent: Entity): OpDef<unknown>[] {
  return (parent.relations ?? []).map((rel) => {
    const listed = rel.listed();
    return op({
      method: 'GET',
      path: `/${parent.name}/{id}/${rel.path}`,
      apis: rel.apis ?? ['management'],
      operationId: rel.operationId,
      tags: [parent.tag],
      summary: rel.summary ?? `List the ${listed.plural.toLowerCase()} of a ${parent.type}`,
      access: rel.access ?? 'admin',
      permission: rel.permission ?? parent.permission,
      query: LIST_QUERY,
      responses: {
        200: {
          description: `A list of ${listed.plural.toLowerCase()}`,
          schema: listEnvelope(`list${listed.plural}Envelope`, listed.detail),
        },
      },
      handler: (ctx) => {
        const parentId = requireRow(parent, ctx.svc, ctx.params.id!).id;
        const only = relatedIds(ctx.svc, listed.name, rel.via, parentId);
        return mapResult(listQuery(listed, ctx, only), (result) =>
          listResponse(result, (row) => listed.renderJsonFor(row, ctx.svc, ctx.caller), listed.symbolTable(ctx.svc)),
        );
      },
    });
  });
}
