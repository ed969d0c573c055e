import type { Row } from '../../storage/types.js';
import {
  bodyFieldsOf,
  checkRoleAttributes,
  defineEntity,
  detailSchema,
  type Entity,
  type EntityFields,
} from '../api/entity.js';
import type { Services } from '../api/services.js';
import { routerPresenceOf } from '../routers/presence.js';
import { s } from '../schema/s.js';
import { attributes, tags } from './common.js';
import { edgeRouterPolicies } from './edge-router-policy.js';
import { identities } from './identity.js';
import { relationsThrough } from './policy.js';
import {
  ROUTER_ENROLL_METHOD,
  redactRouterEnrollment,
  routerEnrollmentCommand,
  routerEnrollmentView,
} from './router-enrollment.js';
import type { ApplyContext, Command, RowFor } from './rows.js';
import { services } from './service.js';
import { serviceEdgeRouterPolicies } from './service-edge-router-policy.js';

const cost = s.int({ minimum: 0, maximum: 65535 });

/** An edge router's stored fields (the control channel comes with the routers' stage). */
const edgeRouterFields = {
  name: { type: 'string', unique: true, nonEmpty: true, body: s.str(), api: true },
  roleAttributes: { type: 'string', set: true, index: true, body: attributes, api: true, default: [] },
  cost: { type: 'number', body: s.nullable(cost), api: true, default: 0 },
  noTraversal: { type: 'bool', body: s.nullable(s.bool()), api: true, default: false },
  disabled: { type: 'bool', body: s.nullable(s.bool()), api: true, default: false },
  isTunnelerEnabled: { type: 'bool', body: s.bool(), api: true, default: false },
  appData: { type: 'map', body: tags, api: true, default: {} },
} as const satisfies EntityFields;

const writable = bodyFieldsOf(edgeRouterFields);

/**
 * Whether the edge router `id` is verified: enrolled (what enrollment yields is on the router row of the same id,
 * src/model/transit-router.ts). OpenZiti's `isVerified` symbol of its edge routers.
 */
export function isVerifiedRouter(svc: Services, id: string): boolean {
  return svc.get('transit-routers', id)?.isVerified === true;
}

/**
 * What `isTunnelerEnabled` brings (OpenZiti's edge_router_store): a Router identity with the router's id and name,
 * and the system edge router policy `edge-router-<id>-system` giving that identity this router.
 */
function tunnelerOn(id: string, name: unknown, at: string): Command[] {
  return [
    { op: 'create', entity: 'identities', id, data: routerIdentityData(name), at },
    { op: 'create', entity: 'edge-router-policies', id, data: systemPolicyData(id), at, system: true },
  ];
}

/** The Router identity of a tunneling edge router (its id is the router's). */
function routerIdentityData(name: unknown): Record<string, unknown> {
  return {
    name,
    typeId: 'Router',
    authPolicyId: 'default',
    isAdmin: false,
    isDefaultAdmin: false,
    roleAttributes: [],
  };
}

/** The system edge router policy giving a tunneling router's identity that router (its id is the router's). */
function systemPolicyData(id: string): Record<string, unknown> {
  return {
    name: `edge-router-${id}-system`,
    isSystem: true,
    semantic: 'AnyOf',
    identityRoles: [`@${id}`],
    edgeRouterRoles: [`@${id}`],
  };
}

/** Deletes what tunneling brought, whatever the router row says (nothing else has a router's id). */
function tunnelerOff(id: string, at: string): Command[] {
  return [
    { op: 'delete', entity: 'edge-router-policies', id, at, system: true, ifExists: true },
    { op: 'delete', entity: 'identities', id, at, ifExists: true },
  ];
}

/** The command that brings the Router identity and system policy in line with edge router `id` as it is then. */
function syncTunneler(id: string, at: string): Command {
  return { op: 'custom', name: 'syncRouterTunneler', args: { id }, at };
}

/**
 * Custom command, applied after a write that changes an edge router's `isTunnelerEnabled` or name: the Router identity
 * and the system policy exist exactly while the router, as it is when the command applies, has tunneling on, the
 * identity named as the router. Decided here, not from the row a handler read: of two writes racing (tunneling
 * turned on, and off or a rename by a request that had seen it off), the one applied second would otherwise leave
 * the identity behind, or unnamed.
 */
