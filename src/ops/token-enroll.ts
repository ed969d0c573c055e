/**
 * `POST /enroll/token` (token enrollment with an external JWT signer's token, src/auth/token-enrollment.ts) and
 * `POST /enroll/challenge` (the controller signs a client's nonce with an enrollment key, so the client can check
 * it talks to the network that issued its enrollment JWT), client API, no session.
 */
import { sign } from 'node:crypto';
import { Errors } from '../api/errors.js';
import { type OpDef, op } from '../api/op.js';
import { ok } from '../api/respond.js';
import type { Services } from '../api/services.js';
import { caBundle } from '../auth/enrollment.js';
import { enrollToken } from '../auth/token-enrollment.js';
import { enrollmentSigners } from '../pki/enrollment-jwt.js';
import { s } from '../schema/s.js';
import { enrollmentCertsEnvelope } from './enroll.js';

const tokenEnrollmentRequest = s.named('tokenEnrollmentRequest', s.obj({ clientCsr: s.str() }));
const nonceChallenge = s.named(
  'nonceChallenge',
  s.obj({ keyId: s.str(), nonce: s.str({ format: 'uuid' }) }, ['nonce', 'keyId']),
);
const nonceSignature = s.named(
  'nonceSignature',
  s.obj({ algorithm: s.str(), caPool: s.str(), kid: s.str(), signature: s.str() }, [
    'signature',
    'algorithm',
    'kid',
    'caPool',
  ]),
);

/**
 * What the key signs: a UUID only. The keys also sign enrollment and network JWTs, whose signing input is
 * `<header>.<payload>`, and the API certificate's key signs TLS handshakes (a binary input of 64 bytes or more, or
 * TLS 1.3's 64 spaces and a context string): a nonce of any other text would make this operation an oracle that
 * signs forged JWTs or handshakes. A 36-character UUID is neither.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The nonce signed with the enrollment key `kid` (enrollmentSigners: JOSE's signature form for its algorithm, r‖s
 * for ECDSA, base64url); 400 on `keyId` otherwise.
 */
function signNonce(svc: Services, kid: string, nonce: string) {
  // the request schema's format uuid also admits a `urn:uuid:` prefix: this check is the rule, answered as the
  // schema's refusal
  if (!UUID.test(nonce)) throw Errors.COULD_NOT_VALIDATE({ field: 'nonce', reason: 'must be a UUID', value: nonce });
  const signer = enrollmentSigners(svc).find((k) => k.kid === kid);
  if (!signer) throw Errors.COULD_NOT_VALIDATE({ field: 'keyId', reason: 'unknown key id', value: kid });
  const data = Buffer.from(nonce, 'utf8');
  const signature =
    signer.alg === 'EdDSA'
      ? sign(null, data, signer.key)
      : sign(HASH_OF[signer.alg] ?? 'sha256', data, { key: signer.key, dsaEncoding: 'ieee-p1363' });
  return { signature: signature.toString('base64url'), algorithm: signer.alg, kid, caPool: caBundle(svc) };
}

/** The hash each JOSE algorithm signs with. */
const HASH_OF: Record<string, string> = { RS256: 'sha256', ES256: 'sha256', ES384: 'sha384', ES512: 'sha512' };

export function tokenEnrollOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'POST',
      path: '/enroll/token',
      apis: ['client'],
      operationId: 'enrollToken',
      tags: ['Enroll'],
      summary: 'Enroll an identity with a token from an external JWT signer',
      description:
        'A JWT of an external JWT signer (Authorization: Bearer) that allows enrollment creates an identity; with a CSR it also gets a client certificate.',
      access: 'none',
      catchUpFirst: true,
      body: tokenEnrollmentRequest,
      bodyName: 'tokenEnrollmentRequest',
      bodyRequired: false,
      query: [],
      responses: {
        200: {
          description: 'A response containing and identities client certificate chains',
          schema: enrollmentCertsEnvelope,
        },
      },
      handler: async ({ req, body, svc }) => ok(await enrollToken(svc, req.headers, body?.clientCsr)),
    }),
    op({
      method: 'POST',
      path: '/enroll/challenge',
      apis: ['client'],
      operationId: 'enrollmentChallenge',
      tags: ['Enroll'],
      summary:
        'Allows verification of a controller or cluster of controllers as being the valid target for enrollment.',
      description:
        'Signs a nonce (a UUID) with the enrollment key named by keyId (from /enroll/jwks or the enrollment JWT).',
      access: 'none',
      body: nonceChallenge,
      bodyName: 'nonce',
      responses: { 200: { description: 'A nonce challenge response.', schema: nonceSignature } },
      // OpenZiti's spec answers the signature itself, not in an envelope
      handler: ({ body, svc }) => ({
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(signNonce(svc, body.keyId, body.nonce)),
      }),
    }),
  ];
}
