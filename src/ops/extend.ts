/**
 * Extending a network-issued certificate (docs/enrollment.md, "Extending a certificate"): an admin may request it
 * (`POST /authenticators/{id}/request-extend`; cert logins then carry `ziti-authenticator-extend-requested`), the
 * identity sends a CSR (`…/extend`) and gets a new certificate, which replaces the old one once the identity shows
 * it back (`…/extend-verify`).
 */
import { X509Certificate } from 'node:crypto';
import { Errors } from '../api/errors.js';
import { type ApiName, type OpDef, op } from '../api/op.js';
import { ok, okEmpty } from '../api/respond.js';
import { clientChainOf } from '../auth/chain-cache.js';
import { caBundle, signCsrOrRefuse } from '../auth/enrollment.js';
import { ownAuthenticator } from '../model/authenticator.js';
import { detailEnvelope, empty } from '../model/common.js';
import { stillEquals } from '../model/preconditions.js';
import type { RowFor } from '../model/rows.js';
import { fingerprintOfDer, parseSinglePem } from '../pki/fingerprint.js';
import { s } from '../schema/s.js';

const BOTH: ApiName[] = ['client', 'management'];
const EXTEND_REQUESTED_HEADER = 'ziti-authenticator-extend-requested';

const requestExtendAuthenticator = s.named('requestExtendAuthenticator', s.obj({ rollKeys: s.bool() }));
const identityExtendEnrollmentRequest = s.named(
  'identityExtendEnrollmentRequest',
  s.obj({ clientCertCsr: s.str() }, ['clientCertCsr']),
);
const identityExtendValidateEnrollmentRequest = s.named(
  'identityExtendValidateEnrollmentRequest',
  s.obj({ clientCert: s.str() }, ['clientCert']),
);
const identityExtendCerts = s.named('identityExtendCerts', s.obj({ ca: s.str(), clientCert: s.str() }));

/** Response headers of a cert login whose authenticator has an extension requested (OpenZiti's, REFERENCE §1). */
export function extendHeaders(authenticator: RowFor<'authenticators'>): Record<string, string> {
  return authenticator.isExtendRequested === true ? { [EXTEND_REQUESTED_HEADER]: 'true' } : {};
}

/** A network-issued cert authenticator; anything else cannot be extended (409 CAN_NOT_UPDATE_AUTHENTICATOR). */
function extendable(row: RowFor<'authenticators'>): RowFor<'authenticators'> {
  if (row.method !== 'cert' || row.isIssuedByNetwork !== true) {
    throw Errors.CAN_NOT_UPDATE_AUTHENTICATOR({
      field: 'method',
      reason: 'only certificates issued by this network can be extended',
      value: String(row.method),
    });
  }
  return row;
}

/**
 * The request shows the authenticator's certificate in force as its TLS client certificate (OpenZiti's
 * ExtendCertForIdentity): a new certificate is signed only for the holder of the current one's key, not for any
 * session of the identity (a password login, a leaked session token). The leaf only, as certificate logins read it
 * (clientChainOf): the handshake proves the key of the leaf, not of the certificates sent behind it. 401
 * UNAUTHORIZED otherwise.
 */
function requirePresented(row: RowFor<'authenticators'>, peerCertificates: Buffer[] | undefined): void {
  if (clientChainOf(peerCertificates)?.fingerprint !== row.fingerprint) throw Errors.UNAUTHORIZED();
}

/** The SPKI of a PEM certificate's key, to tell whether an extension rolled the key. */
function publicKeyOf(certPem: string): string {
  return new X509Certificate(certPem).publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
}