export function syncRouterTunneler(ctx: ApplyContext, args: { id: string }, at: string): void {
  const router = ctx.txn.get('edge-routers', args.id);
  const identity = ctx.txn.get('identities', args.id);
  const policy = ctx.txn.get('edge-router-policies', args.id);
  if (router?.isTunnelerEnabled === true) {
    if (!identity) ctx.create('identities', args.id, routerIdentityData(router.name), at);
    else if (identity.name !== router.name) ctx.update('identities', args.id, { name: router.name }, at);
    if (!policy) ctx.create('edge-router-policies', args.id, systemPolicyData(args.id), at, true);
    return;
  }
  if (policy) ctx.delete('edge-router-policies', args.id, at, true);
  if (identity) ctx.delete('identities', args.id, at);
}

/** The fields an edge router and its router row (src/model/transit-router.ts) share: a change to one is copied. */
export const SHARED_ROUTER_FIELDS = ['name', 'cost', 'noTraversal', 'disabled', 'tags'] as const;

/** The shared fields among a set of stored changes. */
export function sharedRouterFields(set: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of SHARED_ROUTER_FIELDS) if (k in set) out[k] = set[k];
  return out;
}

/** The stored fields of an edge router's router row: the shared fields, unenrolled. */
export function routerRowData(body: Record<string, unknown>): Record<string, unknown> {
  return {
    name: body.name,
    cost: body.cost ?? 0,
    noTraversal: body.noTraversal ?? false,
    disabled: body.disabled ?? false,
    tags: body.tags ?? {},
    isEdge: true,
    isVerified: false,
  };
}

/** An edge router's router row: the shared fields, unenrolled (its enrollment is an `enrollments` row). */
export function routerRowOf(id: string, body: Record<string, unknown>, at: string): Command {
  return { op: 'create', entity: 'transit-routers', id, data: routerRowData(body), at };
}

/** What a change of the shared fields on the router row (`/routers/{id}`) brings to its edge router. */
export function edgeRouterFollows(
  edge: RowFor<'edge-routers'>,
  shared: Record<string, unknown>,
  at: string,
): Command[] {
  if (Object.keys(shared).length === 0) return [];
  const out: Command[] = [{ op: 'update', entity: 'edge-routers', id: edge.id, set: shared, at }];
  if ('name' in shared) out.push(syncTunneler(edge.id, at));
  return out;
}

/** What deleting the router row of an edge router (`DELETE /routers/{id}`) deletes with it. */
export function edgeRouterGone(edge: RowFor<'edge-routers'>, at: string): Command[] {
  return [...tunnelerOff(edge.id, at), { op: 'delete', entity: 'edge-routers', id: edge.id, at, ifExists: true }];
}

/** What every view of an edge router shows (OpenZiti's commonEdgeRouterProperties). */
const commonProps = {
  appData: tags,
  cost,
  disabled: s.bool(),
  hostname: s.str(),
  isOnline: s.bool(),
  name: s.str(),
  noTraversal: s.bool(),
  supportedProtocols: s.map(s.str()),
  syncStatus: s.str(),
};
const commonRequired = [
  'hostname',
  'name',
  'supportedProtocols',
  'syncStatus',
  'isOnline',
  'cost',
  'noTraversal',
  'disabled',
] as const;
export const commonEdgeRouterProperties = s.named('commonEdgeRouterProperties', s.obj(commonProps, commonRequired));
export const currentIdentityEdgeRouterDetail = detailSchema(
  'currentIdentityEdgeRouterDetail',
  s.obj(commonProps, commonRequired),
);

export const edgeRouterDetail = detailSchema(
  'edgeRouterDetail',
  s.obj(
    {
      ...commonProps,
      arch: s.str(),
      buildDate: s.str(),
      certPem: s.nullable(s.str()),
      enrollmentCreatedAt: s.nullable(s.datetime()),
      enrollmentExpiresAt: s.nullable(s.datetime()),
      enrollmentJwt: s.nullable(s.str()),
      enrollmentToken: s.nullable(s.str()),
      fingerprint: s.str(),
      isTunnelerEnabled: s.bool(),
      isVerified: s.bool(),
      os: s.str(),
      revision: s.str(),
      roleAttributes: attributes,
      version: s.str(),
    },
    [
      'isVerified',
      'roleAttributes',
      'os',
      'version',
      'arch',
      'buildDate',
      'revision',
      'isTunnelerEnabled',
      ...commonRequired,
    ],
  ),
);

