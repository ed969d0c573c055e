/**
 * The client API's enrollment operations (docs/enrollment.md): `POST /enroll/ott`, `POST /enroll/updb`, the
 * legacy `POST /enroll?method=…&token=…` that SDKs and routers still use, and `GET /enroll/jwks`.
 */
import type { JWK } from 'jose';
import type { HttpRequest, HttpResponse } from '../../http/types.js';
import { Errors, validationError } from '../api/errors.js';
import { type OpDef, op } from '../api/op.js';
import { ok, okEmpty } from '../api/respond.js';
import type { Services } from '../api/services.js';
import { enrollCa } from '../auth/ca-enrollment.js';
import { type EnrolledCerts, enrollOtt, enrollOttca, enrollUpdb } from '../auth/enrollment.js';
import { enrollRouter } from '../auth/router-enrollment.js';
import { password, username } from '../model/authenticator.js';
import { detailEnvelope, empty } from '../model/common.js';
import { ROUTER_ENROLL_METHOD, TRANSIT_ROUTER_ENROLL_METHOD } from '../model/router-enrollment.js';
import { enrollmentSigners } from '../pki/enrollment-jwt.js';
import { type Schema, s } from '../schema/s.js';
import { validate } from '../schema/validate.js';

const enrollmentCerts = s.named('enrollmentCerts', s.obj({ ca: s.str(), cert: s.str(), serverCert: s.str() }));
export const enrollmentCertsEnvelope = detailEnvelope('enrollmentCertsEnvelope', enrollmentCerts);
const ottEnrollmentRequest = s.named('ottEnrollmentRequest', s.obj({ clientCsr: s.str(), token: s.str() }));
const updbCredentials = s.named('updbCredentials', s.obj({ password, username }));
const jwks = s.named('jwks', s.obj({ keys: s.arr(s.obj({})) }));

export const PEM_MEDIA_TYPE = 'application/x-pem-file';
/** What the legacy `POST /enroll` accepts: a PEM CSR as text, or JSON (updb credentials), as OpenZiti's spec says. */
const LEGACY_CONSUMES = ['application/pkcs7', 'application/json', PEM_MEDIA_TYPE, 'text/plain'] as const;

/** Whether the client asked for JSON (`Accept` naming application/json); otherwise the legacy answer is PEM. */
function wantsJson(req: HttpRequest): boolean {
  return (req.headers.accept ?? '').toLowerCase().includes('application/json');
}

function certsResponse(req: HttpRequest, certs: EnrolledCerts): HttpResponse {
  if (wantsJson(req)) return ok(certs);
  return { status: 200, headers: { 'content-type': PEM_MEDIA_TYPE }, body: certs.cert };
}

/** The legacy form's JSON body, checked against `schema` (400 COULD_NOT_VALIDATE naming `name` when absent). */
function legacyJsonBody<T>(req: HttpRequest, schema: Schema<T>, name: string): T {
  const body = req.json();
  if (body === undefined) throw validationError({ field: name, reason: 'body is required', value: null });
  const err = validate(schema, body);
  if (err) throw validationError(err);
  return body as T;
}

/**
 * The identity name a CA auto-enrollment asks for: a JSON body's string `name` (sdk-golang sends `{"name": …}` with
 * `--idname`), else '' — also for a body that is not such JSON, which OpenZiti ignores as well.
 */
function requestedNameOf(req: HttpRequest): string {
  try {
    const body = req.json<unknown>();
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return '';
    const name = (body as Record<string, unknown>).name;
    return typeof name === 'string' ? name.trim() : '';
  } catch {
    return '';
  }
}

/** What routers send on the legacy form (OpenZiti's router enroller: `certCsr`, not `clientCsr`). */
const legacyRouterEnroll = s.obj({ certCsr: s.str(), serverCertCsr: s.str() });

/** The keys this node signs enrollment JWTs with (enrollmentSigners): its API certificate's, the controller key. */
function enrollmentJwks(svc: Services): { keys: JWK[] } {
  return { keys: enrollmentSigners(svc).map((k) => k.publicJwk) };
}

