/**
 * Revocations (management `/revocations`, docs/operations.md): a record that the tokens of a JWT id, an identity or
 * an API session are no longer valid, kept until `expiresAt`. Keel's bearer tokens are its API sessions' tokens, so
 * a revocation takes effect by ending API sessions inside the apply of its own create (`applyRevocation`): the
 * identity's sessions (IDENTITY) or the session itself (API_SESSION). Everything created later in log order is
 * newer than the revocation and stays valid, which is OpenZiti's rule ("tokens issued before the revocation").
 */
import { assert } from '../../storage/types.js';
import { defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import { Errors, fieldError } from '../api/errors.js';
import { endSessions } from '../auth/lockout.js';
import { s } from '../schema/s.js';
import { tags } from './common.js';
import type { ApplyContext, Command } from './rows.js';

export const REVOCATION_TYPES = ['JTI', 'IDENTITY', 'API_SESSION'] as const;
const revocationType = s.named('revocationTypeEnum', s.enum(REVOCATION_TYPES));

/**
 * How long a revocation is kept. OpenZiti keeps one for its OIDC refresh-token lifetime; Keel issues no OIDC tokens
 * and uses a day.
 */
export const REVOCATION_LIFETIME_MS = 24 * 60 * 60 * 1000;
/** At most this many expired revocations are removed by one create (the rest by the next ones). */
export const MAX_EXPIRED_REMOVED = 1000;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const revocationFields = {
  type: { type: 'string', index: true, api: true },
  expiresAt: { type: 'datetime', api: true },
} as const satisfies EntityFields;

export const revocations: Entity<'revocations', typeof revocationFields> = defineEntity({
  name: 'revocations',
  type: 'revocation',
  tag: 'Revocation',
  singular: 'Revocation',
  plural: 'Revocations',
  permission: 'revocation',
  fields: revocationFields,
  detail: detailSchema(
    'revocationDetail',
    s.obj({ expiresAt: s.datetime(), type: revocationType }, ['type', 'expiresAt']),
  ),
  create: s.named(
    'revocationCreate',
    s.obj({ id: s.str({ minLength: 1, maxLength: 100 }), tags, type: revocationType }, ['id', 'type']),
  ),
  operations: {
    update: false,
    patch: false,
    delete: false,
  },
  fromApi(body, { svc }) {
    const id = body.id as string;
    const type = body.type as (typeof REVOCATION_TYPES)[number];
    // OpenZiti: an identity must exist (404); a JWT or API session id must be a UUID. Keel's API session ids are
    // shortids, so an API session Keel has is accepted by its id as well.
    if (type === 'IDENTITY' && !svc.get('identities', id)) {
      throw Errors.NOT_FOUND({ code: 'UNHANDLED', message: `identity with id ${id} not found` });
    }
    if (type === 'JTI' && !UUID.test(id)) throw fieldError('id', 'must be a valid UUID v4', id);
    if (type === 'API_SESSION' && !UUID.test(id) && !svc.get('api-sessions', id)) {
      throw fieldError('id', 'must be a valid UUID v4 or the id of an API session', id);
    }
    return { id, type, expiresAt: new Date(svc.clock.now() + REVOCATION_LIFETIME_MS).toISOString() };
  },
  alsoOnCreate(id, body, svc, at): Command[] {
    const expired: string[] = [];
    for (const row of svc.store.collection('revocations').scan()) {
      if (expired.length >= MAX_EXPIRED_REMOVED) break;
      if (row.expiresAt! <= at) expired.push(row.id);
    }
    return [{ op: 'custom', name: 'applyRevocation', args: { id, type: body.type, expired }, at }];
  },
});

/**
 * Custom command, applied with the revocation's create: ends the API sessions it revokes and removes the expired
 * revocations the handler found (at most MAX_EXPIRED_REMOVED). Returns the number of sessions ended.
 */
export function applyRevocation(
  ctx: ApplyContext,
  args: { id: string; type: string; expired: string[] },
  at: string,
): number {
  assert(args.expired.length <= MAX_EXPIRED_REMOVED, 'too many expired revocations in one command');
  for (const rid of args.expired) {
    // the handler's list, checked against the state the command meets
    const row = ctx.txn.get('revocations', rid);
    if (row && rid !== args.id && row.expiresAt! <= at) ctx.delete('revocations', rid, at, true);
  }
  if (args.type === 'IDENTITY') return endSessions(ctx, args.id, at);
  if (args.type === 'API_SESSION' && ctx.txn.get('api-sessions', args.id)) {
    ctx.delete('api-sessions', args.id, at, true);
    return 1;
  }
  return 0;
}