export const edgeRouters: Entity<'edge-routers', typeof edgeRouterFields> = defineEntity({
  name: 'edge-routers',
  type: 'edgeRouter',
  tag: 'Edge Router',
  singular: 'EdgeRouter',
  plural: 'EdgeRouters',
  permission: 'router',
  roleAttributesField: 'roleAttributes',
  fields: edgeRouterFields,
  detail: edgeRouterDetail,
  create: s.named('edgeRouterCreate', s.obj(writable, ['name'])),
  update: s.named('edgeRouterUpdate', s.obj(writable, ['name'])),
  patch: s.named('edgeRouterPatch', s.obj({ ...writable, name: s.nullable(s.str()) })),
  // what enrollment yields is on the router row of the same id: filters and sorts read it there, as OpenZiti's
  // `isVerified` / `fingerprint` symbols of its edge routers
  symbols: (svc) => ({
    isVerified: {
      type: 'bool',
      set: false,
      get: (r: Row) => isVerifiedRouter(svc, r.id),
    },
    fingerprint: { type: 'string', set: false, get: (r: Row) => svc.get('transit-routers', r.id)?.fingerprint ?? '' },
  }),
  relations: [
    ...relationsThrough({
      policy: (): Entity => edgeRouterPolicies,
      policyName: 'edge-router-policies',
      near: 'edgeRouterRoles',
      far: 'identityRoles',
      listed: (): Entity => identities,
      policies: [
        'edge-router-policies',
        'listEdgeRouterEdgeRouterPolicies',
        'List the edge router policies that affect an edge router',
      ],
      targets: ['identities', 'listEdgeRouterIdentities', 'List associated identities'],
    }),
    ...relationsThrough({
      policy: (): Entity => serviceEdgeRouterPolicies,
      policyName: 'service-edge-router-policies',
      near: 'edgeRouterRoles',
      far: 'serviceRoles',
      listed: (): Entity => services,
      policies: [
        'service-edge-router-policies',
        'listEdgeRouterServiceEdgeRouterPolicies',
        'List the service edge router policies that affect an edge router',
      ],
      targets: ['services', 'listEdgeRouterServices', 'List associated services'],
    }),
  ],
  // the connection state (online, hostname, protocols, version) is this controller's router presence
  // (src/routers/presence.ts); the enrollment is an `enrollments` row, what it yields (fingerprint, certificate,
  // verified) is on the router row of the same id (src/model/transit-router.ts)
  toApi: (row, svc): Record<string, unknown> => {
    const router = svc.get('transit-routers', row.id);
    const state = routerPresenceOf(svc).state(row.id);
    return {
      arch: state.versionInfo?.arch ?? '',
      buildDate: state.versionInfo?.buildDate ?? '',
      certPem: router?.certPem ?? null,
      fingerprint: router?.fingerprint ?? '',
      hostname: state.hostname,
      isOnline: state.isOnline,
      isVerified: router?.isVerified === true,
      os: state.versionInfo?.os ?? '',
      revision: state.versionInfo?.revision ?? '',
      supportedProtocols: state.supportedProtocols,
      syncStatus: state.syncStatus,
      version: state.versionInfo?.version ?? '',
      ...routerEnrollmentView(svc, row.id),
    };
  },
  // shows this controller's router presence, which changes without a write
  cacheable: false,
  redact: redactRouterEnrollment,
  // a new router gets its router row and its `erott` enrollment (OpenZiti's default window), in the same write
  alsoOnCreate: async (id, body, svc, at) => [
    ...(body.isTunnelerEnabled === true ? tunnelerOn(id, body.name, at) : []),
    routerRowOf(id, body, at),
    await routerEnrollmentCommand(svc, id, ROUTER_ENROLL_METHOD, at),
  ],
  alsoOnUpdate(row, set, svc, at) {
    const shared = sharedRouterFields(set);
    const out: Command[] =
      Object.keys(shared).length > 0 && svc.get('transit-routers', row.id)
        ? [{ op: 'update', entity: 'transit-routers', id: row.id, set: shared, at }]
        : [];
    if ('isTunnelerEnabled' in set || 'name' in set) out.push(syncTunneler(row.id, at));
    return out;
  },
  alsoOnDelete: (row, _svc, at) => [
    ...tunnelerOff(row.id, at),
    { op: 'delete', entity: 'transit-routers', id: row.id, at, ifExists: true },
  ],
  fromApi(_body, { mode, copied }) {
    const out = { ...copied };
    if ('roleAttributes' in out) out.roleAttributes = checkRoleAttributes('roleAttributes', out.roleAttributes);
    if (mode === 'create') out.roleAttributes ??= [];
    return out;
  },
});
