/**
 * Checks any HTTP response of the API against OpenZiti's published spec: the shared `call()` helper passes every
 * response through `checkResponse`, so every test that talks HTTP to an operation the spec declares is a
 * conformance test too. The concrete URL is mapped to the spec's path template (`/identities/abc` →
 * `/identities/{id}`); URLs that name no spec operation (unknown paths, wrong methods, Keel's own endpoints) are
 * left alone.
 */
import {
  responseDefinition,
  responseStatuses,
  SPEC_AVAILABLE,
  type SpecName,
  schemaValidator,
  specOperations,
} from './spec.js';

const BASES: [string, SpecName][] = [
  ['/edge/client/v1', 'client'],
  ['/edge/management/v1', 'management'],
];

/**
 * Statuses Keel returns for an operation although the spec does not declare them, each with its reason. The key
 * is `<status> <METHOD> <template>`, or `<status> *` for every operation. Anything else undeclared fails.
 */
export const UNDECLARED_OK: Record<string, string> = {
  '409 DELETE /auth-policies/{id}': 'a policy identities use (REFERENCE §7: CAN_NOT_DELETE_REFERENCED_ENTITY)',
  '409 DELETE /external-jwt-signers/{id}': 'a signer an auth policy names (CAN_NOT_DELETE_REFERENCED_ENTITY)',
  '400 POST /identities/{id}/disable': 'a body that does not validate (the controller answers COULD_NOT_VALIDATE)',
  '400 POST /current-identity/mfa/verify': 'MFA_INVALID_TOKEN: a wrong code (controller apierror)',
  '409 POST /current-identity/mfa/verify': 'MFA_EXISTS: the enrollment is already verified',
  '400 GET /current-identity/mfa/recovery-codes': 'MFA_INVALID_TOKEN: a wrong code',
  '400 POST /current-identity/mfa/recovery-codes': 'MFA_INVALID_TOKEN: a wrong code',
  '400 DELETE /current-identity/mfa': 'MFA_INVALID_TOKEN: a wrong code',
  '400 POST /authenticate/mfa': 'MFA_INVALID_TOKEN: a wrong code',
  '409 POST /authenticate/mfa': 'MFA_NOT_ENROLLED: the identity has no verified MFA',
  '400 POST /current-api-session/totp-token': 'MFA_INVALID_TOKEN: a wrong code',
  '409 POST /current-api-session/totp-token': 'MFA_NOT_ENROLLED: the identity has no verified MFA',
  '401 GET /current-identity/mfa/qr-code': 'no session (the spec declares only 404 for it)',
  '404 GET /config-types/{id}/configs': 'unknown config type: association lists load their parent first (404)',
  '404 GET /services/{id}/configs': 'unknown service: association lists load their parent first (404)',
  '404 GET /service-policies/{id}/identities': 'unknown policy: association lists load their parent first (404)',
  '404 GET /service-policies/{id}/services': 'unknown policy: association lists load their parent first (404)',
  '404 GET /services/{id}/identities': 'unknown service: association lists load their parent first (404)',
  '404 GET /services/{id}/service-policies': 'unknown service: association lists load their parent first (404)',
  '404 GET /configs/{id}/services': 'unknown config: association lists load their parent first (404)',
  '400 GET /identities/{id}/services': 'policyType other than dial or bind (a field error, as a list parameter)',
  '404 DELETE /sessions/{id}':
    "unknown session, or another identity's: the delete loads it first (OpenZiti's DeleteForIdentity: not found)",
  '401 DELETE /posture-checks/{id}': 'no session or no permission (the spec declares 403 for this one operation only)',
  '404 GET /service-policies/{id}/posture-checks': 'unknown policy: association lists load their parent first (404)',
  '409 POST /sessions':
    'INVALID_POSTURE: no granting policy has its posture checks passing (errors.go: 409, the spec omits it)',
  '409 POST /authenticators': 'MAX_AUTHENTICATOR_METHODS_REACHED / CERT_IN_USE (controller apierror)',
  '409 POST /enroll/ott':
    'MAX_AUTHENTICATOR_METHODS_REACHED (the identity has a cert authenticator) or INVALID_ENROLLMENT_NOT_ALLOWED (no signing CA on this node), as the legacy POST /enroll declares',
  '409 POST /enroll/updb': 'MAX_AUTHENTICATOR_METHODS_REACHED (the identity has a updb authenticator)',
  '400 POST /authenticators/{id}/re-enroll':
    'a missing or past expiresAt (COULD_NOT_VALIDATE): the spec lists no 400 although the body is validated',
  '409 POST /authenticators/{id}/re-enroll':
    'ENROLLMENT_EXISTS: the identity already has an outstanding enrollment of the method the authenticator reverts to',
  '400 POST /current-identity/authenticators/{id}/extend':
    'a CSR that does not parse or verify (COULD_NOT_PROCESS_CSR); the spec lists only 200 and 401',
  '404 POST /current-identity/authenticators/{id}/extend': 'not an authenticator of the caller (NOT_FOUND)',
  '409 POST /current-identity/authenticators/{id}/extend':
    'CAN_NOT_UPDATE_AUTHENTICATOR: only certificates this network issued can be extended',
  '404 POST /current-identity/authenticators/{id}/extend-verify': 'not an authenticator of the caller (NOT_FOUND)',
  '400 POST /current-identity/authenticators/{id}/extend-verify':
    'INVALID_CLIENT_CERT: not the certificate extend returned; the spec lists only 200 and 401',
  '409 POST /authenticators/{id}/request-extend':
    'CAN_NOT_UPDATE_AUTHENTICATOR: only certificates this network issued can be extended',
  '409 POST /enroll/ca': 'CERT_IN_USE: the certificate already belongs to an identity (controller apierror, 409)',
  '409 POST /cas/{id}/verify': 'CA_ALREADY_VERIFIED (controller apierror, 409), which the spec does not list',
  '404 POST /enrollments/{id}/refresh': 'unknown (or used up) enrollment: NOT_FOUND, as every detail route answers',
  '404 GET /specs/{id}': 'unknown spec id (spec_router.go: RespondWithNotFound)',
  '404 GET /specs/{id}/spec': 'unknown spec id (spec_router.go: RespondWithNotFound)',
  '404 GET /services/{id}/terminators':
    'unknown service, or (client) one the caller may not use: the list loads its parent first (ReadForIdentity: not found)',
  '404 DELETE /routers/{id}': 'unknown router: the delete loads it first (NOT_FOUND), as deleteTransitRouter declares',
  '501 PUT /services/{id}': 'client API: OpenZiti registers no handler, go-swagger answers NotImplemented (501)',
  '501 PATCH /services/{id}': 'client API: OpenZiti registers no handler, go-swagger answers NotImplemented (501)',
  '501 DELETE /services/{id}': 'client API: OpenZiti registers no handler, go-swagger answers NotImplemented (501)',
  '409 PUT /current-identity/authenticators/{id}':
    'CAN_NOT_UPDATE_AUTHENTICATOR: a cert authenticator has no username or password (controller apierror, 409)',
  '409 PATCH /current-identity/authenticators/{id}':
    'CAN_NOT_UPDATE_AUTHENTICATOR: a cert authenticator has no username or password (controller apierror, 409)',
  '404 DELETE /controller-settings/{id}/effective':
    'no settings of that controller: NOT_FOUND, as the detail answers (the spec lists no 404 for the delete)',
  '408 *':
    'the HTTP layer cuts a request whose headers or body arrive too slowly (REQUEST_TIMEOUT) before any operation',
  '414 *': 'the HTTP layer refuses a request target over 64 KiB (URI_TOO_LONG) before any operation',
  '415 *':
    'a body that is not application/json (UNSUPPORTED_MEDIA, as go-openapi answers; OpenZiti turns it into a 500)',
  '431 *': 'the node engine refuses a request line plus headers over 80 KiB before any operation',
  '413 *': 'the 1 MiB body limit of the HTTP layer applies before any operation (REQUEST_ENTITY_TOO_LARGE)',
  '429 *': 'the HTTP layer refuses requests beyond --max-connections before any operation (SERVER_TOO_MANY_REQUESTS)',
  '404 DELETE /current-api-session/certificates/{id}':
    "unknown certificate, or another API session's: the delete loads it first (OpenZiti: RespondWithNotFound)",
};

