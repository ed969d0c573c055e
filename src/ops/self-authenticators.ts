/**
 * Self-service authenticators (docs/auth.md, "Your own authenticators"): an identity lists and reads its own
 * authenticators and changes its own username and password, proving the current password. Another identity's
 * authenticator is not found, for admins too (OpenZiti's ReadForIdentity).
 */
import { Errors, fieldError } from '../api/errors.js';
import { listQuery, listResponse, mapResult } from '../api/list.js';
import { type ApiName, LIST_QUERY, type OpDef, op } from '../api/op.js';
import { okEmpty, okJson } from '../api/respond.js';
import { onFailedPassword, resetFailedLogins } from '../auth/lockout.js';
import { verifyPassword } from '../auth/password.js';
import {
  authenticatorDetail,
  authenticators,
  notUpdatable,
  ownAuthenticator,
  password,
  updbChanges,
  username,
} from '../model/authenticator.js';
import { detailEnvelope, empty, listEnvelope, tags } from '../model/common.js';
import { stillEquals, usernameFree } from '../model/preconditions.js';
import type { Command, Expect } from '../model/rows.js';
import { type Schema, s } from '../schema/s.js';

const BOTH: ApiName[] = ['client', 'management'];
const TAGS = ['Current API Session'];

const usernameNullable = s.nullable(s.str({ minLength: 4, maxLength: 100 }));
const passwordNullable = s.nullable(s.str({ minLength: 5, maxLength: 100 }));
const authenticatorUpdateWithCurrent = s.named(
  'authenticatorUpdateWithCurrent',
  s.obj({ currentPassword: password, password, tags, username }, ['currentPassword', 'username', 'password']),
);
const authenticatorPatchWithCurrent = s.named(
  'authenticatorPatchWithCurrent',
  s.obj({ currentPassword: password, password: passwordNullable, tags, username: usernameNullable }, [
    'currentPassword',
  ]),
);

type SelfChange = { currentPassword: string; password?: string | null; username?: string | null; tags?: unknown };

export function selfAuthenticatorOps(): OpDef<unknown>[] {
  const change = (method: 'PUT' | 'PATCH'): OpDef<unknown> =>
    op<SelfChange>({
      method,
      path: '/current-identity/authenticators/{id}',
      apis: BOTH,
      operationId: method === 'PUT' ? 'updateCurrentIdentityAuthenticator' : 'patchCurrentIdentityAuthenticator',
      tags: TAGS,
      summary:
        method === 'PUT'
          ? 'Update all fields on an authenticator of this identity'
          : 'Update the supplied fields on an authenticator of this identity',
      description:
        'Changes the username and/or password of one of your own username/password authenticators; ' +
        'currentPassword must be its present password.',
      access: 'authenticated',
      body: (method === 'PUT' ? authenticatorUpdateWithCurrent : authenticatorPatchWithCurrent) as Schema<SelfChange>,
      bodyName: 'authenticator',
      responses: {
        200: { description: 'The update request was successful and the resource has been altered', schema: empty },
      },
      handler: async ({ params, body: change, caller, svc, req }) => {
        const row = ownAuthenticator(svc, caller!.identity.id, params.id!);
        // OpenZiti's order: not the caller's (404), not updb (409), then the current password (401)
        if (row.method !== 'updb') throw notUpdatable(row);
        const hash = row.password!;
        const who = { source: req.remoteAddress, admin: caller!.identity.isAdmin === true };
        const identity = caller!.identity;
        if (!(await verifyPassword(hash, change.currentPassword, who))) {
          // a guess at the password like a wrong login: it counts toward the lockout (beyond OpenZiti, docs/auth.md)
          await onFailedPassword(svc, identity);
          // OpenZiti's answer (401 with a field cause), without echoing the password
          throw Errors.UNAUTHORIZED({ field: 'currentPassword', reason: 'invalid current password', value: '******' });
        }
        const set = await updbChanges(svc, row, change);
        if (Object.hasOwn(change, 'tags')) set.tags = change.tags ?? {};
        // applies only to the authenticator as checked: had it changed meanwhile (another password change), the
        // current password proven here may be stale, so the write is refused as the wrong password is
        const expect: Expect[] = [
          stillEquals(
            'authenticators',
            row.id,
            'updatedAt',
            row.updatedAt,
            'the authenticator changed meanwhile',
            'UNAUTHORIZED',
          ),
        ];
        if (typeof set.username === 'string' && set.username !== row.username) {
          const free = usernameFree(set.username, 'username');
          if (svc.store.lookup('authenticators', 'username', set.username).length > 0)
            throw fieldError('username', free.reason, set.username);
          expect.push(free);
        }
        const at = svc.nowIso();
        const update: Command = { op: 'update', entity: 'authenticators', id: row.id, set, at, expect };
        // the current password proven resets the failed attempts, as a successful login does
        const reset = resetFailedLogins(identity);
        await svc.write(
          reset
            ? {
                op: 'batch',
                ops: [update, { op: 'update', entity: 'identities', id: identity.id, set: reset, at, system: true }],
              }
            : update,
        );
        return okEmpty();
      },
    });
  return [
    op({
      method: 'GET',
      path: '/current-identity/authenticators',
      apis: BOTH,
      operationId: 'listCurrentIdentityAuthenticators',
      tags: TAGS,
      summary: 'List authenticators for the current identity',
      description: 'The authenticators of the calling identity; supports filtering, sorting and pagination.',
      access: 'authenticated',
      query: LIST_QUERY,
      responses: {
        200: {
          description: 'A list of authenticators',
          schema: listEnvelope('listAuthenticatorsEnvelope', authenticatorDetail),
        },
      },
      handler: (ctx) => {
        const own = new Set(ctx.svc.store.lookup('authenticators', 'identityId', ctx.caller!.identity.id));
        return mapResult(listQuery(authenticators, ctx, own), (result) =>
          listResponse(result, (row) => authenticators.renderJson(row, ctx.svc), authenticators.symbolTable(ctx.svc)),
        );
      },
    }),
    op({
      method: 'GET',
      path: '/current-identity/authenticators/{id}',
      apis: BOTH,
      operationId: 'detailCurrentIdentityAuthenticator',
      tags: TAGS,
      summary: 'Retrieve an authenticator for the current identity',
      access: 'authenticated',
      responses: {
        200: {
          description: 'A singular authenticator resource',
          schema: detailEnvelope('detailAuthenticatorEnvelope', authenticatorDetail),
        },
      },
      handler: ({ params, caller, svc }) =>
        okJson(authenticators.renderJson(ownAuthenticator(svc, caller!.identity.id, params.id!), svc)),
    }),
    change('PUT'),
    change('PATCH'),
  ];
}
