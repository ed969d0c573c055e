import { expect } from 'vitest';
import { call, type Res } from './server.js';
import { responseDefinition, responseStatuses, SPEC_AVAILABLE, type SpecName, schemaValidator } from './spec.js';

const BASES: Record<SpecName, string> = { client: '/edge/client/v1', management: '/edge/management/v1' };

/**
 * Error statuses OpenZiti's controller returns for an operation although the spec does not list them, each with
 * the reason. Anything else undeclared fails the check.
 */
const UNDECLARED_OK: Record<string, string> = {
  '409 POST /authenticators': 'MAX_AUTHENTICATOR_METHODS_REACHED / CERT_IN_USE (controller apierror)',
  '404 GET /specs/{id}': 'unknown spec id (spec_router.go: RespondWithNotFound)',
  '409 DELETE /auth-policies/{id}': 'a policy identities use (REFERENCE §7: CAN_NOT_DELETE_REFERENCED_ENTITY)',
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
};

/**
 * Operations whose conformance calls live in their own test file (by path): the main conformance suite leaves
 * them to that file, which checks that it calls every one of them.
 */
export const COVERED_IN_OWN_FILES: { file: string; paths: RegExp }[] = [
  { file: 'test/api/configs.test.ts', paths: /^\/config(s|-types)(\/|$)/ },
  { file: 'test/api/auth-policies.test.ts', paths: /^\/auth-policies(\/|$)/ },
  {
    file: 'test/api/mfa.test.ts',
    paths: /^\/(current-identity\/mfa|authenticate\/mfa|current-api-session\/totp-token|identities\/\{id\}\/mfa)/,
  },
  { file: 'test/api/lockout.test.ts', paths: /^\/identities\/\{id\}\/(disable|enable)$/ },
];

export const undeclared = new Set<string>();

/** Operations exercised by the conformance tests (spec, method, path template), to report coverage. */
export const exercised = new Set<string>();

/**
 * Calls an operation and checks the response against OpenZiti's spec: the status is one the spec declares for it,
 * and the body validates against the schema declared for that status (errors against apiErrorEnvelope).
 */
export async function conformant(
  spec: SpecName,
  method: string,
  template: string,
  root: string,
  opts: {
    params?: Record<string, string>;
    query?: string;
    body?: unknown;
    raw?: string;
    token?: string;
    headers?: Record<string, string>;
  } = {},
): Promise<Res> {
  let path = template;
  for (const [k, v] of Object.entries(opts.params ?? {})) path = path.replace(`{${k}}`, encodeURIComponent(v));
  const url = `${root}${BASES[spec]}${path}${opts.query ? `?${opts.query}` : ''}`;
  const res = await call(method, url, opts);
  exercised.add(`${spec} ${method} ${template}`);
  if (!SPEC_AVAILABLE) return res;
  let definition: string | null;
  if (res.status >= 400) {
    definition = 'apiErrorEnvelope';
    const declared = responseStatuses(spec, method, template);
    const key = `${res.status} ${method} ${template}`;
    if (!declared.includes(res.status)) {
      undeclared.add(key);
      expect(
        UNDECLARED_OK[key],
        `${spec}: ${key} is not a status the spec declares (${declared.join(', ')})`,
      ).toBeDefined();
    }
  } else {
    definition = responseDefinition(spec, method, template, res.status);
    if (definition === null) {
      throw new Error(
        `${spec}.yml declares no ${res.status} response with a schema for ${method} ${template}: ${res.text}`,
      );
    }
  }
  const errors = schemaValidator(spec, definition)(res.body);
  expect(
    errors,
    `${method} ${template} → ${res.status} does not match ${definition}:\n${errors}\nbody: ${res.text.slice(0, 2000)}`,
  ).toBeNull();
  return res;
}

/**
 * The operations (`api METHOD path`) a file of COVERED_IN_OWN_FILES owns among those served, and those of them it
 * has not called through `conformant`.
 */
export function ownOperations(
  file: string,
  ops: { path: string; method: string; apis: readonly string[] }[],
): { served: string[]; missing: string[] } {
  const own = COVERED_IN_OWN_FILES.find((c) => c.file === file);
  if (!own) throw new Error(`${file} is not listed in COVERED_IN_OWN_FILES`);
  const served = ops
    .filter((o) => own.paths.test(o.path))
    .flatMap((o) => o.apis.map((api) => `${api} ${o.method} ${o.path}`));
  return { served, missing: served.filter((k) => !exercised.has(k)) };
}
