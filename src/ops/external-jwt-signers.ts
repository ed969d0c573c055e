import { listQuery, listResponse, mapResult } from '../api/list.js';
import { LIST_QUERY, type OpDef, op } from '../api/op.js';
import type { Services } from '../api/services.js';
import { baseEntity, listEnvelope } from '../model/common.js';
import { externalJwtSigners } from '../model/external-jwt-signer.js';
import type { RowFor } from '../model/rows.js';
import { s } from '../schema/s.js';

/** What a client may know of a signer before it logs in (client.yml `clientExternalJwtSignerDetail`). */
const clientSignerDetail = s.named(
  'clientExternalJwtSignerDetail',
  s.allOf(
    baseEntity,
    s.obj(
      {
        audience: s.nullable(s.str()),
        clientId: s.nullable(s.str()),
        // null when the signer has none, as OpenZiti sends it (the spec declares a string, yet lets a signer have none)
        externalAuthUrl: s.nullable(s.str()),
        name: s.str(),
        scopes: s.arr(s.str()),
        targetToken: s.named('targetToken', s.nullable(s.enum(['ACCESS', 'ID']))),
      },
      ['name', 'externalAuthUrl'],
    ),
  ),
);

function renderForClient(row: RowFor<'external-jwt-signers'>): string {
  return JSON.stringify({
    _links: { self: { href: `./external-jwt-signers/${row.id}` } },
    createdAt: row.createdAt,
    id: row.id,
    tags: row.tags ?? {},
    updatedAt: row.updatedAt,
    audience: row.audience ?? null,
    clientId: row.clientId ?? null,
    externalAuthUrl: row.externalAuthUrl ?? null,
    name: row.name,
    scopes: row.scopes ?? [],
    targetToken: row.targetToken ?? 'ACCESS',
  });
}

/** The enabled signers (their count is the number of signers an operator created; the store bounds writes). */
function enabledIds(svc: Services): ReadonlySet<string> {
  return new Set(svc.store.lookup(externalJwtSigners.name, 'enabled', true));
}

export function externalJwtSignerOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'GET',
      path: '/external-jwt-signers',
      apis: ['client'],
      operationId: 'listExternalJwtSigners',
      tags: ['External JWT Signer'],
      summary: 'List Client Authentication External JWT',
      description: 'Retrieves a list of external JWT signers for authentication',
      access: 'none',
      query: LIST_QUERY,
      responses: {
        200: {
          description: 'A list of External JWT Signers',
          schema: listEnvelope('listClientExternalJwtSignersEnvelope', clientSignerDetail),
        },
      },
      handler: (ctx) =>
        mapResult(listQuery(externalJwtSigners, ctx, enabledIds(ctx.svc)), (result) =>
          listResponse(result, renderForClient, externalJwtSigners.symbolTable(ctx.svc)),
        ),
    }),
  ];
}
