import type { ApplyContext } from '../../storage/schema.js';
import { fail } from '../../storage/types.js';
import { defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import { s } from '../schema/s.js';

export const currentApiSessionCertificateDetail = detailSchema(
  'currentApiSessionCertificateDetail',
  s.obj(
    {
      certificate: s.str(),
      fingerprint: s.str(),
      subject: s.str(),
      validFrom: s.datetime(),
      validTo: s.datetime(),
    },
    ['subject', 'fingerprint', 'validFrom', 'validTo', 'certificate'],
  ),
);

const apiSessionCertificateFields = {
  apiSessionId: { type: 'string', ref: { entity: 'api-sessions', onDelete: 'cascade' } },
  identityId: { type: 'string', ref: { entity: 'identities', onDelete: 'cascade' } },
  subject: { type: 'string', api: true },
  fingerprint: { type: 'string', unique: true, api: true },
  /** The leaf and the signing CA (PEM). */
  certPem: { type: 'string', filter: false },
  validFrom: { type: 'datetime', api: true },
  validTo: { type: 'datetime', api: true },
} as const satisfies EntityFields;

/**
 * Ephemeral certificates (OpenZiti's API session certificates, docs/enrollment.md): short-lived client
 * certificates an API session had signed from a CSR. They belong to that session and end with it (cascade); a
 * `method=cert` login with one answers that session. Served only on the caller's own session
 * (src/ops/session-certificates.ts): no CRUD of their own.
 */
export const apiSessionCertificates: Entity<'api-session-certificates', typeof apiSessionCertificateFields> =
  defineEntity({
    name: 'api-session-certificates',
    type: 'apiSessionCertificate',
    tag: 'Current API Session',
    singular: 'ApiSessionCertificate',
    plural: 'ApiSessionCertificates',
    fields: apiSessionCertificateFields,
    detail: currentApiSessionCertificateDetail,
    toApi: (row) => ({ certificate: row.certPem }),
    reads: [],
    // served on the caller's session only (OpenZiti's CurrentApiSessionCertificateLinkFactory)
    selfPath: 'current-api-session/certificates',
    operations: { list: false, detail: false, create: false, update: false, patch: false, delete: false },
  });

/**
 * Custom command: stores an ephemeral certificate of an API session unless the session holds `max` already, decided
 * in apply (429 RATE_LIMITED otherwise), so that concurrent requests of one session cannot pass the bound together:
 * each checks it before its CSR is signed, and all of them find the same count there.
 */
export function createSessionCertificate(
  ctx: ApplyContext,
  args: { id: string; data: Record<string, unknown> & { apiSessionId: string }; max: number },
  at: string,
): void {
  const held = ctx.txn.lookup('api-session-certificates', 'apiSessionId', args.data.apiSessionId).length;
  if (held >= args.max) {
    fail({
      code: 'CONFLICT',
      entity: 'api-session-certificates',
      field: 'csr',
      reason: `an API session holds at most ${args.max} certificates`,
      apiCode: 'RATE_LIMITED',
    });
  }
  ctx.create('api-session-certificates', args.id, args.data, at);
}