export function enrollOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'POST',
      path: '/enroll',
      apis: ['client'],
      operationId: 'enroll',
      tags: ['Enroll'],
      summary: 'Enroll an identity via one-time-token',
      description:
        'present a OTT and CSR to receive a long-lived client certificate (PEM, or JSON when Accept asks for it)',
      access: 'none',
      catchUpFirst: true,
      consumes: LEGACY_CONSUMES,
      produces: ['application/json', PEM_MEDIA_TYPE],
      query: [
        { name: 'token', type: 'string' },
        { name: 'method', type: 'string' },
      ],
      responses: {
        200: {
          description: 'A response containing and identities client certificate chains',
          schema: enrollmentCertsEnvelope,
        },
      },
      handler: async ({ req, svc }) => {
        const token = req.query.get('token');
        const method = req.query.get('method');
        switch (method) {
          case 'ott':
            return certsResponse(req, await enrollOtt(svc, token, req.body.toString('utf8')));
          case 'updb':
            await enrollUpdb(svc, token, legacyJsonBody(req, updbCredentials, 'updbCredentials'));
            return okEmpty();
          case ROUTER_ENROLL_METHOD:
          case TRANSIT_ROUTER_ENROLL_METHOD: {
            // a router method answers JSON whatever Accept says (OpenZiti: only ott may answer PEM)
            const b = legacyJsonBody(req, legacyRouterEnroll, 'body');
            return ok(await enrollRouter(svc, method, token, b.serverCertCsr, b.certCsr));
          }
          case 'ottca':
            await enrollOttca(svc, token, req.peerCertificates);
            return okEmpty();
          case 'ca':
            await enrollCa(svc, req.peerCertificates, requestedNameOf(req));
            return okEmpty();
          default:
            throw Errors.INVALID_ENROLL_METHOD();
        }
      },
    }),
    op({
      method: 'POST',
      path: '/enroll/ott',
      apis: ['client'],
      operationId: 'enrollOtt',
      tags: ['Enroll'],
      summary: 'Enroll an identity via one-time-token',
      description: 'Enroll an identity via a one-time-token and a PEM encoded CSR.',
      access: 'none',
      catchUpFirst: true,
      body: ottEnrollmentRequest,
      bodyName: 'ottEnrollmentRequest',
      responses: {
        200: {
          description: 'A response containing and identities client certificate chains',
          schema: enrollmentCertsEnvelope,
        },
      },
      handler: async ({ body, svc }) => ok(await enrollOtt(svc, body.token, body.clientCsr)),
    }),
    op({
      method: 'POST',
      path: '/enroll/ca',
      apis: ['client'],
      operationId: 'enrollCa',
      tags: ['Enroll'],
      summary: 'Enroll an identity with a pre-exchanged certificate',
      description:
        'For CA auto enrollment: the client presents a TLS client certificate signed by a verified CA with auto-enrollment; an identity is created for it.',
      access: 'none',
      catchUpFirst: true,
      responses: { 200: { description: 'Base empty response', schema: empty } },
      handler: async ({ req, svc }) => {
        await enrollCa(svc, req.peerCertificates, requestedNameOf(req));
        return okEmpty();
      },
    }),
    op({
      method: 'POST',
      path: '/enroll/ottca',
      apis: ['client'],
      operationId: 'enrollOttCa',
      tags: ['Enroll'],
      summary: 'Enroll an identity via one-time-token with a pre-exchanged certificate',
      description:
        'Enroll an identity with a one-time-token and the TLS client certificate, issued by the CA the enrollment names.',
      access: 'none',
      catchUpFirst: true,
      body: ottEnrollmentRequest,
      bodyName: 'ottEnrollmentRequest',
      responses: { 200: { description: 'Base empty response', schema: empty } },
      handler: async ({ req, body, svc }) => {
        await enrollOttca(svc, body.token, req.peerCertificates);
        return okEmpty();
      },
    }),
    op({
      method: 'POST',
      path: '/enroll/updb',
      apis: ['client'],
      operationId: 'enrollUpdb',
      tags: ['Enroll'],
      summary: 'Enroll an identity via one-time-token',
      description: 'Enrolls an identity via a one-time-token to establish an initial username and password combination',
      access: 'none',
      catchUpFirst: true,
      body: updbCredentials,
      bodyName: 'updbCredentials',
      query: [{ name: 'token', type: 'string', required: true }],
      responses: { 200: { description: 'Base empty response', schema: empty } },
      handler: async ({ req, body, svc }) => {
        await enrollUpdb(svc, req.query.get('token'), body);
        return okEmpty();
      },
    }),
    op({
      method: 'GET',
      path: '/enroll/jwks',
      apis: ['client'],
      operationId: 'getEnrollmentJwks',
      tags: ['Enroll'],
      summary: 'List JSON Web Keys associated with enrollment',
      description: 'The public keys that sign enrollment JWTs.',
      access: 'none',
      responses: { 200: { description: 'A JWKS response for enrollment.', schema: jwks } },
      // OpenZiti answers the JWKS itself, not in an envelope
      handler: ({ svc }) => ({
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(enrollmentJwks(svc)),
      }),
    }),
  ];
}