/**
 * Successful responses whose body is not the schema the spec declares, each with its reason.
 */
export const BODY_EXEMPT: Record<string, string> = {
  '200 GET /current-identity/mfa/qr-code': 'a PNG image (image/png), as the spec produces, not JSON',
  '200 GET /.well-known/est/cacerts': 'a PKCS#7 certs-only store in base64 (application/pkcs7-mime), not JSON',
  '200 GET /cas/{id}/jwt': 'the JWT as text (application/jwt): the spec declares `type: string` without an envelope',
  '200 GET /specs/{id}/spec':
    "the document itself, as OpenZiti's spec_router.go DetailBody writes it (Produce(spec.body)), not the envelope around a string its spec declares",
};

/**
 * Responses the spec declares with another operation's schema by mistake, validated against the right one (each
 * with the reason). OpenZiti's server does not validate its responses, so it sends the right shape.
 */
export const RESPONSE_ERRATA: Record<string, { definition: string; reason: string }> = {
  'GET /edge-routers/{id}/service-edge-router-policies': {
    definition: 'listServiceEdgeRouterPoliciesEnvelope',
    reason: 'the spec names listServicePoliciesEnvelope; the handler lists service edge router policies',
  },
};

/** `<spec> <METHOD> <template>` of every operation whose response was checked. */
export const exercised = new Set<string>();
/** `<spec> <METHOD> <template> <status>`: conformance is tracked per operation and status. */
export const exercisedStatuses = new Set<string>();
/** Undeclared statuses seen (allow-listed ones; others fail at once). */
export const undeclared = new Set<string>();

