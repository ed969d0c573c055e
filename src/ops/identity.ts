import type { Row } from '../../storage/types.js';
import { createSymbolTable } from '../../storage/zitiql/index.js';
import { filterableFields, mapResult, runQuery } from '../api/list.js';
import { type ApiName, LIST_QUERY, type OpDef, op } from '../api/op.js';
import { listEnvelope as listEnvelopeResponse, okJson } from '../api/respond.js';
import { detailEnvelope, meta } from '../model/common.js';
import { identities, identityDetail } from '../model/identity.js';
import type { EntityName } from '../model/index.js';
import { s } from '../schema/s.js';
import { identityStatusOps } from './identity-status.js';

const BOTH: ApiName[] = ['client', 'management'];
/** `limit=-1`: no limit of its own (the list row cap still applies). */
const NO_LIMIT = -1;

/**
 * Distinct role attributes in use by an entity type, as a ZitiQL-filterable list of strings. Like OpenZiti's
 * role-attribute routes (`QueryRoleAttributes(queryOptions.Predicate)`), only `filter` is read: `sort`, `limit`
 * and `offset` query parameters are ignored (the console sends `sort=name asc`), the filter's own `sort by`,
 * `skip` and `limit` apply, and without a `limit` in the filter every attribute is listed (up to LIST_ROW_CAP).
 */
export function roleAttributeOp(
  path: string,
  operationId: string,
  entity: EntityName,
  field: string,
  permission: string,
): OpDef<unknown> {
  const symbols = createSymbolTable({ symbols: { id: { type: 'string', set: false, get: (r: Row) => r.id } } });
  return op({
    method: 'GET',
    path,
    apis: ['management'],
    operationId,
    tags: ['Role Attributes'],
    summary: `List role attributes in use by ${entity}`,
    access: 'admin',
    permission,
    query: LIST_QUERY,
    responses: {
      200: {
        description: 'A list of role attributes',
        schema: s.named(
          'listRoleAttributesEnvelope',
          s.obj({ data: s.named('roleAttributesList', s.arr(s.str())), meta }, ['meta', 'data']),
        ),
      },
    },
    handler: ({ req, svc }) => {
      // Attributes become rows {id: attribute}; the list machinery then filters (`id contains "x"`), sorts and pages.
      const values = [...svc.store.collection(entity).values(field)].map(String).sort();
      const rows = new Map(values.map((v) => [v, { id: v } as Row]));
      const source = {
        size: rows.size,
        scan: () => rows.values(),
        get: (id: string) => rows.get(id),
        idOf: (r: Row) => r.id,
        lookup: (name: string, value: unknown) =>
          name === 'id' ? (rows.has(value as string) ? [value as string] : []) : undefined,
      };
      const params = { filter: req.query.get('filter') ?? undefined, limit: String(NO_LIMIT) };
      return mapResult(runQuery(params, symbols, source), (result) =>
        listEnvelopeResponse(
          result.rows.map((r) => JSON.stringify(r.id)),
          { limit: result.limit, offset: result.offset, totalCount: result.totalCount },
          filterableFields(symbols),
        ),
      );
    },
  });
}

export function identityOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'GET',
      path: '/current-identity',
      apis: BOTH,
      operationId: 'getCurrentIdentity',
      tags: ['Current Identity'],
      summary: 'Return the current identity',
      access: 'authenticated',
      responses: {
        200: {
          description: 'The identity associated with the API Session used to issue the request',
          schema: detailEnvelope('currentIdentityDetailEnvelope', identityDetail),
        },
      },
      // the identity's own representation (OpenZiti maps it with the identity link factory), cached like any read
      handler: ({ caller, svc }) => okJson(identities.renderJson(caller!.identity, svc)),
    }),
    roleAttributeOp(
      '/identity-role-attributes',
      'listIdentityRoleAttributes',
      'identities',
      'roleAttributes',
      'identity',
    ),
    ...identityStatusOps(),
  ];
}
