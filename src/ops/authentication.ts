import { ApiError, Errors } from '../api/errors.js';
import { type ApiName, type OpDef, op } from '../api/op.js';
import { ok, okEmpty } from '../api/respond.js';
import type { Services } from '../api/services.js';
import { certificateLogin, certNamesAdmin } from '../auth/cert-login.js';
import { clientChainOf } from '../auth/chain-cache.js';
import {
  completeExtJwtSecondary,
  extJwtLogin,
  extJwtLoginHolds,
  pendingExtJwtSigner,
  tokenNamesAdmin,
} from '../auth/ext-jwt-login.js';
import { onFailedPassword, resetFailedLogins } from '../auth/lockout.js';
import { verifyAgainstDummy, verifyPassword } from '../auth/password.js';
import { gated, recordAdminLogin } from '../auth/rate-limit.js';
import { currentApiSessionDetail, renderApiSessionFields } from '../model/api-session.js';
import { isPrimaryAllowed } from '../model/auth-policy.js';
import { password, username } from '../model/authenticator.js';
import { detailEnvelope, empty, envInfo, sdkInfo } from '../model/common.js';
import { isDisabled } from '../model/identity.js';
import type { Command, RowFor } from '../model/rows.js';
import { type SchemaNode, s } from '../schema/s.js';
import { shortId, uuid } from '../util/ids.js';
import { extendHeaders } from './extend.js';

const BOTH: ApiName[] = ['client', 'management'];

const authenticateBody = s.named(
  'authenticate',
  s.obj({
    configTypes: s.named('configTypes', s.arr(s.str())),
    envInfo,
    password,
    sdkInfo,
    username,
  }),
);

export const currentApiSessionEnvelope = detailEnvelope('currentApiSessionDetailEnvelope', currentApiSessionDetail);

/** The current-session representation: the API session plus `expiresAt`/`expirationSeconds`. */
export function renderCurrentSession(row: RowFor<'api-sessions'>, svc: Services): Record<string, unknown> {
  return {
    _links: { self: { href: './current-api-session' } },
    createdAt: row.createdAt,
    id: row.id,
    tags: row.tags ?? {},
    updatedAt: row.updatedAt,
    ...renderApiSessionFields(row, svc),
    expirationSeconds: svc.sessions.expirationSeconds(row),
    expiresAt: new Date(svc.sessions.expiresAtMs(row)).toISOString(),
  };
}

/** Only the properties a schema declares, and only string values (what OpenZiti's typed model keeps). */
function declaredStrings(schema: SchemaNode, value: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.keys(schema.properties ?? {})) {
    if (typeof value[key] === 'string') out[key] = value[key] as string;
  }
  return out;
}

/** `all` among the requested config types selects every config type; it is kept as is (OpenZiti does the same). */
const ALL_CONFIG_TYPES = 'all';

/**
 * Config type names or ids → ids of existing config types (unknown entries are ignored, as OpenZiti's
 * MapConfigTypeNamesToIds does); a list holding `all` becomes `["all"]`.
 */
function configTypeIds(svc: Services, values: string[] | undefined): string[] {
  if (values?.includes(ALL_CONFIG_TYPES)) return [ALL_CONFIG_TYPES];
  const out = new Set<string>();
  for (const v of values ?? []) {
    if (svc.get('config-types', v)) out.add(v);
    else for (const id of svc.store.lookup('config-types', 'name', v)) out.add(id);
  }
  return [...out].sort();
}

async function passwordLogin(
  svc: Services,
  body: { username?: unknown; password?: unknown } | undefined,
  source: string,
): Promise<{ identity: RowFor<'identities'>; authenticator: RowFor<'authenticators'> } | null> {
  const username = body?.username;
  const password = body?.password;
  if (typeof username !== 'string' || typeof password !== 'string') return null;
  const ids = svc.store.lookup('authenticators', 'username', username);
  const authenticator = ids.length === 1 ? svc.get('authenticators', ids[0]!) : undefined;
  if (authenticator?.method !== 'updb') {
    await verifyAgainstDummy(password, { source });
    return null;
  }
  const owner = svc.get('identities', authenticator.identityId!);
  const admin = owner?.isAdmin === true;
  if (!(await verifyPassword(authenticator.password!, password, { source, admin }))) {
    if (owner) await onFailedPassword(svc, owner);
    return null;
  }
  const identity = svc.get('identities', authenticator.identityId!);
  if (!identity || isDisabled(identity, svc.clock.now())) return null;
  if (!isPrimaryAllowed(svc.get('auth-policies', identity.authPolicyId!), 'updb')) return null;
  return { identity, authenticator };
}