let partial = false;

/**
 * A test file starts (test/support/per-file.ts): what was exercised is forgotten, and whether all its tests run is
 * noted (`partialRun`).
 */
export function startFile(everyTestRuns: boolean): void {
  exercised.clear();
  exercisedStatuses.clear();
  undeclared.clear();
  partial = !everyTestRuns;
}

/** Whether this file runs only some of its tests (filtered by name): its coverage checks have nothing to say then. */
export function partialRun(): boolean {
  return partial;
}

interface Template {
  method: string;
  template: string;
  regex: RegExp;
  params: number;
}
const templates = new Map<SpecName, Template[]>();

function templatesOf(spec: SpecName): Template[] {
  let list = templates.get(spec);
  if (list) return list;
  list = specOperations(spec).map(({ method, path }) => ({
    method,
    template: path,
    regex: new RegExp(`^${path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
    params: (path.match(/\{/g) ?? []).length,
  }));
  // a literal segment wins over a parameter (`/identities/x` vs `/identity-types`): fewer parameters first
  list.sort((a, b) => a.params - b.params);
  templates.set(spec, list);
  return list;
}

/** The spec operation a request names, or null. Follows the server's aliases: `/` and `/version` → client. */
export function specOperationOf(method: string, url: string): { spec: SpecName; template: string } | null {
  let path = new URL(url).pathname;
  if (path === '/' || path === '/version') path = `/edge/client/v1/version`;
  for (const [base, spec] of BASES) {
    if (path !== base && !path.startsWith(`${base}/`)) continue;
    const rest = path.slice(base.length) || '/';
    const found = templatesOf(spec).find((t) => t.method === method && t.regex.test(rest));
    return found ? { spec, template: found.template } : null;
  }
  return null;
}

export interface CheckedResponse {
  status: number;
  body: unknown;
  text: string;
}

/**
 * Checks one response against the spec (a no-op for URLs that name no spec operation): its status is one the
 * spec declares for the operation (or is allow-listed above), and its body validates against the schema declared
 * for that status (errors against `apiErrorEnvelope`). Throws with the details otherwise.
 */
export function checkResponse(method: string, url: string, res: CheckedResponse): void {
  if (!SPEC_AVAILABLE) return;
  const op = specOperationOf(method.toUpperCase(), url);
  if (!op) return;
  const { spec, template } = op;
  const key = `${res.status} ${method} ${template}`;
  exercised.add(`${spec} ${method} ${template}`);
  exercisedStatuses.add(`${spec} ${method} ${template} ${res.status}`);
  const declared = responseStatuses(spec, method, template);
  if (!declared.includes(res.status)) {
    if (!UNDECLARED_OK[key] && !UNDECLARED_OK[`${res.status} *`]) {
      throw new Error(`${spec}: ${key} is not a status the spec declares (${declared.join(', ')}): ${res.text}`);
    }
    undeclared.add(key);
  }
  if (BODY_EXEMPT[key]) return;
  const definition =
    res.status >= 400
      ? 'apiErrorEnvelope'
      : (RESPONSE_ERRATA[`${method} ${template}`]?.definition ??
        responseDefinition(spec, method, template, res.status));
  if (definition === null) {
    throw new Error(`${spec}.yml declares no ${res.status} response with a schema for ${method} ${template}`);
  }
  const errors = schemaValidator(spec, definition)(res.body);
  if (errors !== null) {
    throw new Error(
      `${spec}: ${method} ${url} → ${res.status} does not match ${definition}:\n${errors}\nbody: ${res.text.slice(0, 2000)}`,
    );
  }
}
