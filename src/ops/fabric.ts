/**
 * The read operations of OpenZiti's fabric API (`/fabric/v1`) that Keel can answer truthfully, for the clients that
 * ask them (ZAC's network map, `ziti fabric list routers|links|circuits`): its routers, in the fabric's shape
 * (`connected`, `listenerAddresses`, `versionInfo` from this controller's view of their control connections), and
 * links and circuits, of which Keel has none (no data plane yet): empty lists, and 404 for any id. Admins only, as
 * OpenZiti's. Writes are not served here (405): routers are created and changed through the management API.
 */
import type { Row } from '../../storage/types.js';
import { requireVisibleRow } from '../api/entity.js';
import { notFound } from '../api/errors.js';
import { listQuery, listResponse, mapResult } from '../api/list.js';
import { LIST_QUERY, type OpDef, op } from '../api/op.js';
import { listEnvelope, okJson } from '../api/respond.js';
import type { Services } from '../api/services.js';
import { baseEntity, detailEnvelope, listEnvelope as listEnvelopeSchema } from '../model/common.js';
import { routerCost, transitRouters } from '../model/transit-router.js';
import { routerPresenceOf } from '../routers/presence.js';
import { s } from '../schema/s.js';

/** `versionInfo` of the fabric's routerDetail. */
const versionInfo = s.obj({ version: s.str(), revision: s.str(), buildDate: s.str(), os: s.str(), arch: s.str() }, []);

/** The fabric API's routerDetail (not the management API's: `connected`, not `isOnline`; no enrollment fields). */
const fabricRouterDetail = s.named(
  'fabricRouterDetail',
  s.allOf(
    baseEntity,
    s.obj(
      {
        name: s.str(),
        fingerprint: s.str(),
        connected: s.bool(),
        cost: routerCost,
        noTraversal: s.bool(),
        disabled: s.bool(),
        listenerAddresses: s.arr(s.obj({ address: s.str(), protocol: s.str() }, ['address', 'protocol'])),
        versionInfo,
        ctrlChanListeners: s.map(s.arr(s.str())),
        configs: s.arr(s.str()),
      },
      ['name', 'fingerprint', 'connected', 'cost', 'noTraversal', 'disabled'],
    ),
  ),
);

/** A router as the fabric API shows it: its row, and whether (and how) it is connected to this controller. */
export function fabricRouter(row: Row, svc: Services): Record<string, unknown> {
  const state = routerPresenceOf(svc).state(row.id);
  return {
    _links: { self: { href: `./routers/${row.id}` } },
    createdAt: row.createdAt,
    id: row.id,
    tags: row.tags ?? {},
    updatedAt: row.updatedAt,
    name: row.name,
    fingerprint: row.fingerprint ?? '',
    connected: state.isOnline,
    cost: row.cost ?? 0,
    noTraversal: row.noTraversal ?? false,
    disabled: row.disabled ?? false,
    listenerAddresses: Object.entries(state.supportedProtocols).map(([protocol, address]) => ({ address, protocol })),
    ...(state.versionInfo ? { versionInfo: state.versionInfo } : {}),
    ctrlChanListeners: row.ctrlChanListeners ?? {},
    configs: row.configs ?? [],
  };
}

/** `links` → `Links`. */
const cap = (word: string) => `${word[0]!.toUpperCase()}${word.slice(1)}`;

/** An empty fabric list (links, circuits): OpenZiti's envelope with its pagination. */
function emptyList(name: string) {
  return op({
    apis: [],
    method: 'GET',
    path: `/${name}`,
    operationId: `list${cap(name)}`,
    tags: ['Fabric'],
    summary: `List ${name} (none: Keel has no data plane)`,
    access: 'admin',
    query: LIST_QUERY,
    responses: {
      200: { description: `No ${name}`, schema: listEnvelopeSchema(`list${cap(name)}Envelope`, s.obj({})) },
    },
    handler: () => listEnvelope([], { limit: 10, offset: 0, totalCount: 0 }, []),
  });
}

/** None of them exists: 404, worded as OpenZiti does. */
function noneById(name: string, type: string) {
  return op({
    apis: [],
    method: 'GET',
    path: `/${name}/{id}`,
    operationId: `detail${cap(type)}`,
    tags: ['Fabric'],
    summary: `Retrieves a single ${type} (none: Keel has no data plane)`,
    access: 'admin',
    responses: { 200: { description: `A ${type}`, schema: detailEnvelope(`detail${cap(type)}Envelope`, s.obj({})) } },
    handler: ({ params }) => {
      throw notFound(type, params.id!);
    },
  });
}

/** OpenZiti's fabric read operations Keel serves, under FABRIC_BASE (not part of the edge OpenAPI documents). */
export function fabricOps(): OpDef<unknown>[] {
  const base = { apis: [], tags: ['Router'], access: 'admin' as const };
  return [
    op({
      ...base,
      method: 'GET',
      path: '/routers',
      operationId: 'listRouters',
      summary: 'List routers',
      query: LIST_QUERY,
      responses: {
        200: {
          description: 'A list of routers',
          schema: listEnvelopeSchema('listRoutersEnvelope', fabricRouterDetail),
        },
      },
      handler: (ctx) =>
        mapResult(listQuery(transitRouters, ctx), (result) =>
          listResponse(
            result,
            (row) => JSON.stringify(fabricRouter(row, ctx.svc)),
            transitRouters.symbolTable(ctx.svc),
          ),
        ),
    }),
    op({
      ...base,
      method: 'GET',
      path: '/routers/{id}',
      operationId: 'detailRouter',
      summary: 'Retrieves a single router',
      responses: {
        200: { description: 'A single router', schema: detailEnvelope('detailRouterEnvelope', fabricRouterDetail) },
      },
      handler: (ctx) =>
        okJson(
          JSON.stringify(fabricRouter(requireVisibleRow(transitRouters, ctx.svc, ctx.caller, ctx.params.id!), ctx.svc)),
        ),
    }),
    emptyList('links'),
    noneById('links', 'link'),
    emptyList('circuits'),
    noneById('circuits', 'circuit'),
  ];
}
