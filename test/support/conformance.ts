import { expect } from 'vitest';
import type { OpDef } from '../../src/api/op.js';
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
  '404 GET /config-types/{id}/configs': 'unknown config type: association lists load their parent first (404)',
  '404 GET /services/{id}/configs': 'unknown service: association lists load their parent first (404)',
  '404 GET /service-policies/{id}/identities': 'unknown policy: association lists load their parent first (404)',
  '404 GET /service-policies/{id}/services': 'unknown policy: association lists load their parent first (404)',
  '404 GET /services/{id}/identities': 'unknown service: association lists load their parent first (404)',
  '404 GET /services/{id}/service-policies': 'unknown service: association lists load their parent first (404)',
  '404 GET /configs/{id}/services': 'unknown config: association lists load their parent first (404)',
};

/**
 * Responses the spec declares with another operation's schema by mistake, validated against the right one (each
 * with the reason). OpenZiti's server does not validate its responses, so it sends the right shape.
 */
const RESPONSE_ERRATA: Record<string, { definition: string; reason: string }> = {
  'GET /edge-routers/{id}/service-edge-router-policies': {
    definition: 'listServiceEdgeRouterPoliciesEnvelope',
    reason: 'the spec names listServicePoliciesEnvelope; the handler lists service edge router policies',
  },
};

/**
 * Operations whose conformance calls live in their own test file (by path): the main conformance suite leaves
 * them to that file, which checks that it calls every one of them.
 */
export const COVERED_IN_OWN_FILES: { file: string; paths: RegExp }[] = [
  { file: 'test/api/configs.test.ts', paths: /^\/config(s|-types)(\/\{id\})?$|^\/config-types\/\{id\}\/configs$/ },
  {
    file: 'test/api/access.test.ts',
    paths:
      /^\/(services|edge-routers|service-policies|edge-router-policies|service-edge-router-policies|service-role-attributes|edge-router-role-attributes)(\/|$)|^\/identities\/\{id\}\/(services|service-policies|edge-routers|edge-router-policies|service-configs)$|^\/identities\/\{id\}\/policy-advice\/\{serviceId\}$|^\/summary$|^\/configs\/\{id\}\/services$|^\/current-identity\/edge-routers$|^\/current-api-session\/service-updates$/,
  },
];

export const undeclared = new Set<string>();

/** The operations `file` owns (COVERED_IN_OWN_FILES) that its tests did not call through `conformant`. */
export function unexercisedOwnOps(file: string, ops: readonly OpDef<unknown>[]): { owned: number; missing: string[] } {
  const own = COVERED_IN_OWN_FILES.find((c) => c.file === file);
  if (!own) throw new Error(`${file} owns no operations in COVERED_IN_OWN_FILES`);
  const served = ops
    .filter((o) => own.paths.test(o.path))
    .flatMap((o) => o.apis.map((api) => `${api} ${o.method} ${o.path}`));
  return { owned: served.length, missing: served.filter((k) => !exercised.has(k)) };
}

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
    definition =
      RESPONSE_ERRATA[`${method} ${template}`]?.definition ?? responseDefinition(spec, method, template, res.status);
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
