/**
 * Routers (OpenZiti's fabric routers, `/routers` and the deprecated `/transit-routers`): one row per router of the
 * network. A transit router is created here; an edge router (src/model/edge-router.ts) has a row here too, with
 * the same id (`isEdge`), created, renamed and deleted with it, so that `/routers` lists every router and
 * terminators (src/model/terminator.ts) reference any router. A transit router gets its `trott` enrollment (an
 * `enrollments` row) on create; what any router's enrollment yields (`fingerprint`, `certPem`, `isVerified`) is
 * kept on its row here (src/model/router-enrollment.ts, src/auth/router-enrollment.ts).
 */
import {
  bodyFieldsOf,
  defineEntity,
  detailSchema,
  type Entity,
  type EntityFields,
  getRow,
  type WriteMode,
} from '../api/entity.js';
import { fieldError } from '../api/errors.js';
import type { Services } from '../api/services.js';
import { routerPresenceOf } from '../routers/presence.js';
import { s } from '../schema/s.js';
import { configIdsField } from './common.js';
import { edgeRouterFollows, edgeRouterGone, edgeRouters, sharedRouterFields } from './edge-router.js';
import {
  redactRouterEnrollment,
  routerEnrollmentCommand,
  routerEnrollmentView,
  TRANSIT_ROUTER_ENROLL_METHOD,
} from './router-enrollment.js';

/** The most configs one router may name (Keel's bound). */
export const MAX_ROUTER_CONFIGS = 100;
/** The most control channel listeners one router may name, and addresses per listener (Keel's bounds). */
export const MAX_CTRL_CHAN_LISTENERS = 100;

export const routerCost = s.int({ minimum: 0, maximum: 65535 });
const listeners = s.map(s.arr(s.str()));

const routerFields = {
  name: { type: 'string', unique: true, nonEmpty: true, body: s.str(), api: true },
  cost: { type: 'number', body: s.nullable(routerCost), api: true, default: 0 },
  noTraversal: { type: 'bool', body: s.nullable(s.bool()), api: true, default: false },
  disabled: { type: 'bool', body: s.nullable(s.bool()), api: true, default: false },
  ctrlChanListeners: { type: 'map', body: s.nullable(listeners), api: true, default: {} },
  configs: configIdsField,
  /** Set by enrollment and extension: the router's client certificate and its SHA-1 fingerprint. */
  fingerprint: { type: 'string', unique: true, api: true, default: '' },
  certPem: { type: 'string', filter: false },
  isVerified: { type: 'bool', api: true, default: false },
  unverifiedFingerprint: { type: 'string', filter: false, api: true },
  unverifiedCertPem: { type: 'string', filter: false, api: true },
  /** The router is an edge router (its edge side is the `edge-routers` row of the same id). */
  isEdge: { type: 'bool', filter: false },
} as const satisfies EntityFields;

const writable = bodyFieldsOf(routerFields);

export const routerDetail = detailSchema(
  'routerDetail',
  s.obj(
    {
      configs: s.arr(s.str()),
      cost: routerCost,
      ctrlChanListeners: listeners,
      disabled: s.bool(),
      enrollmentCreatedAt: s.nullable(s.datetime()),
      enrollmentExpiresAt: s.nullable(s.datetime()),
      enrollmentJwt: s.nullable(s.str()),
      enrollmentToken: s.nullable(s.str()),
      fingerprint: s.str(),
      isOnline: s.bool(),
      isVerified: s.bool(),
      name: s.str(),
      noTraversal: s.bool(),
      unverifiedCertPem: s.nullable(s.str()),
      unverifiedFingerprint: s.nullable(s.str()),
    },
    ['name', 'isVerified', 'isOnline', 'fingerprint', 'cost', 'noTraversal', 'disabled'],
  ),
);

/** OpenZiti's router config rule: every id names a config whose type targets routers. */
function checkRouterConfigs(svc: Services, ids: string[]): string[] {
  if (ids.length > MAX_ROUTER_CONFIGS) {
    throw fieldError('configs', `at most ${MAX_ROUTER_CONFIGS} configs may be given`, ids.length);
  }
  for (const id of ids) {
    const config = svc.get('configs', id);
    if (!config) throw fieldError('configs', `no config found with id ${id}`, id);
    const type = svc.get('config-types', config.configTypeId!);
    if (type?.target !== 'router') {
      throw fieldError('configs', `config ${id} is of type ${String(type?.name)}, which is not a router config`, id);
    }
  }
  return [...new Set(ids)];
}

function checkListeners(value: unknown): Record<string, string[]> {
  const map = (value ?? {}) as Record<string, string[]>;
  const entries = Object.entries(map);
  if (entries.length > MAX_CTRL_CHAN_LISTENERS || entries.some(([, a]) => a.length > MAX_CTRL_CHAN_LISTENERS)) {
    throw fieldError('ctrlChanListeners', `at most ${MAX_CTRL_CHAN_LISTENERS} listeners and addresses`, entries.length);
  }
  return map;
}

function routerFromApi(mode: WriteMode, svc: Services, copied: Record<string, unknown>): Record<string, unknown> {
  const out = { ...copied };
  if ('configs' in out) out.configs = checkRouterConfigs(svc, (out.configs as string[] | null) ?? []);
  if ('ctrlChanListeners' in out) out.ctrlChanListeners = checkListeners(out.ctrlChanListeners);
  if (mode === 'create') out.isVerified = false;
  return out;
}

export const transitRouters: Entity<'transit-routers', typeof routerFields> = defineEntity({
  name: 'transit-routers',
  type: 'router',
  tag: 'Router',
  singular: 'TransitRouter',
  plural: 'TransitRouters',
  permission: 'router',
  fields: routerFields,
  detail: routerDetail,
  create: s.named('routerCreate', s.obj(writable, ['name'])),
  update: s.named('routerUpdate', s.obj(writable, ['name'])),
  patch: s.named('routerPatch', s.obj({ ...writable, name: s.nullable(s.str()) })),
  // the same operations, under OpenZiti's current path (`/transit-routers` is its deprecated name)
  alias: { path: 'routers', singular: 'Router', plural: 'Routers' },
  // online while its control connection to this controller is up (src/routers/presence.ts)
  toApi: (row, svc) => ({
    isOnline: routerPresenceOf(svc).isOnline(row.id),
    ...routerEnrollmentView(svc, row.id),
  }),
  // shows this controller's router presence, which changes without a write
  cacheable: false,
  redact: redactRouterEnrollment,
  fromApi: (_body, { mode, svc, copied }) => routerFromApi(mode, svc, copied),
  // created unenrolled: its `trott` enrollment in the same write (an edge router's row gets none: its edge router
  // has the `erott` one)
  alsoOnCreate: async (id, _body, svc, at) => [
    await routerEnrollmentCommand(svc, id, TRANSIT_ROUTER_ENROLL_METHOD, at),
  ],
  alsoOnUpdate(row, set, svc, at) {
    const edge = row.isEdge === true ? getRow(edgeRouters, svc, row.id) : undefined;
    return edge ? edgeRouterFollows(edge, sharedRouterFields(set), at) : [];
  },
  alsoOnDelete(row, svc, at) {
    const edge = row.isEdge === true ? getRow(edgeRouters, svc, row.id) : undefined;
    return edge ? edgeRouterGone(edge, at) : [];
  },
});
