import type { Command } from '../../storage/types.js';
import {
  bodyFieldsOf,
  checkRoleAttributes,
  defineEntity,
  detailSchema,
  type Entity,
  type EntityFields,
} from '../api/entity.js';
import { fieldError } from '../api/errors.js';
import { s } from '../schema/s.js';
import { attributes, tags } from './common.js';
import { edgeRouterPolicies } from './edge-router-policy.js';
import { routerEnrollmentCommand, routerEnrollmentView } from './enrollment.js';
import { identities } from './identity.js';
import { relationsThrough } from './policy.js';
import { services } from './service.js';
import { serviceEdgeRouterPolicies } from './service-edge-router-policy.js';

const cost = s.int({ minimum: 0, maximum: 65535 });

/** An edge router's stored fields (the control channel comes with the routers' stage). */
const edgeRouterFields = {
  name: { type: 'string', unique: true, body: s.str(), api: true },
  roleAttributes: { type: 'string', set: true, index: true, body: attributes, api: true, default: [] },
  cost: { type: 'number', body: s.nullable(cost), api: true, default: 0 },
  noTraversal: { type: 'bool', body: s.nullable(s.bool()), api: true, default: false },
  disabled: { type: 'bool', body: s.nullable(s.bool()), api: true, default: false },
  isTunnelerEnabled: { type: 'bool', body: s.bool(), api: true, default: false },
  appData: { type: 'map', body: tags, api: true, default: {} },
  // set by router enrollment (src/auth/router-enrollment.ts), cleared by re-enroll; never written by the body
  isVerified: { type: 'bool', api: true, default: false },
  fingerprint: { type: 'string', unique: true, api: true, default: '' },
  certPem: { type: 'string', api: true, default: null },
} as const satisfies EntityFields;

const writable = bodyFieldsOf(edgeRouterFields);

/**
 * What `isTunnelerEnabled` brings (OpenZiti's edge_router_store): a Router identity with the router's id and name,
 * and the system edge router policy `edge-router-<id>-system` giving that identity this router.
 */
function tunnelerOn(id: string, name: unknown, at: string): Command[] {
  return [
    {
      op: 'create',
      entity: 'identities',
      id,
      data: {
        name,
        typeId: 'Router',
        authPolicyId: 'default',
        isAdmin: false,
        isDefaultAdmin: false,
        roleAttributes: [],
      },
      at,
    },
    {
      op: 'create',
      entity: 'edge-router-policies',
      id,
      data: {
        name: `edge-router-${id}-system`,
        isSystem: true,
        semantic: 'AnyOf',
        identityRoles: [`@${id}`],
        edgeRouterRoles: [`@${id}`],
      },
      at,
      system: true,
    },
  ];
}

function tunnelerOff(id: string, at: string): Command[] {
  return [
    { op: 'delete', entity: 'edge-router-policies', id, at, system: true, ifExists: true },
    { op: 'delete', entity: 'identities', id, at, ifExists: true },
  ];
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

export const edgeRouters = defineEntity({
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
  // never connected yet: the control channel comes with the routers' stage
  toApi: (row, svc) => ({
    arch: '',
    buildDate: '',
    hostname: '',
    isOnline: false,
    os: '',
    revision: '',
    supportedProtocols: {},
    syncStatus: 'SYNC_NEW',
    version: '',
    ...routerEnrollmentView(svc, row.id),
  }),
  // the enrollment token and JWT are credentials: admins see them, other readers do not
  redact: (data) => ({ ...data, enrollmentJwt: null, enrollmentToken: null }),
  // a new router gets its `erott` enrollment (OpenZiti's default window), in the same write
  alsoOnCreate: async (id, body, svc, at) => [
    ...(body.isTunnelerEnabled === true ? tunnelerOn(id, body.name, at) : []),
    await routerEnrollmentCommand(svc, id, at),
  ],
  alsoOnUpdate(row, set, _svc, at) {
    const was = row.isTunnelerEnabled === true;
    const now = 'isTunnelerEnabled' in set ? set.isTunnelerEnabled === true : was;
    if (!was && now) return tunnelerOn(row.id, set.name ?? row.name, at);
    if (was && !now) return tunnelerOff(row.id, at);
    if (now && typeof set.name === 'string' && set.name !== row.name) {
      return [{ op: 'update', entity: 'identities', id: row.id, set: { name: set.name }, at }];
    }
    return [];
  },
  alsoOnDelete: (row, _svc, at) => (row.isTunnelerEnabled === true ? tunnelerOff(row.id, at) : []),
  fromApi(_body, { mode, copied }) {
    const out = { ...copied };
    if (typeof out.name === 'string' && out.name.trim() === '') throw fieldError('name', 'name is required', '');
    if ('roleAttributes' in out) out.roleAttributes = checkRoleAttributes('roleAttributes', out.roleAttributes);
    if (mode === 'create') out.roleAttributes ??= [];
    return out;
  },
});