export function extendOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'POST',
      path: '/authenticators/{id}/request-extend',
      apis: ['management'],
      operationId: 'requestExtendAuthenticator',
      tags: ['Authenticator'],
      summary:
        'Allows the current identity to recieve a new certificate associated with a certificate based authenticator',
      description:
        'Flags a certificate authenticator so that its identity is asked to extend (and with rollKeys re-key) it.',
      access: 'admin',
      body: requestExtendAuthenticator,
      bodyName: 'requestExtendAuthenticator',
      bodyRequired: false,
      responses: { 200: { description: 'Base empty response', schema: empty } },
      handler: async ({ params, body, svc }) => {
        const row = extendable(svc.require('authenticators', params.id!));
        const at = svc.nowIso();
        const set = { isExtendRequested: true, extendRequestedAt: at, isKeyRollRequested: body?.rollKeys === true };
        await svc.write({ op: 'update', entity: 'authenticators', id: row.id, set, at });
        return okEmpty();
      },
    }),
    op({
      method: 'POST',
      path: '/current-identity/authenticators/{id}/extend',
      apis: BOTH,
      operationId: 'extendCurrentIdentityAuthenticator',
      tags: ['Current API Session', 'Enroll', 'Extend Enrollment'],
      summary:
        'Allows the current identity to recieve a new certificate associated with a certificate based authenticator',
      description:
        'Signs a CSR for a new certificate; it replaces the current one once verified (extend-verify). The request ' +
        "must present the authenticator's current certificate as its TLS client certificate.",
      access: 'authenticated',
      body: identityExtendEnrollmentRequest,
      bodyName: 'extend',
      responses: {
        200: {
          description: "A response containg the identity's new certificate",
          schema: detailEnvelope('identityExtendEnrollmentEnvelope', identityExtendCerts),
        },
      },
      handler: async ({ params, body, caller, svc, req }) => {
        const identityId = caller!.identity.id;
        const row = extendable(ownAuthenticator(svc, identityId, params.id!));
        requirePresented(row, req.peerCertificates);
        const signing = svc.pki?.signing;
        if (!signing) throw Errors.INVALID_ENROLLMENT_NOT_ALLOWED();
        const certPem = await signCsrOrRefuse(signing, body.clientCertCsr, { usage: 'client', commonName: identityId });
        const leaf = new X509Certificate(certPem);
        const set = { unverifiedCertPem: leaf.toString(), unverifiedFingerprint: fingerprintOfDer(leaf.raw) };
        // applies only while the certificate shown is still the one in force: replaced meanwhile (an extension
        // verified, the key rolled away from it), it proves nothing any more (401, as the check above)
        const expect = [
          stillEquals(
            'authenticators',
            row.id,
            'fingerprint',
            row.fingerprint,
            'the certificate shown is no longer the one in force',
            'UNAUTHORIZED',
          ),
        ];
        await svc.write({ op: 'update', entity: 'authenticators', id: row.id, set, at: svc.nowIso(), expect });
        return ok({ ca: caBundle(svc), clientCert: `${leaf.toString()}${signing.certPem.trim()}\n` });
      },
    }),
    op({
      method: 'POST',
      path: '/current-identity/authenticators/{id}/extend-verify',
      apis: BOTH,
      operationId: 'extendVerifyCurrentIdentityAuthenticator',
      tags: ['Current API Session', 'Enroll', 'Extend Enrollment'],
      summary: 'Allows the current identity to validate reciept of a new client certificate',
      description: "The certificate extend returned, shown back: it replaces the authenticator's certificate.",
      access: 'authenticated',
      body: identityExtendValidateEnrollmentRequest,
      bodyName: 'extend',
      responses: { 200: { description: 'Base empty response', schema: empty } },
      handler: async ({ params, body, caller, svc }) => {
        const row = extendable(ownAuthenticator(svc, caller!.identity.id, params.id!));
        const cert = parseSinglePem(
          body.clientCert.split('-----END CERTIFICATE-----')[0] + '-----END CERTIFICATE-----',
        );
        const fingerprint = cert ? fingerprintOfDer(cert.raw) : null;
        if (!row.unverifiedFingerprint || fingerprint !== row.unverifiedFingerprint) throw Errors.INVALID_CLIENT_CERT();
        const rolled =
          (await publicKeyOf(row.certPem as string)) !== (await publicKeyOf(row.unverifiedCertPem as string));
        const set = {
          certPem: row.unverifiedCertPem,
          fingerprint,
          unverifiedCertPem: null,
          unverifiedFingerprint: null,
          isExtendRequested: false,
          isKeyRollRequested: false,
          extendRequestedAt: null,
          lastExtendRolledKeys: rolled,
        };
        // applies only to the pending certificate that was checked (another extend meanwhile: refused)
        const expect = [
          stillEquals(
            'authenticators',
            row.id,
            'unverifiedFingerprint',
            fingerprint,
            'another extension replaced the pending certificate',
            // as the check above answers a certificate that is not the pending one
            'INVALID_CLIENT_CERT',
          ),
        ];
        await svc.write({ op: 'update', entity: 'authenticators', id: row.id, set, at: svc.nowIso(), expect });
        return okEmpty();
      },
    }),
  ];
}
