/** `POST /cas/{id}/verify` and `GET /cas/{id}/jwt` (management; docs/enrollment.md, "CAs"). */
import { X509Certificate } from 'node:crypto';
import { Errors } from '../api/errors.js';
import { type OpDef, op } from '../api/op.js';
import { okEmpty } from '../api/respond.js';
import { empty } from '../model/common.js';
import { signCaJwt } from '../pki/enrollment-jwt.js';
import { commonNameOf, parseSinglePem } from '../pki/fingerprint.js';

const PEM_TYPES = ['text/plain', 'application/x-pem-file'] as const;

/** Whether `cert` is signed by `ca` and valid at `nowMs`. */
function issuedBy(cert: X509Certificate, ca: X509Certificate, nowMs: number): boolean {
  if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return false;
  // both valid now, the CA too: OpenZiti verifies with Go's x509.Verify, the CA as the root, which checks each
  return [cert, ca].every((c) => Date.parse(c.validFrom) <= nowMs && nowMs <= Date.parse(c.validTo));
}

export function caOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'POST',
      path: '/cas/{id}/verify',
      apis: ['management'],
      operationId: 'verifyCa',
      tags: ['Certificate Authority'],
      summary: 'Verify a CA',
      description:
        'Allows a CA to become verified by submitting a certificate in PEM format that has been signed by the target CA. The common name on the certificate must match the verificationToken property of the CA.',
      access: 'admin',
      permission: 'ca',
      permissionAction: 'update',
      consumes: PEM_TYPES,
      responses: { 200: { description: 'Base empty response', schema: empty } },
      handler: async ({ req, params, svc }) => {
        const row = svc.require('cas', params.id!);
        if (row.isVerified === true) throw Errors.CA_ALREADY_VERIFIED();
        const cert = parseSinglePem(req.body.toString('utf8'));
        if (!cert) throw Errors.COULD_NOT_PARSE_PEM_BLOCK();
        if (!issuedBy(cert, new X509Certificate(row.certPem as string), svc.clock.now())) {
          throw Errors.CERT_FAILED_VALIDATION();
        }
        const cn = commonNameOf(cert.raw);
        if (cn !== row.verificationToken) throw Errors.INVALID_COMMON_NAME();
        // a CA's certificate and token never change, so a concurrent verify can only set the same flag
        await svc.write({ op: 'update', entity: 'cas', id: row.id, set: { isVerified: true }, at: svc.nowIso() });
        return okEmpty();
      },
    }),
    op({
      method: 'GET',
      path: '/cas/{id}/jwt',
      apis: ['management'],
      operationId: 'getCaJwt',
      tags: ['Certificate Authority'],
      summary: 'Retrieve the enrollment JWT for a CA',
      description: 'For CA auto enrollment, the enrollment JWT is static and provided on each CA resource.',
      access: 'admin',
      permission: 'ca',
      produces: ['application/jwt'],
      responses: { 200: { description: 'The result is the JWT text to validate the CA' } },
      handler: async ({ params, svc }) => {
        const row = svc.require('cas', params.id!);
        const jwt = await signCaJwt(svc, { id: row.id, createdAt: row.createdAt });
        return { status: 200, headers: { 'content-type': 'application/jwt' }, body: jwt };
      },
    }),
  ];
}
