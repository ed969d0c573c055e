/**
 * `conformant()`: calls a spec operation by its path template. The check itself is `call()`'s (spec-check.ts):
 * every response to a spec operation is validated, however the test reaches it.
 */
import { afterAll, expect } from 'vitest';
import type { OpDef } from '../../src/api/op.js';
import { call, type Res } from './server.js';
import { SPEC_AVAILABLE, type SpecName } from './spec.js';
import { exercised, exercisedStatuses, partialRun } from './spec-check.js';

export { exercised, exercisedStatuses, partialRun, undeclared } from './spec-check.js';

const BASES: Record<SpecName, string> = { client: '/edge/client/v1', management: '/edge/management/v1' };

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
  return call(method, `${root}${BASES[spec]}${path}${opts.query ? `?${opts.query}` : ''}`, opts);
}

/**
 * Operations whose conformance calls live in their own test file (by path): the main conformance suite leaves
 * them to that file, which checks that it calls every one of them.
 */
export const COVERED_IN_OWN_FILES: { file: string; paths: RegExp }[] = [
  { file: 'test/api/configs.test.ts', paths: /^\/config(s|-types)(\/\{id\})?$|^\/config-types\/\{id\}\/configs$/ },
  {
    file: 'test/api/posture.test.ts',
    paths:
      /^\/(posture-checks|posture-check-types|posture-check-role-attributes|posture-response|posture-response-bulk)(\/|$)|^\/service-policies\/\{id\}\/posture-checks$|^\/identities\/\{id\}\/(posture-data|failed-service-requests)$/,
  },
  { file: 'test/api/auth-policies.test.ts', paths: /^\/auth-policies(\/|$)/ },
  {
    file: 'test/api/mfa.test.ts',
    paths: /^\/(current-identity\/mfa|authenticate\/mfa|current-api-session\/totp-token|identities\/\{id\}\/mfa)/,
  },
  { file: 'test/api/ext-jwt.test.ts', paths: /^\/external-jwt-signers(\/|$)/ },
  { file: 'test/api/lockout.test.ts', paths: /^\/identities\/\{id\}\/(disable|enable)$/ },
  {
    file: 'test/api/access.test.ts',
    paths:
      /^(?!\/service-policies\/\{id\}\/posture-checks$)(?!\/edge-routers\/\{id\}\/re-enroll$)\/(services|edge-routers|service-policies|edge-router-policies|service-edge-router-policies|service-role-attributes|edge-router-role-attributes)(\/|$)|^\/identities\/\{id\}\/(services|service-policies|edge-routers|edge-router-policies|service-configs)$|^\/identities\/\{id\}\/policy-advice\/\{serviceId\}$|^\/summary$|^\/configs\/\{id\}\/services$|^\/current-identity\/edge-routers$|^\/current-api-session\/service-updates$|^\/sessions(\/|$)/,
  },
  { file: 'test/api/cas.test.ts', paths: /^\/cas(\/|$)/ },
  {
    file: 'test/api/enroll.test.ts',
    paths:
      /^\/enroll(ments)?(\/(?!erott$|extend\/router$|token$|challenge$)|$)|^\/identities\/\{id\}\/enrollments$|^\/authenticators\/\{id\}\/(re-enroll|request-extend)$|^\/current-identity\/authenticators\/\{id\}\/extend(-verify)?$/,
  },
  { file: 'test/api/routers.test.ts', paths: /^\/(routers|transit-routers|terminators)(\/|$)/ },
  { file: 'test/api/self-authenticators.test.ts', paths: /^\/current-identity\/authenticators(\/\{id\})?$/ },
  {
    file: 'test/api/operations.test.ts',
    paths: /^\/(revocations|controller-settings|database)(\/|$)|^\/identities\/\{id\}\/trace$/,
  },
  {
    file: 'test/api/router-enroll.test.ts',
    paths: /^\/enroll\/(erott|extend\/router)$|^\/edge-routers\/\{id\}\/re-enroll$/,
  },
  { file: 'test/api/session-certificates.test.ts', paths: /^\/current-api-session\/certificates(\/|$)/ },
  { file: 'test/api/token-enroll.test.ts', paths: /^\/enroll\/(token|challenge)$/ },
];

/** The served operations a file of COVERED_IN_OWN_FILES owns. */
function ownedBy<O extends { path: string }>(file: string, ops: readonly O[]): O[] {
  const own = COVERED_IN_OWN_FILES.find((c) => c.file === file);
  if (!own) throw new Error(`${file} is not listed in COVERED_IN_OWN_FILES`);
  return ops.filter((o) => own.paths.test(o.path));
}

/**
 * The operations (`api METHOD path`) a file of COVERED_IN_OWN_FILES owns among those served, and those of them it
 * has not called (through `conformant` or `call`).
 */
export function ownOperations(
  file: string,
  ops: { path: string; method: string; apis: readonly string[] }[],
): { served: string[]; missing: string[] } {
  const served = ownedBy(file, ops).flatMap((o) => o.apis.map((api) => `${api} ${o.method} ${o.path}`));
  return { served, missing: partialRun() ? [] : served.filter((k) => !exercised.has(k)) };
}

/**
 * The `<api> <METHOD> <path> <status>` keys of the operations a COVERED_IN_OWN_FILES file covers whose documented
 * success statuses no response has been checked for (call it after the file's tests, with the served operations).
 */
export function uncoveredInOwnFile(file: string, ops: readonly OpDef<unknown>[]): string[] {
  if (partialRun()) return [];
  return ownedBy(file, ops)
    .flatMap((o) => o.apis.flatMap((api) => Object.keys(o.responses).map((st) => `${api} ${o.method} ${o.path} ${st}`)))
    .filter((k) => !exercisedStatuses.has(k));
}

/**
 * For a COVERED_IN_OWN_FILES file: after all its tests, every success status of the operations it owns must have
 * been checked against the spec. Returns the list to fill with the served operations (`srv.ctl.ops`).
 */
export function expectOwnCoverageAfterAll(file: string): OpDef<unknown>[] {
  const served: OpDef<unknown>[] = [];
  afterAll(() => {
    if (SPEC_AVAILABLE) expect(uncoveredInOwnFile(file, served)).toEqual([]);
  });
  return served;
}