export function authenticationOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'POST',
      path: '/authenticate',
      apis: BOTH,
      operationId: 'authenticate',
      tags: ['Authentication'],
      summary: 'Authenticate via a method supplied via a query string parameter',
      description: 'Allowed authentication methods include "password", "cert", and "ext-jwt"',
      access: 'none',
      // a credential set, or a partial session made, through another cluster member is known here (docs/cluster.md)
      catchUpFirst: true,
      body: authenticateBody,
      bodyName: 'auth',
      bodyRequired: false,
      query: [{ name: 'method', type: 'string', required: true, enum: ['password', 'cert', 'ext-jwt'] }],
      responses: {
        200: {
          description: 'The API session associated with the session used to issue the request',
          schema: currentApiSessionEnvelope,
        },
      },
      handler: async ({ req, body, svc, caller }) => {
        const method = req.query.get('method');
        if (method !== 'password' && method !== 'ext-jwt' && method !== 'cert') throw Errors.INVALID_AUTH_METHOD();
        // every credential check runs through the auth rate limiter (the password's inside passwordLogin), in the
        // admin lane when the credential names an admin
        const source = req.remoteAddress;
        const jwtLane = () => ({ source, admin: tokenNamesAdmin(svc, req.headers) });
        // the client certificate chain is fingerprinted once, for the lane, the session lookup and the login
        const chain = method === 'cert' ? clientChainOf(req.peerCertificates) : null;
        const certLane = () => ({ source, admin: certNamesAdmin(svc, chain) });
        if (method === 'ext-jwt' && typeof caller?.session.extJwtPending === 'string') {
          // the secondary step of a session that waits for a signer's token
          const session = caller.session;
          if (!(await gated(jwtLane(), () => completeExtJwtSecondary(svc, session, req.headers)))) {
            throw Errors.INVALID_AUTH();
          }
          return ok(renderCurrentSession(svc.require('api-sessions', caller.session.id), svc));
        }
        // an ephemeral certificate logs in as the API session it belongs to
        const byCert = method === 'cert' ? await gated(certLane(), () => certificateLogin(svc, chain)) : null;
        if (byCert && 'bound' in byCert) {
          const res = ok(renderCurrentSession(byCert.bound, svc));
          return { ...res, headers: { ...res.headers, 'zt-session': byCert.bound.token as string } };
        }
        const login: {
          identity: RowFor<'identities'>;
          authenticator?: RowFor<'authenticators'>;
          signer?: RowFor<'external-jwt-signers'>;
        } | null =
          method === 'ext-jwt'
            ? await gated(jwtLane(), () => extJwtLogin(svc, req.headers))
            : byCert
              ? byCert.login
              : await passwordLogin(svc, body, source);
        if (!login) throw Errors.INVALID_AUTH();
        const { identity, authenticator } = login;
        // an admin's credentials from this source take the admin lane of the limiter from now on (rate-limit.ts)
        if (identity.isAdmin === true) recordAdminLogin(source);
        const at = svc.nowIso();
        const id = shortId();
        const token = uuid();
        const policy = svc.get('auth-policies', identity.authPolicyId!);
        const mfaRequired =
          identity.isMfaEnabled === true ||
          (policy?.secondary as { requireTotp?: boolean } | undefined)?.requireTotp === true;
        const ops: Command[] = [
          {
            op: 'create',
            entity: 'api-sessions',
            id,
            at,
            data: {
              token,
              identityId: identity.id,
              ...(authenticator ? { authenticatorId: authenticator.id } : {}),
              ipAddress: req.remoteAddress,
              configTypes: configTypeIds(svc, body?.configTypes),
              isMfaRequired: mfaRequired,
              isMfaComplete: false,
              extJwtPending: pendingExtJwtSigner(policy, login.signer?.id),
              lastActivityAt: at,
            },
          },
        ];
        const reset = resetFailedLogins(identity);
        if (body?.envInfo || body?.sdkInfo || reset) {
          const set: Record<string, unknown> = { ...reset };
          if (body.envInfo) set.envInfo = declaredStrings(envInfo, body.envInfo);
          if (body.sdkInfo) set.sdkInfo = declaredStrings(sdkInfo, body.sdkInfo);
          ops.push({ op: 'update', entity: 'identities', id: identity.id, set, at, system: true });
        }
        // an ext-jwt login relied on the signer and the policy as they were: checked again where the write applies
        const expect = login.signer ? extJwtLoginHolds({ identity, signer: login.signer }, policy) : undefined;
        try {
          await svc.write({ op: 'batch', ops, ...(expect ? { expect } : {}) });
        } catch (err) {
          // the identity or authenticator went away between the password check and the write
          if (err instanceof ApiError && err.status < 500 && err.status !== 429) throw Errors.INVALID_AUTH();
          throw err;
        }
        const session = svc.require('api-sessions', id);
        const res = ok(renderCurrentSession(session, svc));
        return {
          ...res,
          headers: { ...res.headers, 'zt-session': token, ...(authenticator ? extendHeaders(authenticator) : {}) },
        };
      },
    }),
    op({
      method: 'GET',
      path: '/current-api-session',
      apis: BOTH,
      operationId: 'getCurrentAPISession',
      tags: ['Current API Session'],
      summary: 'Return the current API session',
      access: 'partial',
      responses: {
        200: {
          description: 'The API session associated with the session used to issue the request',
          schema: currentApiSessionEnvelope,
        },
      },
      handler: ({ caller, svc }) => ok(renderCurrentSession(caller!.session, svc)),
    }),
    op({
      method: 'DELETE',
      path: '/current-api-session',
      apis: BOTH,
      tags: ['Current API Session'],
      summary: 'Logout',
      description: 'Terminates the current API session',
      access: 'partial',
      responses: { 200: { description: 'Base empty response', schema: empty } },
      handler: async ({ caller, svc }) => {
        await svc.write({
          op: 'delete',
          entity: 'api-sessions',
          id: caller!.session.id,
          at: svc.nowIso(),
          system: true,
          ifExists: true,
        });
        return okEmpty();
      },
    }),
  ];
}
