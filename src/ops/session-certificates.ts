/**
 * Ephemeral certificates of the current API session (client API; docs/enrollment.md, "Ephemeral certificates"):
 * `GET`/`POST /current-api-session/certificates`, `GET`/`DELETE /current-api-session/certificates/{id}`. A CSR
 * becomes a short-lived client certificate of the caller's identity, tied to the caller's API session.
 */
import { X509Certificate } from 'node:crypto';
import { dataEnvelope } from '../../http/errors.js';
import { Errors, notFound } from '../api/errors.js';
import { listQuery, listResponse, mapResult } from '../api/list.js';
import { LIST_QUERY, type OpContext, type OpDef, op } from '../api/op.js';
import { okEmpty, okJson } from '../api/respond.js';
import { caBundle, signCsrOrRefuse } from '../auth/enrollment.js';
import { apiSessionCertificates, currentApiSessionCertificateDetail } from '../model/api-session-certificate.js';
import { createLocation, detailEnvelope, empty, listEnvelope, meta } from '../model/common.js';
import type { RowFor } from '../model/rows.js';
import { fingerprintOfDer } from '../pki/fingerprint.js';
import { s } from '../schema/s.js';
import { shortId } from '../util/ids.js';

/** How long an ephemeral certificate is valid (OpenZiti's 12 hours); it also ends with its API session. */
export const SESSION_CERT_LIFETIME_MS = 12 * 60 * 60 * 1000;
/** Bound on the certificates one API session holds at a time (more: 429 RATE_LIMITED until some are deleted). */
export const MAX_CERTIFICATES_PER_SESSION = 32;

const PATH = '/current-api-session/certificates';
const currentApiSessionCertificateCreate = s.named(
  'currentApiSessionCertificateCreate',
  s.obj({ csr: s.str() }, ['csr']),
);
const createResponse = s.named(
  'currentApiSessionCertificateCreateResponse',
  s.allOf(createLocation, s.obj({ cas: s.str(), certificate: s.str() }, ['certificate'])),
);

function mine(ctx: OpContext<unknown>): Set<string> {
  return new Set(ctx.svc.store.lookup('api-session-certificates', 'apiSessionId', ctx.caller!.session.id));
}

/** The caller's session's certificate `{id}`, or 404 (another session's does not exist for it). */
function ownCertificate(ctx: OpContext<unknown>): RowFor<'api-session-certificates'> {
  const row = ctx.svc.get('api-session-certificates', ctx.params.id!);
  if (!row || row.apiSessionId !== ctx.caller!.session.id) throw notFound('apiSessionCertificate', ctx.params.id!);
  return row;
}

export function sessionCertificateOps(): OpDef<unknown>[] {
  const base = { apis: ['client'] as const, tags: ['Current API Session'], access: 'authenticated' as const };
  return [
    op({
      ...base,
      method: 'GET',
      path: PATH,
      operationId: 'listCurrentApiSessionCertificates',
      summary: 'List the ephemeral certificates available for the current API session',
      description: "The current API session's certificates; supports filtering, sorting, and pagination.",
      query: LIST_QUERY,
      responses: {
        200: {
          description: "A list of the current API Session's certificate",
          schema: listEnvelope('listCurrentApiSessionCertificatesEnvelope', currentApiSessionCertificateDetail),
        },
      },
      handler: (ctx) =>
        mapResult(listQuery(apiSessionCertificates, ctx, mine(ctx)), (result) =>
          listResponse(
            result,
            (row) => apiSessionCertificates.renderJson(row, ctx.svc),
            apiSessionCertificates.symbolTable(ctx.svc),
          ),
        ),
    }),
    op({
      ...base,
      method: 'POST',
      path: PATH,
      operationId: 'createCurrentApiSessionCertificate',
      summary: 'Creates an ephemeral certificate for the current API Session',
      description:
        'Signs a CSR: a client certificate of the current identity, valid 12 hours and only as long as this API session.',
      body: currentApiSessionCertificateCreate,
      bodyName: 'sessionCertificate',
      responses: {
        201: {
          description: 'A response containing the certificate for the current API session',
          schema: s.named(
            'createCurrentApiSessionCertificateEnvelope',
            s.obj({ data: createResponse, meta }, ['meta', 'data']),
          ),
        },
      },
      handler: async (ctx) => {
        const { svc } = ctx;
        const signing = svc.pki?.signing;
        if (!signing) throw Errors.INVALID_ENROLLMENT_NOT_ALLOWED();
        // checked here to spare the signing, and again in apply (createSessionCertificate), where concurrent
        // requests of the session are counted
        if (mine(ctx).size >= MAX_CERTIFICATES_PER_SESSION) {
          throw Errors.RATE_LIMITED({
            field: 'csr',
            reason: `an API session holds at most ${MAX_CERTIFICATES_PER_SESSION} certificates`,
          });
        }
        const identityId = ctx.caller!.identity.id;
        const pem = await signCsrOrRefuse(signing, ctx.body.csr, {
          usage: 'client',
          commonName: identityId,
          validity_ms: SESSION_CERT_LIFETIME_MS,
        });
        const leaf = new X509Certificate(pem);
        const certificate = `${leaf.toString()}${signing.certPem.trim()}\n`;
        const id = shortId();
        const data = {
          apiSessionId: ctx.caller!.session.id,
          identityId,
          subject: leaf.subject,
          fingerprint: fingerprintOfDer(leaf.raw),
          certPem: certificate,
          validFrom: new Date(leaf.validFrom).toISOString(),
          validTo: new Date(leaf.validTo).toISOString(),
        };
        const args = { id, data, max: MAX_CERTIFICATES_PER_SESSION };
        await svc.write({ op: 'custom', name: 'createSessionCertificate', args, at: svc.nowIso() });
        const location = { _links: { self: { href: `.${PATH}/${id}` } }, id };
        return dataEnvelope({ ...location, certificate, cas: caBundle(svc) }, {}, 201);
      },
    }),
    op({
      ...base,
      method: 'GET',
      path: `${PATH}/{id}`,
      operationId: 'detailCurrentApiSessionCertificate',
      summary: 'Retrieves an ephemeral certificate',
      description: 'One certificate of the current API session.',
      responses: {
        200: {
          description: 'A detail of an ephemeral certificate',
          schema: detailEnvelope('detailCurrentApiSessionCertificateEnvelope', currentApiSessionCertificateDetail),
        },
      },
      handler: (ctx) => okJson(apiSessionCertificates.renderJson(ownCertificate(ctx), ctx.svc)),
    }),
    op({
      ...base,
      method: 'DELETE',
      path: `${PATH}/{id}`,
      operationId: 'deleteCurrentApiSessionCertificate',
      summary: 'Delete an ephemeral certificate',
      description: 'The certificate no longer logs in.',
      responses: {
        200: { description: 'The delete request was successful and the resource has been removed', schema: empty },
      },
      handler: async (ctx) => {
        const row = ownCertificate(ctx);
        const at = ctx.svc.nowIso();
        await ctx.svc.write({ op: 'delete', entity: 'api-session-certificates', id: row.id, at, ifExists: true });
        return okEmpty();
      },
    }),
  ];
}
