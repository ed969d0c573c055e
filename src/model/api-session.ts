import { defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import type { Services } from '../api/services.js';
import { s } from '../schema/s.js';
import { entityRef, ref } from './common.js';
import type { ApplyContext, RowFor } from './rows.js';

const authQueryDetail = s.named(
  'authQueryDetail',
  s.obj(
    {
      clientId: s.str(),
      format: s.enum(['numeric', 'alpha', 'alphaNumeric'] as const),
      httpMethod: s.str(),
      httpUrl: s.str(),
      id: s.str(),
      isTotpEnrolled: s.bool(),
      maxLength: s.int(),
      minLength: s.int(),
      provider: s.enum(['ziti', 'url'] as const),
      scopes: s.arr(s.str()),
      typeId: s.enum(['MFA', 'TOTP', 'EXT-JWT'] as const),
    },
    ['provider'],
  ),
);

const apiSessionFields = {
  authQueries: s.named('authQueryList', s.arr(authQueryDetail)),
  authenticatorId: s.str(),
  cachedLastActivityAt: s.datetime(),
  configTypes: s.arr(s.str()),
  identity: entityRef,
  identityId: s.str(),
  improperClientCertChain: s.bool(),
  ipAddress: s.str(),
  isCertExtendRequested: s.bool(),
  isCertExtendable: s.bool(),
  isCertKeyRollRequested: s.bool(),
  isMfaComplete: s.bool(),
  isMfaRequired: s.bool(),
  lastActivityAt: s.datetime(),
  token: s.str(),
};
const apiSessionRequired = [
  'token',
  'identity',
  'identityId',
  'configTypes',
  'ipAddress',
  'authQueries',
  'cachedUpdatedAt',
  'isMfaRequired',
  'isMfaComplete',
  'authenticatorId',
  'isCertExtendable',
] as const;

export const apiSessionDetail = detailSchema(
  'apiSessionDetail',
  s.obj(
    apiSessionFields,
    // the published spec requires `cachedUpdatedAt` without declaring it: keep its list as is
    apiSessionRequired as readonly string[] as readonly (keyof typeof apiSessionFields)[],
  ),
);
export const currentApiSessionDetail = s.named(
  'currentApiSessionDetail',
  s.allOf(
    apiSessionDetail,
    s.obj({ expirationSeconds: s.int(), expiresAt: s.datetime() }, ['expiresAt', 'expirationSeconds']),
  ),
);

/** The API view of an API session. `cachedUpdatedAt` is listed as required by the published spec, so it is sent. */
export function renderApiSessionFields(row: RowFor<'api-sessions'>, svc: Services): Record<string, unknown> {
  const identity = svc.get('identities', row.identityId!);
  const cached = svc.sessions.lastActivityIso(row);
  return {
    authQueries: svc.sessions.authQueries(row),
    authenticatorId: row.authenticatorId ?? '',
    cachedLastActivityAt: cached,
    cachedUpdatedAt: cached,
    configTypes: row.configTypes ?? [],
    identity: ref('identities', row.identityId!, identity?.name),
    identityId: row.identityId,
    improperClientCertChain: false,
    ipAddress: row.ipAddress ?? '',
    isCertExtendRequested: false,
    isCertExtendable: false,
    isCertKeyRollRequested: false,
    isMfaComplete: row.isMfaComplete === true,
    isMfaRequired: row.isMfaRequired === true,
    lastActivityAt: row.lastActivityAt,
    token: row.token,
  };
}

const apiSessionStoredFields = {
  // never filterable: a `token contains` probe would read other sessions' tokens
  token: { type: 'string', unique: true, filter: false },
  identityId: { type: 'string', ref: { entity: 'identities', onDelete: 'cascade' } },
  authenticatorId: { type: 'string', ref: { entity: 'authenticators', onDelete: 'cascade' } },
  ipAddress: { type: 'string' },
  configTypes: { type: 'string', set: true },
  isMfaRequired: { type: 'bool' },
  isMfaComplete: { type: 'bool' },
  /** The external JWT signer whose token the session still needs (auth policy `secondary.requireExtJwtSigner`). */
  extJwtPending: { type: 'string', filter: false },
  // when the session last passed MFA (the MFA posture check's timeout counts from it)
  mfaCompletedAt: { type: 'datetime' },
  /** Wrong MFA codes the session sent (countMfaFailure). */
  mfaFailures: { type: 'number', filter: false },
  lastActivityAt: { type: 'datetime' },
} as const satisfies EntityFields;

export const apiSessions: Entity<'api-sessions', typeof apiSessionStoredFields> = defineEntity({
  name: 'api-sessions',
  type: 'apiSession',
  tag: 'API Session',
  singular: 'APISessions',
  plural: 'APISessions',
  // OpenZiti files API sessions under the `ops` permission (api_session_router.go)
  permission: 'ops',
  fields: apiSessionStoredFields,
  detail: apiSessionDetail,
  toApi: renderApiSessionFields,
  // activity and expiry move with every request
  cacheable: false,
  // a session token is a bearer credential: only admins see other sessions' tokens (the field stays, as the
  // schema requires it, but empty)
  redact: (data) => ({ ...data, token: '' }),
  operations: { create: false, update: false, patch: false },
});

/** Custom command: delete the listed sessions whose stored activity is older than `cutoff` (re-checked here). */
export function expireSessions(ctx: ApplyContext, args: { ids: string[]; cutoff: string }, at: string): number {
  let n = 0;
  for (const id of args.ids) {
    const row = ctx.txn.get('api-sessions', id);
    if (!row || row.lastActivityAt! >= args.cutoff) continue;
    ctx.delete('api-sessions', id, at, true);
    n++;
  }
  return n;
}

/** Custom command: record session activity (batched). Only moves `lastActivityAt` forward; gone sessions are skipped. */
export function touchSessions(ctx: ApplyContext, args: { touches: [string, string][] }, at: string): number {
  let n = 0;
  for (const [id, iso] of args.touches) {
    const row = ctx.txn.get('api-sessions', id);
    if (!row || row.lastActivityAt! >= iso) continue;
    ctx.update('api-sessions', id, { lastActivityAt: iso }, at, true);
    n++;
  }
  return n;
}
