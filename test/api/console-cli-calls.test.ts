/**
 * The HTTP calls OpenZiti's admin console (ZAC, openziti/ziti-console) and its CLI (`ziti edge …`, `ziti fabric
 * cluster …`, openziti/ziti) make to a controller, as they make them (paths, query strings, headers, bodies), and
 * the fields of each answer they read: one row per call, naming the source file that makes it. The rows run in
 * order against one in-process Keel and share what they create (`ctx`). Every answer also goes through the spec
 * check (test/support/spec-check.ts). What was checked and found: docs/compatibility.md.
 *
 * How the two clients send what the rows send:
 * - ZAC (Angular `HttpClient`) builds query strings by concatenation (`?filter= name icontains "x"&limit=50&…`),
 *   which the browser percent-encodes (spaces as %20, as `fetch` does here); its interceptor
 *   (projects/app-ziti-console/src/app/interceptors/ziti-api.interceptor.ts) adds `zt-session`,
 *   `content-type: application/json` and `accept: application/json` to every call, GET and DELETE included.
 * - The CLI (Go: resty and the go-swagger `rest_management_api_client`) encodes query values with `url.Values`
 *   (spaces as `+`, as URLSearchParams does here) and sends `zt-session`.
 */
import { request } from 'node:http';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRootCa } from '../../src/pki/ca.js';
import { generateKeyPair } from '../../src/pki/crypto.js';
import { fakeClusterView, fakeMember } from '../support/cluster-view.js';
import { csr } from '../support/router-client.js';
import { ADMIN_PASSWORD, call, login, type Res, startServer, type TestServer } from '../support/server.js';

const ZAC = 'openziti/ziti-console';
const ZAC_LIB = `${ZAC} projects/ziti-console-lib/src/lib`;
const ZAC_SETTINGS = `${ZAC_LIB}/services/settings.service.ts`;
const ZAC_LOGIN = `${ZAC} projects/app-ziti-console/src/app/login/controller-login.service.ts`;
const ZAC_DATA = `${ZAC_LIB}/services/ziti-controller-data.service.ts`;
const ZAC_LIST = `${ZAC_LIB}/shared/list-page-service.class.ts + ${ZAC_DATA} (getUrlFilter)`;
const ZAC_NODE = `${ZAC} server.js (2.x node server)`;
const ZAC_PROXY = `${ZAC} server.js (the reverse proxy that replaced it)`;
const ZAC_FORMS = `${ZAC_LIB}/features/projectable-forms`;
const CLI = 'openziti/ziti';
const CLI_LOGIN = `${CLI} ziti/cmd/edge/login.go + ziti/util/rest.go`;
const CLI_LIST = `${CLI} ziti/cmd/edge/list.go`;
const CLI_ADVISOR = `${CLI} ziti/cmd/edge/policy_advisor.go`;
const CLI_CLUSTER = `${CLI} ziti/cmd/fabric/cluster.go`;

const MGMT = '/edge/management/v1';
const CLIENT = '/edge/client/v1';

/** What the rows create and read back, by name. */
interface Ctx {
  admin: string;
  ids: Record<string, string>;
  jwt: Record<string, string>;
}

interface Row {
  /** The repository and file(s) making the call. */
  source: string;
  /** What the client does with it. */
  does: string;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Relative to the controller's root URL, the query string as the client writes it. */
  path: (c: Ctx) => string;
  body?: (c: Ctx) => unknown;
  /** ZAC: its interceptor's headers (default); CLI: `zt-session` and `accept` only; none: no session. */
  as?: 'zac' | 'cli' | 'none';
  /** The session token sent, when not the admin's. */
  session?: (c: Ctx) => string;
  headers?: Record<string, string>;
  status: number;
  /** What the client reads from the answer (throws when it is not there). */
  check?: (body: any, c: Ctx, res: Res) => void;
}

/** A query string as Go's `url.Values.Encode` writes it (spaces as `+`). */
const goQuery = (params: Record<string, string | string[]>): string => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) for (const one of [v].flat()) q.append(k, one);
  return q.toString();
};

const names = (body: any): string[] => body.data.map((r: { name: string }) => r.name);
const isIso = (v: unknown) => typeof v === 'string' && !Number.isNaN(Date.parse(v));

/** The pagination meta every list page (ZAC) and table footer (CLI `api.GetPaging`) reads. */
function paged(body: any, limit: number, offset: number): void {
  expect(body.meta.pagination).toMatchObject({ limit, offset });
  expect(typeof body.meta.pagination.totalCount).toBe('number');
  expect(Array.isArray(body.meta.filterableFields)).toBe(true);
}

const ROWS: Row[] = [
  // ---- discovery and login ----
  {
    source: ZAC_SETTINGS,
    does: 'initApiVersions / controllerSave: the management API path, `apiVersions.edge.v1` must exist',
    method: 'GET',
    path: () => `${MGMT}/version?rejectUnauthorized=false`,
    as: 'none',
    status: 200,
    check: (b) => {
      expect(b.data.apiVersions.edge.v1).toBeTruthy();
      expect(b.data.apiVersions['edge-management'].v1.path).toBe(MGMT);
      expect(b.data.version).toMatch(/^v/);
    },
  },
  {
    source: ZAC_NODE,
    does: 'GetPath and /api/version: the root /version',
    method: 'GET',
    path: () => '/version',
    as: 'none',
    status: 200,
    check: (b) => expect(b.data.apiVersions['edge-management'].v1.path).toBe(MGMT),
  },
  {
    source: CLI_LOGIN,
    does: 'EdgeControllerGetManagementApiBasePath: /edge/client/v1/version first, `edge-management.v1.path`',
    method: 'GET',
    path: () => `${CLIENT}/version`,
    as: 'none',
    status: 200,
    check: (b) => expect(b.data.apiVersions['edge-management'].v1.path).toBe(MGMT),
  },
  {
    source: CLI_LOGIN,
    does: 'GetWellKnownCerts: the CA bundle offered for trust (base64 PKCS#7)',
    method: 'GET',
    path: () => '/.well-known/est/cacerts',
    as: 'none',
    headers: { accept: 'application/pkcs7-mime' },
    status: 200,
    check: (_b, _c, res) => {
      expect(res.headers.get('content-type')).toContain('application/pkcs7-mime');
      expect(Buffer.from(res.text, 'base64').length).toBeGreaterThan(100);
    },
  },
  {
    source: ZAC_LOGIN,
    does: 'observeLogin: the body carries `rejectUnauthorized`; reads data.token and data.expiresAt',
    method: 'POST',
    path: () => `${MGMT}/authenticate?method=password`,
    body: () => ({ username: 'admin', password: ADMIN_PASSWORD, rejectUnauthorized: false }),
    as: 'none',
    status: 200,
    check: (b) => {
      expect(b.data.token).toMatch(/\S/);
      // the interceptor drops to the login page once fewer than 10 s are left
      expect(Date.parse(b.data.expiresAt) - Date.now()).toBeGreaterThan(60_000);
    },
  },
  {
    source: CLI_LOGIN,
    does: '`ziti edge login -u -p`: password login (edge-apis client), token from data.token',
    method: 'POST',
    path: () => `${MGMT}/authenticate?method=password`,
    body: () => ({
      username: 'admin',
      password: ADMIN_PASSWORD,
      // configTypes: omitted (the Go model's omitempty), envInfo and sdkInfo as the SDK fills them
      envInfo: { arch: 'amd64', os: 'linux', osRelease: '6.8.0', osVersion: '#1 SMP' },
      sdkInfo: {
        appId: 'ziti',
        appVersion: 'v1.6.0',
        branch: 'main',
        revision: 'abc123',
        type: 'ziti-sdk-golang',
        version: 'v1.1.0',
      },
    }),
    as: 'none',
    status: 200,
    check: (b, _c, res) => {
      expect(res.headers.get('zt-session')).toBe(b.data.token);
      expect(b.data.identity.name).toBe('Default Admin');
    },
  },
  {
    source: ZAC_LOGIN,
    does: 'a wrong password: the growler shows err.error.code',
    method: 'POST',
    path: () => `${MGMT}/authenticate?method=password`,
    body: () => ({ username: 'admin', password: 'wrong-password', rejectUnauthorized: false }),
    as: 'none',
    status: 401,
    check: (b) => expect(b.error.code).toBe('INVALID_AUTH'),
  },
  {
    source: ZAC_PROXY,
    does: '/zac-session/login: `{username, password}`, then data.token and data.authQueries (MFA pending when any)',
    method: 'POST',
    path: () => `${MGMT}/authenticate?method=password`,
    body: () => ({ username: 'admin', password: ADMIN_PASSWORD }),
    as: 'none',
    status: 200,
    check: (b, c) => {
      expect(b.data.authQueries).toEqual([]);
      c.jwt.proxySession = b.data.token;
    },
  },
  {
    source: ZAC_PROXY,
    does: 'proxied calls carry the held token as zt-session (not a JWT) and X-Forwarded-* headers',
    method: 'GET',
    path: () => `${MGMT}/current-identity`,
    session: (c) => c.jwt.proxySession!,
    headers: { 'x-forwarded-for': '203.0.113.7', 'x-forwarded-host': 'zac.example.test', 'x-forwarded-proto': 'https' },
    status: 200,
    check: (b) => expect(b.data.name).toBe('Default Admin'),
  },
  {
    source: ZAC_PROXY,
    does: 'login page before a session: `/edge/client/v1/external-jwt-signers?limit=500` (the IdP buttons, CSP)',
    method: 'GET',
    path: () => `${CLIENT}/external-jwt-signers?limit=500`,
    as: 'none',
    status: 200,
    check: (b) => expect(Array.isArray(b.data)).toBe(true),
  },
  // ---- forms: create as ZAC's models send (every model property, empty ones included) ----
  {
    source: `${ZAC_LIB}/models/identity.ts + ${ZAC_DATA} (post)`,
    does: 'identity form: type "Device", externalId "", enrollment.ott',
    method: 'POST',
    path: () => `${MGMT}/identities`,
    body: () => zacIdentity('zac-device-1', ['zac-a']),
    status: 201,
    check: (b, c) => {
      c.ids.device1 = b.data.id;
    },
  },
  {
    source: `${ZAC_LIB}/models/identity.ts`,
    does: 'a second identity with externalId "": not a duplicate external id',
    method: 'POST',
    path: () => `${MGMT}/identities`,
    body: () => zacIdentity('zac-device-2', ['zac-b']),
    status: 201,
    check: (b, c) => {
      c.ids.device2 = b.data.id;
    },
  },
  {
    source: `${ZAC_LIB}/models/service.ts`,
    does: 'service form: terminatorStrategy "" (the default strategy), encryptionRequired',
    method: 'POST',
    path: () => `${MGMT}/services`,
    body: () => ({
      name: 'zac-svc',
      encryptionRequired: true,
      terminatorStrategy: '',
      roleAttributes: ['web'],
      tags: {},
      configs: [],
    }),
    status: 201,
    check: (b, c) => {
      c.ids.svc = b.data.id;
    },
  },
  {
    source: `${ZAC_LIB}/models/service-policy.ts`,
    does: 'service policy form',
    method: 'POST',
    path: () => `${MGMT}/service-policies`,
    body: (c) => ({
      name: 'zac-dial',
      serviceRoles: ['#web'],
      identityRoles: [`@${c.ids.device1}`],
      postureCheckRoles: [],
      semantic: 'AnyOf',
      type: 'Dial',
    }),
    status: 201,
    check: (b, c) => {
      c.ids.sp = b.data.id;
    },
  },
  {
    source: `${ZAC_LIB}/models/edge-router.ts`,
    does: 'edge router form',
    method: 'POST',
    path: () => `${MGMT}/edge-routers`,
    body: () => ({
      name: 'zac-er',
      roleAttributes: ['zac-routers'],
      appData: {},
      isTunnelerEnabled: true,
      noTraversal: false,
      cost: 0,
      tags: {},
    }),
    status: 201,
    check: (b, c) => {
      c.ids.er = b.data.id;
    },
  },
  {
    source: `${ZAC_LIB}/models/config-type.ts`,
    does: 'config type form: carries `id: ""` on create',
    method: 'POST',
    path: () => `${MGMT}/config-types`,
    body: () => ({ name: 'zac-ct', id: '', schema: {}, tags: {} }),
    status: 201,
    check: (b, c) => {
      expect(b.data.id).not.toBe('');
      c.ids.ct = b.data.id;
    },
  },
  {
    source: `${ZAC_LIB}/models/auth-policy.ts`,
    does: 'auth policy form: carries `id: ""`, secondary.requireExtJwtSigner left out',
    method: 'POST',
    path: () => `${MGMT}/auth-policies`,
    body: () => ({
      name: 'zac-ap',
      id: '',
      primary: {
        cert: { allowed: false, allowExpiredCerts: false },
        extJwt: { allowed: false, allowedSigners: [] },
        updb: {
          allowed: true,
          lockoutDurationMinutes: 0,
          maxAttempts: 5,
          minPasswordLength: 5,
          requireMixedCase: false,
          requireNumberChar: false,
          requireSpecialChar: false,
        },
      },
      secondary: { requireTotp: false },
      tags: {},
    }),
    status: 201,
  },
  {
    source: `${ZAC_LIB}/models/jwt-signer.ts + features/projectable-forms/jwt-signer/jwt-signer-form.service.ts`,
    does: 'JWT signer form: clientId, kid, externalAuthUrl and claimsProperty sent as "" when left empty',
    method: 'POST',
    path: () => `${MGMT}/external-jwt-signers`,
    body: () => zacSigner('zac-signer-1', 'https://idp.example.test/jwks'),
    status: 201,
    check: (b, c) => {
      c.ids.signer1 = b.data.id;
    },
  },
  {
    source: `${ZAC_LIB}/models/jwt-signer.ts`,
    does: 'a second signer with kid "": no duplicate kid',
    method: 'POST',
    path: () => `${MGMT}/external-jwt-signers`,
    body: () => ({
      ...zacSigner('zac-signer-2', 'https://idp2.example.test/jwks'),
      issuer: 'https://idp2.example.test',
    }),
    status: 201,
  },
  {
    source: `${ZAC_LIB}/features/projectable-forms/jwt-signer/jwt-signer-form.service.ts (getSubdata(…, ''))`,
    does: 'the saved signer reloaded at `/{id}//`: empty claimsProperty became "sub", empty externalAuthUrl none',
    method: 'GET',
    path: (c) => `${MGMT}/external-jwt-signers/${c.ids.signer1}//`,
    status: 200,
    check: (b) => {
      expect(b.data.claimsProperty).toBe('sub');
      expect(b.data.externalAuthUrl).toBeNull();
      expect(b.data.kid).toBe('');
    },
  },
  {
    source: `${ZAC_FORMS}/jwt-signer/jwt-signer-form.service.ts (save, update)`,
    does: 'signer edit: PATCH with the model filled from the detail (certPem null, externalAuthUrl null)',
    method: 'PATCH',
    path: (c) => `${MGMT}/external-jwt-signers/${c.ids.signer1}`,
    body: () => ({
      ...zacSigner('zac-signer-1', 'https://idp.example.test/jwks'),
      claimsProperty: 'email',
      externalAuthUrl: null,
      certPem: null,
    }),
    status: 200,
  },
  {
    source: `${ZAC_LIB}/models/posture-check.ts + features/projectable-forms/posture-check/posture-check-form.service.ts`,
    does: 'posture check form: every type’s fields sent, the other types’ empty (osType ""): only typeId’s are read',
    method: 'POST',
    path: () => `${MGMT}/posture-checks`,
    body: () => ({
      name: 'zac-domain',
      typeId: 'DOMAIN',
      semantic: 'AllOf',
      roleAttributes: [],
      domains: ['corp.example'],
      macAddresses: [],
      operatingSystems: [],
      processes: [{ hashes: [], osType: '', path: '', signerFingerprints: [] }],
      process: { hashes: [], osType: '', path: '', signerFingerprint: '' },
      timeoutSeconds: 0,
      tags: {},
    }),
    status: 201,
    check: (b, c) => {
      c.ids.pc = b.data.id;
    },
  },
  {
    source: `${ZAC_LIB}/features/projectable-forms/posture-check/posture-check-form.service.ts`,
    does: 'the saved check reloaded: its own fields only',
    method: 'GET',
    path: (c) => `${MGMT}/posture-checks/${c.ids.pc}//`,
    status: 200,
    check: (b) => {
      expect(b.data).toMatchObject({ typeId: 'DOMAIN', domains: ['corp.example'] });
      expect(b.data.process).toBeUndefined();
    },
  },
  {
    source: `${ZAC_LIB}/models/posture-check.ts`,
    does: 'a PROCESS check with its own osType "" is still refused (COULD_NOT_VALIDATE, process.osType)',
    method: 'POST',
    path: () => `${MGMT}/posture-checks`,
    body: () => ({
      name: 'zac-process',
      typeId: 'PROCESS',
      domains: [],
      process: { hashes: [], osType: '', path: '/bin/x', signerFingerprint: '' },
    }),
    status: 400,
    check: (b) => {
      expect(b.error.code).toBe('COULD_NOT_VALIDATE');
      expect(b.error.cause.field).toBe('process.osType');
    },
  },
  {
    source: `${ZAC_LIB}/models/certificate-authority.ts`,
    does: 'CA form: carries `id: ""`, `identityNameFormat: ""` and the misspelt `verificationToke`',
    method: 'POST',
    path: () => `${MGMT}/cas`,
    body: (c) => ({
      name: 'zac-ca',
      id: '',
      isAutoCaEnrollmentEnabled: false,
      isOttCaEnrollmentEnabled: true,
      identityRoles: [],
      identityNameFormat: '',
      isAuthEnabled: true,
      certPem: c.jwt.caPem,
      tags: {},
      verificationToke: '',
    }),
    status: 201,
    check: (b, c) => {
      c.ids.ca = b.data.id;
    },
  },
  {
    source: `${ZAC_FORMS}/certificate-authority/certificate-authority-form.service.ts (save)`,
    does: 'the saved CA reloaded at `/cas/{id}//`: an empty identityNameFormat is the default format',
    method: 'GET',
    path: (c) => `${MGMT}/cas/${c.ids.ca}//`,
    status: 200,
    check: (b) => {
      expect(b.data.identityNameFormat).toBe('[caName]-[commonName]');
      expect(b.data).toMatchObject({ isVerified: false, isOttCaEnrollmentEnabled: true });
      expect(b.data.verificationToken).toMatch(/\S/);
    },
  },
  {
    source: `${ZAC_FORMS}/certificate-authority/certificate-authority-form.service.ts (save, update)`,
    does: 'CA edit: PUT with the whole form model (certPem and id included)',
    method: 'PUT',
    path: (c) => `${MGMT}/cas/${c.ids.ca}`,
    body: (c) => ({
      name: 'zac-ca',
      id: c.ids.ca,
      isAutoCaEnrollmentEnabled: true,
      isOttCaEnrollmentEnabled: true,
      identityRoles: ['zac-auto'],
      identityNameFormat: '[caName]-[commonName]',
      isAuthEnabled: true,
      certPem: c.jwt.caPem,
      // externalIdClaim: undefined in the form (the detail has none), so left out of the JSON
      tags: {},
    }),
    status: 200,
  },
  {
    source: `${ZAC_LIB}/pages/certificate-authorities/certificate-authorities-page.service.ts (getJwt)`,
    does: 'CA enrollment JWT download: `/cas/{id}/jwt/` (trailing slash), accept set to JSON by the interceptor',
    method: 'GET',
    path: (c) => `${MGMT}/cas/${c.ids.ca}/jwt/`,
    status: 200,
    check: (_b, c, res) => {
      expect(decodeJwt(res.text.trim()).em).toBe('ca');
      expect(res.text).not.toContain(c.admin);
    },
  },
  {
    source: `${ZAC_LIB}/models/edge-router-policy.ts`,
    does: 'edge router policy form',
    method: 'POST',
    path: () => `${MGMT}/edge-router-policies`,
    body: () => ({
      name: 'zac-erp',
      edgeRouterRoles: ['#zac-routers'],
      identityRoles: ['#zac-a'],
      semantic: 'AnyOf',
      tags: {},
    }),
    status: 201,
  },
  {
    source: `${ZAC_LIB}/models/service-edge-router-policy.ts`,
    does: 'service edge router policy form',
    method: 'POST',
    path: () => `${MGMT}/service-edge-router-policies`,
    body: (c) => ({ name: 'zac-serp', edgeRouterRoles: ['#all'], serviceRoles: [`@${c.ids.svc}`], semantic: 'AnyOf' }),
    status: 201,
  },
  {
    source: `${ZAC_LIB}/pages/configurations/configurations-page.service.ts`,
    does: 'config form’s type picker: config types by name',
    method: 'GET',
    path: () => `${MGMT}/config-types?filter= name icontains "intercept.v1"&limit=50&offset=0&sort=name  asc`,
    status: 200,
    check: (b, c) => {
      expect(names(b)).toEqual(['intercept.v1']);
      expect(b.data[0].schema).toBeTypeOf('object');
      c.ids.intercept = b.data[0].id;
    },
  },
  {
    source: `${ZAC_LIB}/models/config.ts`,
    does: 'config form: {name, data, configTypeId, tags}',
    method: 'POST',
    path: () => `${MGMT}/configs`,
    body: (c) => ({
      name: 'zac-intercept',
      data: { protocols: ['tcp'], addresses: ['zac.example'], portRanges: [{ low: 80, high: 80 }] },
      configTypeId: c.ids.intercept,
      tags: {},
    }),
    status: 201,
    check: (b, c) => {
      c.ids.config = b.data.id;
    },
  },
  {
    source: `${ZAC_DATA} (saveSubdata)`,
    does: 'identity “Override”: POST /identities/{id}/service-configs [{serviceId, configId}]',
    method: 'POST',
    path: (c) => `${MGMT}/identities/${c.ids.device1}/service-configs`,
    body: (c) => [{ serviceId: c.ids.svc, configId: c.ids.config }],
    status: 200,
  },
  {
    source: `${ZAC_DATA} (getSubdata)`,
    does: 'the overrides listed: service.name and config.name',
    method: 'GET',
    path: (c) => `${MGMT}/identities/${c.ids.device1}/service-configs`,
    status: 200,
    check: (b) => expect(b.data[0]).toMatchObject({ service: { name: 'zac-svc' }, config: { name: 'zac-intercept' } }),
  },
  {
    source: `${ZAC_DATA} (deleteSubdata)`,
    does: 'override removed: DELETE /identities/{id}/service-configs with the JSON body',
    method: 'DELETE',
    path: (c) => `${MGMT}/identities/${c.ids.device1}/service-configs`,
    body: (c) => [{ serviceId: c.ids.svc, configId: c.ids.config }],
    status: 200,
  },
  {
    source: `${ZAC_FORMS}/service/service-form.service.ts (save, update)`,
    does: 'service edit: PATCH with the model (encryptionRequired, read-only after create, is ignored)',
    method: 'PATCH',
    path: (c) => `${MGMT}/services/${c.ids.svc}`,
    body: (c) => ({
      name: 'zac-svc',
      encryptionRequired: false,
      terminatorStrategy: 'smartrouting',
      roleAttributes: ['web'],
      tags: {},
      configs: [c.ids.config],
    }),
    status: 200,
  },
  {
    source: `${ZAC_FORMS}/service/service-form.service.ts (getAssociatedConfigs)`,
    does: 'the service’s configs at `/services/{id}/configs/`',
    method: 'GET',
    path: (c) => `${MGMT}/services/${c.ids.svc}/configs/`,
    status: 200,
    check: (b, c) => {
      expect(names(b)).toEqual(['zac-intercept']);
      expect(b.data[0].configTypeId).toBe(c.ids.intercept);
    },
  },
  {
    source: `${ZAC_FORMS}/service/service-form.service.ts (save: getSubdata('services', id, ''))`,
    does: 'the saved service reloaded at `/services/{id}//`',
    method: 'GET',
    path: (c) => `${MGMT}/services/${c.ids.svc}//`,
    status: 200,
    check: (b, c) => {
      expect(b.data).toMatchObject({ encryptionRequired: true, configs: [c.ids.config] });
    },
  },
  {
    source: `${CLI} ziti/cmd/edge/create_terminator.go`,
    does: '`ziti edge create terminator`: {service, router, binding, address}',
    method: 'POST',
    path: () => `${MGMT}/terminators`,
    body: (c) => ({ service: c.ids.svc, router: c.ids.er, binding: 'transport', address: 'tcp:zac.example:80' }),
    as: 'cli',
    status: 201,
  },
  // ---- list pages ----
  {
    source: ZAC_LIST,
    does: 'identities page, no filter: `?limit=50&offset=0&sort=name asc`',
    method: 'GET',
    path: () => `${MGMT}/identities?limit=50&offset=0&sort=name asc`,
    status: 200,
    check: (b) => {
      paged(b, 50, 0);
      expect(names(b)).toEqual([...names(b)].sort());
      for (const row of b.data) {
        for (const f of ['hasApiSession', 'hasEdgeRouterConnection', 'isAdmin', 'isMfaEnabled']) {
          expect(typeof row[f], f).toBe('boolean');
        }
        expect(row.type.name).toMatch(/\S/);
        expect(row.authPolicy.name).toMatch(/\S/);
        expect(isIso(row.createdAt)).toBe(true);
        expect(row.envInfo).toBeTypeOf('object');
        expect(row.sdkInfo).toBeTypeOf('object');
      }
    },
  },
  {
    source: `${ZAC_LIB}/pages/identities/identities-page.service.ts`,
    does: 'row actions and JWT download/QR: enrollment.ott.jwt, .token, .expiresAt; authenticators.updb.id',
    method: 'GET',
    path: () => `${MGMT}/identities?filter= name icontains "zac-device"&limit=50&offset=0&sort=name  asc`,
    status: 200,
    check: (b, c) => {
      expect(names(b)).toEqual(['zac-device-1', 'zac-device-2']);
      const ott = b.data[0].enrollment.ott;
      expect(decodeJwt(ott.jwt).em).toBe('ott');
      expect(ott.token).toMatch(/\S/);
      expect(Date.parse(ott.expiresAt)).toBeGreaterThan(Date.now());
      expect(b.data[0].typeId).toBe('Default');
      // the reissue action refreshes enrollment.ott.id
      expect(ott.id).toMatch(/\S/);
      c.ids.enrollment1 = ott.id;
      c.jwt.device1 = ott.jwt;
    },
  },
  {
    source: ZAC_LIST,
    does: 'column filters joined with "and": ATTRIBUTE (anyOf … or anyOf …), BOOLEAN (isAdmin=false)',
    method: 'GET',
    path: () =>
      `${MGMT}/identities?filter= anyOf(roleAttributes) = "zac-a" or anyOf(roleAttributes) = "zac-b" and isAdmin=false&limit=50&offset=0&sort=name  desc`,
    status: 200,
    check: (b) => expect(names(b)).toEqual(['zac-device-2', 'zac-device-1']),
  },
  {
    source: ZAC_LIST,
    does: 'DATETIME filter (createdAt range) sorted by createdAt',
    method: 'GET',
    path: () =>
      `${MGMT}/identities?filter= createdAt >= datetime(2000-01-01T00:00:00.000Z) and createdAt <= datetime(2999-01-01T00:00:00.000Z)&limit=50&offset=0&sort=createdAt  desc`,
    status: 200,
    check: (b) => {
      const at = b.data.map((r: { createdAt: string }) => r.createdAt);
      expect(at).toEqual([...at].sort().reverse());
      // the two devices, the admin and the Router identity of the tunneler-enabled edge router
      expect(b.data.length).toBe(4);
    },
  },
  {
    source: `${ZAC_LIB}/pages/identities/identities-page.service.ts`,
    does: 'the sortable columns: type, isAdmin',
    method: 'GET',
    path: () => `${MGMT}/identities?limit=50&offset=1&sort=isAdmin desc`,
    status: 200,
    check: (b) => {
      paged(b, 50, 1);
      expect(b.data.every((r: { isAdmin: boolean }) => r.isAdmin === false)).toBe(true);
    },
  },
  {
    source: ZAC_NODE,
    does: 'GetItems: `?filter=(name contains "")&limit=…&offset=0&sort=name ASC`',
    method: 'GET',
    path: () => `${MGMT}/services?filter=(name contains "")&limit=100&offset=0&sort=name ASC`,
    status: 200,
    check: (b) => expect(names(b)).toEqual(['zac-svc']),
  },
  {
    source: ZAC_NODE,
    does: 'dataSubs: `?limit=99999999&offset=0&sort=name ASC` (capped at 500 as OpenZiti does)',
    method: 'GET',
    path: (c) => `${MGMT}/identities/${c.ids.device1}/service-policies?limit=99999999&offset=0&sort=name ASC`,
    status: 200,
    check: (b) => {
      expect(names(b)).toEqual(['zac-dial']);
      expect(b.meta.pagination.limit).toBe(500);
    },
  },
  {
    source: `${ZAC_DATA} (getSubdata with paging)`,
    does: 'sub-lists at `/{type}/{id}/{sub}/?…` (slash before the query)',
    method: 'GET',
    path: (c) => `${MGMT}/services/${c.ids.svc}/identities/?limit=50&offset=0&sort=name asc`,
    status: 200,
    check: (b) => expect(names(b)).toEqual(['zac-device-1']),
  },
  {
    source: `${ZAC_DATA} (get with DEFAULT_PAGING)`,
    does: 'role attribute pickers: `?limit=100&offset=0&sort=name asc`, data is the list of names',
    method: 'GET',
    path: () => `${MGMT}/identity-role-attributes?limit=100&offset=0&sort=name asc`,
    status: 200,
    check: (b) => expect(b.data).toEqual(['zac-a', 'zac-b']),
  },
  ...(['service', 'edge-router', 'posture-check'] as const).map(
    (kind): Row => ({
      source: `${ZAC_DATA} (get with DEFAULT_PAGING)`,
      does: `${kind} role attribute picker`,
      method: 'GET',
      path: () => `${MGMT}/${kind}-role-attributes?limit=100&offset=0&sort=name asc`,
      status: 200,
      check: (b) => expect(Array.isArray(b.data)).toBe(true),
    }),
  ),
  {
    source: `${ZAC_DATA} (resetPassword) + ${ZAC_NODE} (/api/reset)`,
    does: 'own updb authenticator on the management API: `?filter=method="updb"`, data[0].id and .username',
    method: 'GET',
    path: () => `${MGMT}/current-identity/authenticators?filter=method="updb"`,
    status: 200,
    check: (b) => expect(b.data[0]).toMatchObject({ method: 'updb', username: 'admin' }),
  },
  {
    source: `${ZAC} (network visualizer: fetchRouters)`,
    does: '`/fabric/v1/routers?limit=1000`: every router in the fabric shape (`name`, `connected`, `cost`, …)',
    method: 'GET',
    path: () => '/fabric/v1/routers?limit=1000',
    status: 200,
    check: (b) => {
      expect(b.meta.pagination).toMatchObject({ limit: 500, offset: 0 }); // capped at 500, as every list
      expect(b.data.length).toBe(b.meta.pagination.totalCount);
      for (const r of b.data) {
        expect(r).toMatchObject({ id: expect.any(String), name: expect.any(String), connected: false });
        expect(r).not.toHaveProperty('isOnline');
      }
    },
  },
  {
    source: `${ZAC_LIB}/pages/export/export-page.service.ts`,
    does: 'export page: POST /ascode/export (newer than the published spec): not served, 404 envelope',
    method: 'POST',
    path: () => `${MGMT}/ascode/export`,
    body: () => ({ types: 'identities,services', format: 'json' }),
    status: 404,
    check: (b) => expect(b.error.code).toBe('NOT_FOUND'),
  },
  {
    source: ZAC_LIST,
    does: 'a filter that does not parse: the envelope ZAC shows (error.cause.message or error.message)',
    method: 'GET',
    path: () => `${MGMT}/identities?filter= name icontains &limit=50&offset=0&sort=name  asc`,
    status: 400,
    check: (b) => {
      expect(b.error.code).toBe('INVALID_FILTER');
      expect(b.error.message).toMatch(/\S/);
    },
  },
  {
    source: ZAC_LIST,
    does: 'a sort on an unknown field: 400 INVALID_SORT_IDENTIFIER',
    method: 'GET',
    path: () => `${MGMT}/identities?limit=50&offset=0&sort=nope asc`,
    status: 400,
    check: (b) => expect(b.error.code).toBe('INVALID_SORT_IDENTIFIER'),
  },
  {
    source: `${ZAC_LIB}/pages/edge-routers/edge-routers-page.service.ts`,
    does: 'edge routers page: isVerified, isOnline, enrollmentJwt/Token (download, re-enroll), versionInfo?.os',
    method: 'GET',
    path: () => `${MGMT}/edge-routers?limit=50&offset=0&sort=name asc`,
    status: 200,
    check: (b, c) => {
      const er = b.data.find((r: { id: string }) => r.id === c.ids.er);
      expect(er).toMatchObject({ isVerified: false, isOnline: false });
      expect(decodeJwt(er.enrollmentJwt).em).toBe('erott');
      expect(er.enrollmentToken).toMatch(/\S/);
      // the page calls versionInfo?.os.toLowerCase(): a versionInfo must carry os
      if (er.versionInfo != null) expect(typeof er.versionInfo.os).toBe('string');
    },
  },
  {
    source: `${ZAC_LIB}/pages/edge-routers/edge-routers-page.service.ts (reenroll)`,
    does: 're-enroll: POST /edge-routers/{id}/re-enroll with the body {}',
    method: 'POST',
    path: (c) => `${MGMT}/edge-routers/${c.ids.er}/re-enroll`,
    body: () => ({}),
    status: 200,
  },
  {
    source: `${ZAC_LIB}/pages/api-sessions/api-sessions-page.service.ts`,
    does: 'API sessions page: identity.name, ipAddress, lastActivityAt',
    method: 'GET',
    path: () => `${MGMT}/api-sessions?limit=50&offset=0&sort=createdAt desc`,
    status: 200,
    check: (b) => {
      paged(b, 50, 0);
      for (const s of b.data) {
        expect(s.identity.name).toMatch(/\S/);
        expect(typeof s.ipAddress).toBe('string');
        expect(isIso(s.lastActivityAt)).toBe(true);
      }
    },
  },
  // ---- edits, enrollment actions, deletes ----
  {
    source: `${ZAC_FORMS}/identity/identity-form.service.ts + ${ZAC_DATA} (patch)`,
    does: 'identity edit: PATCH with the form model filled from the detail (type: its id, no enrollment)',
    method: 'PATCH',
    path: (c) => `${MGMT}/identities/${c.ids.device2}`,
    body: () => {
      const { enrollment: _omitted, ...model } = zacIdentity('zac-device-2', ['zac-b', 'zac-c']);
      return { ...model, type: 'Default', externalId: null };
    },
    status: 200,
  },
  {
    source: `${ZAC_FORMS}/identity/identity-form.service.ts (testService)`,
    does: 'policy advice through call(`/identities/…`): the path holds `v1//identities`',
    method: 'GET',
    path: (c) => `${MGMT}//identities/${c.ids.device1}/policy-advice/${c.ids.svc}`,
    status: 200,
    check: (b) => expect(b.data).toMatchObject({ isDialAllowed: true, isBindAllowed: false }),
  },
  {
    source: `${ZAC_DATA} (reissueEnrollment)`,
    does: 'reissue enrollment: POST /enrollments/{id}/refresh {expiresAt}',
    method: 'POST',
    path: (c) => `${MGMT}/enrollments/${c.ids.enrollment1}/refresh`,
    body: () => ({ expiresAt: new Date(Date.now() + 86_400_000).toISOString() }),
    status: 200,
  },
  {
    source: `${ZAC_DATA} (resetMFA)`,
    does: 'reset MFA: DELETE /identities/{id}/mfa; 404 NOT_FOUND for an identity without MFA',
    method: 'DELETE',
    path: (c) => `${MGMT}/identities/${c.ids.device2}/mfa`,
    status: 404,
    check: (b) => expect(b.error.code).toBe('NOT_FOUND'),
  },
  {
    source: `${ZAC_DATA} (delete)`,
    does: 'delete with `content-type: application/json` and no body',
    method: 'DELETE',
    path: (c) => `${MGMT}/config-types/${c.ids.ct}`,
    status: 200,
  },
  {
    source: `${ZAC_DATA} (delete)`,
    does: 'delete of an unknown id: 404 envelope',
    method: 'DELETE',
    path: () => `${MGMT}/services/no-such-id`,
    status: 404,
    check: (b) => expect(b.error.code).toBe('NOT_FOUND'),
  },
  {
    source: `${ZAC} assets/scripts/model/summary.js + server.js (GetItems)`,
    does: 'dashboard counts through the node server: /summary with its list query string (not read by /summary)',
    method: 'GET',
    path: () => `${MGMT}/summary?filter=(name contains "")&limit=5000&offset=0&sort=name ASC`,
    status: 200,
    check: (b) => {
      expect(b.data.identities).toBe(4);
      expect(b.data.services).toBe(1);
      expect(b.data.edgeRouters).toBe(1);
    },
  },
  {
    source: `${ZAC_PROXY} (probeSession)`,
    does: 'a held session is probed with GET /current-api-session (401 means gone)',
    method: 'GET',
    path: () => `${MGMT}/current-api-session`,
    session: (c) => c.jwt.proxySession!,
    status: 200,
    check: (b, c) => expect(b.data.token).toBe(c.jwt.proxySession),
  },
  {
    source: `${ZAC_PROXY} (endUpstreamSession)`,
    does: 'logout: DELETE /current-api-session',
    method: 'DELETE',
    path: () => `${MGMT}/current-api-session`,
    session: (c) => c.jwt.proxySession!,
    status: 200,
  },
  {
    source: `${ZAC_PROXY} (probeSession)`,
    does: 'the ended session probed: 401 UNAUTHORIZED',
    method: 'GET',
    path: () => `${MGMT}/current-api-session`,
    session: (c) => c.jwt.proxySession!,
    status: 401,
    check: (b) => expect(b.error.code).toBe('UNAUTHORIZED'),
  },
  {
    source: `${ZAC_PROXY} (refreshIdpOrigins)`,
    does: 'the signers’ externalAuthUrl (none for one made with it left empty)',
    method: 'GET',
    path: () => `${CLIENT}/external-jwt-signers?limit=500`,
    as: 'none',
    status: 200,
    check: (b) => {
      const signer = b.data.find((s: { name: string }) => s.name === 'zac-signer-2');
      expect(signer.externalAuthUrl).toBeNull();
    },
  },
  // ---- the CLI ----
  {
    source: CLI_LIST,
    does: '`ziti edge list identities \'name contains "zac-device"\'`: url.Values encoding, meta.pagination',
    method: 'GET',
    path: () => `${MGMT}/identities?${goQuery({ filter: 'name contains "zac-device" sort by name' })}`,
    as: 'cli',
    status: 200,
    check: (b) => {
      expect(names(b)).toEqual(['zac-device-1', 'zac-device-2']);
      paged(b, 10, 0);
    },
  },
  {
    source: `${CLI} ziti/cmd/edge/common.go (mapNameToID)`,
    does: 'a name where an id is expected: `filter=id="<name>"` first, an empty page (not an error)',
    method: 'GET',
    path: () => `${MGMT}/services?${goQuery({ filter: 'id="zac-svc"' })}`,
    as: 'cli',
    status: 200,
    check: (b) => expect(b.data).toEqual([]),
  },
  {
    source: `${CLI} ziti/cmd/edge/common.go (mapNameToID, mapNamesToIDs)`,
    does: 'then `filter=name="<name>"`; lists of names: `id = "<v>" or name="<v>"`',
    method: 'GET',
    path: () => `${MGMT}/services?${goQuery({ filter: 'id = "zac-svc" or name="zac-svc"' })}`,
    as: 'cli',
    status: 200,
    check: (b, c) => expect(b.data.map((r: { id: string }) => r.id)).toEqual([c.ids.svc]),
  },
  {
    source: CLI_LIST,
    does: '`list identities --role-filters #zac-a --role-filters #zac-c --role-semantic AnyOf`',
    method: 'GET',
    path: () => `${MGMT}/identities?${goQuery({ roleFilter: ['#zac-a', '#zac-c'], roleSemantic: 'AnyOf' })}`,
    as: 'cli',
    status: 200,
    check: (b) => expect(names(b).sort()).toEqual(['zac-device-1', 'zac-device-2']),
  },
  {
    source: CLI_LIST,
    does: '`list services --config-types all`',
    method: 'GET',
    path: () => `${MGMT}/services?${goQuery({ configTypes: 'all' })}`,
    as: 'cli',
    status: 200,
    check: (b) => {
      expect(b.data[0]).toMatchObject({ name: 'zac-svc', encryptionRequired: true });
      expect(b.data[0].terminatorStrategy).toBe('smartrouting');
      expect(b.data[0].roleAttributes).toEqual(['web']);
    },
  },
  {
    source: CLI_LIST,
    does: '`list ext-jwt-signers` (typed client dereferences audience, claimsProperty, useExternalId, issuer)',
    method: 'GET',
    path: () => `${MGMT}/external-jwt-signers`,
    as: 'cli',
    status: 200,
    check: (b) => {
      for (const signer of b.data) {
        for (const f of ['audience', 'claimsProperty', 'useExternalId', 'issuer', 'enabled', 'name']) {
          expect(signer[f], f).not.toBeNull();
          expect(signer[f], f).toBeDefined();
        }
      }
    },
  },
  {
    source: `${CLI} ziti/cmd/edge/update_extjwtsigner.go (Scopes nil unless --scopes) + edge-api rest_model/external_jwt_signer_patch.go`,
    does: '`update ext-jwt-signer --audience`: scopes sent as null (no omitempty on the array): no change',
    method: 'PATCH',
    path: (c) => `${MGMT}/external-jwt-signers/${c.ids.signer1}`,
    body: () => ({ audience: 'aud2', scopes: null, tags: {} }),
    as: 'cli',
    status: 200,
  },
  {
    source: `${CLI} ziti/cmd/edge/create_posture_check.go (runCreatePostureCheckProcessMulti) + edge-api rest_model/process_multi.go`,
    does: '`create posture-check process-multi` without -s/-f: hashes and signerFingerprints null, roleAttributes null',
    method: 'POST',
    path: () => `${MGMT}/posture-checks`,
    body: () => ({
      processes: [{ hashes: null, osType: 'Linux', path: '/usr/bin/x', signerFingerprints: null }],
      semantic: 'AllOf',
      name: 'pm-cli',
      roleAttributes: null,
      typeId: 'PROCESS_MULTI',
    }),
    as: 'cli',
    status: 201,
    check: (b, c) => {
      c.ids.pmCli = b.data.id;
    },
  },
  {
    source: 'openziti/sdk-golang ziti/edge/posture/process.go + process_notwin.go (SignerFingerprints nil off Windows)',
    does: 'posture-response-bulk with a PROCESS response whose signerFingerprints is null: accepted, all of it',
    method: 'POST',
    path: () => `${CLIENT}/posture-response-bulk`,
    body: (c) => [
      { id: c.ids.pmCli, typeId: 'PROCESS', path: '/usr/bin/x', isRunning: true, hash: '', signerFingerprints: null },
      { id: c.ids.pmCli, typeId: 'MAC', macAddresses: null },
    ],
    as: 'cli',
    status: 200,
  },
  {
    source: CLI_LIST,
    does: '`list auth-policies` (dereferences every primary/secondary setting)',
    method: 'GET',
    path: () => `${MGMT}/auth-policies`,
    as: 'cli',
    status: 200,
    check: (b) => {
      for (const p of b.data) {
        expect(typeof p.primary.updb.maxAttempts).toBe('number');
        expect(typeof p.primary.cert.allowExpiredCerts).toBe('boolean');
        expect(typeof p.primary.extJwt.allowed).toBe('boolean');
        expect(typeof p.secondary.requireTotp).toBe('boolean');
      }
    },
  },
  {
    source: CLI_LIST,
    does: '`list authenticators` (type-asserts method, identityId, identity.name as strings)',
    method: 'GET',
    path: () => `${MGMT}/authenticators`,
    as: 'cli',
    status: 200,
    check: (b) => {
      for (const a of b.data) {
        for (const v of [a.method, a.identityId, a.identity.name]) expect(typeof v).toBe('string');
        if ('caId' in a) expect(typeof a.caId).toBe('string');
        if ('username' in a) expect(typeof a.username).toBe('string');
      }
    },
  },
  ...(
    [
      ['service-policies', ['serviceRoles', 'identityRoles', 'postureCheckRoles']],
      ['edge-router-policies', ['edgeRouterRoles', 'identityRoles']],
      ['service-edge-router-policies', ['serviceRoles', 'edgeRouterRoles']],
    ] as const
  ).map(
    ([kind, roles]): Row => ({
      source: `${CLI_LIST} (mapRoleIdsToNames)`,
      does: `\`list ${kind}\`: every <roles>Display is an array of {role, name} (a missing one fails the command)`,
      method: 'GET',
      path: () => `${MGMT}/${kind}?${goQuery({ filter: 'name contains "zac"' })}`,
      as: 'cli',
      status: 200,
      check: (b) => {
        expect(b.data.length).toBe(1);
        for (const field of roles) {
          const display = b.data[0][`${field}Display`];
          expect(Array.isArray(display), `${field}Display`).toBe(true);
          for (const d of display) expect([typeof d.role, typeof d.name]).toEqual(['string', 'string']);
        }
      },
    }),
  ),
  {
    source: CLI_LIST,
    does: '`list edge-routers`: isOnline, noTraversal, cost, roleAttributes',
    method: 'GET',
    path: () => `${MGMT}/edge-routers`,
    as: 'cli',
    status: 200,
    check: (b) => {
      expect(b.data[0]).toMatchObject({
        isOnline: false,
        noTraversal: false,
        cost: 0,
        roleAttributes: ['zac-routers'],
      });
    },
  },
  {
    source: CLI_LIST,
    does:
      '`list terminators` (type-asserts service.name, router.name, binding, address, identity, precedence ' +
      'as strings, cost and dynamicCost as numbers)',
    method: 'GET',
    path: () => `${MGMT}/terminators`,
    as: 'cli',
    status: 200,
    check: (b) => {
      const t = b.data[0];
      for (const v of [t.service.name, t.router.name, t.binding, t.address, t.identity, t.precedence]) {
        expect(typeof v).toBe('string');
      }
      expect([typeof t.cost, typeof t.dynamicCost]).toEqual(['number', 'number']);
    },
  },
  {
    source: CLI_LIST,
    does: '`list enrollments`: id, method, identityId, identity.name, expiresAt, token',
    method: 'GET',
    path: () => `${MGMT}/enrollments?${goQuery({ filter: 'method = "ott"' })}`,
    as: 'cli',
    status: 200,
    check: (b) => {
      expect(b.data.length).toBeGreaterThan(0);
      for (const e of b.data) {
        expect(e).toMatchObject({ method: 'ott' });
        for (const v of [e.id, e.identityId, e.identity.name, e.expiresAt, e.token]) expect(typeof v).toBe('string');
      }
    },
  },
  {
    source: `${CLI} ziti/cmd/edge/create_edge_router.go`,
    does: '`ziti edge create edge-router cli-er -o cli-er.jwt`: create, then the detail’s enrollmentJwt',
    method: 'POST',
    path: () => `${MGMT}/edge-routers`,
    body: () => ({ name: 'cli-er', isTunnelerEnabled: false, roleAttributes: null, cost: 0, noTraversal: false }),
    as: 'cli',
    status: 201,
    check: (b, c) => {
      c.ids.cliEr = b.data.id;
    },
  },
  {
    source: `${CLI} ziti/cmd/edge/create_edge_router.go`,
    does: 'the detail the router JWT file is written from',
    method: 'GET',
    path: (c) => `${MGMT}/edge-routers/${c.ids.cliEr}`,
    as: 'cli',
    status: 200,
    check: (b, c) => expect(decodeJwt(b.data.enrollmentJwt)).toMatchObject({ em: 'erott', sub: c.ids.cliEr }),
  },
  {
    source: CLI_ADVISOR,
    does: 'policy-advisor pages identities with `filter=true skip N limit 2` until an empty page',
    method: 'GET',
    path: () => `${MGMT}/identities?${goQuery({ filter: 'true skip 2 limit 2' })}`,
    as: 'cli',
    status: 200,
    check: (b) => {
      expect(b.data.length).toBe(2);
      expect(b.meta.pagination).toMatchObject({ limit: 2, offset: 2, totalCount: 4 });
    },
  },
  {
    source: `${CLI_ADVISOR} + ziti/util/rest.go (EdgeControllerListSubEntities)`,
    does: 'an identity’s services, paged by the filter: `identities/{id}/services?filter=true skip 1 limit 2`',
    method: 'GET',
    path: (c) => `${MGMT}/identities/${c.ids.device1}/services?${goQuery({ filter: 'true skip 1 limit 2' })}`,
    as: 'cli',
    status: 200,
    check: (b) => expect(b.data).toEqual([]),
  },
  {
    source: CLI_ADVISOR,
    does: 'policy advice: identity.name, service.name, isDialAllowed, router counts, commonRouters[].isOnline',
    method: 'GET',
    path: (c) => `${MGMT}/identities/${c.ids.device1}/policy-advice/${c.ids.svc}`,
    as: 'cli',
    status: 200,
    check: (b) => {
      expect(b.data).toMatchObject({
        identity: { name: 'zac-device-1' },
        service: { name: 'zac-svc' },
        isDialAllowed: true,
        isBindAllowed: false,
      });
      expect(typeof b.data.identityRouterCount).toBe('number');
      expect(typeof b.data.serviceRouterCount).toBe('number');
      for (const r of b.data.commonRouters) expect(typeof r.isOnline).toBe('boolean');
    },
  },
  {
    source: `${CLI} ziti/cmd/edge/create_identity.go`,
    does: '`ziti edge create identity cli-id -o cli-id.jwt`: create, then the detail’s enrollment.ott.jwt',
    method: 'POST',
    path: () => `${MGMT}/identities`,
    body: () => cliIdentity('cli-id', 'User', { ott: true }),
    as: 'cli',
    status: 201,
    check: (b, c) => {
      c.ids.cli = b.data.id;
    },
  },
  {
    source: `${CLI} ziti/cmd/edge/create_identity.go`,
    does: 'the detail the JWT file is written from',
    method: 'GET',
    path: (c) => `${MGMT}/identities/${c.ids.cli}`,
    as: 'cli',
    status: 200,
    check: (b, c) => {
      const jwt = b.data.enrollment.ott.jwt as string;
      expect(decodeJwt(jwt)).toMatchObject({ em: 'ott', sub: c.ids.cli });
      c.jwt.cli = jwt;
    },
  },
  {
    source: `${CLI} ziti/cmd/edge/create_identity.go`,
    does: '`create identity cli-updb --updb cli-user -o …`: enrollment.updb, then enrollment.updb.jwt',
    method: 'POST',
    path: () => `${MGMT}/identities`,
    body: () => cliIdentity('cli-updb', 'Device', { updb: 'cli-user' }),
    as: 'cli',
    status: 201,
    check: (b, c) => {
      c.ids.cliUpdb = b.data.id;
    },
  },
  {
    source: `${CLI} ziti/cmd/edge/create_identity.go (getIdentityJwt)`,
    does: 'the updb enrollment JWT of the detail',
    method: 'GET',
    path: (c) => `${MGMT}/identities/${c.ids.cliUpdb}`,
    as: 'cli',
    status: 200,
    check: (b) => {
      expect(decodeJwt(b.data.enrollment.updb.jwt).em).toBe('updb');
    },
  },
  {
    source: `${CLI} ziti/cmd/edge/update_identity.go`,
    does: '`ziti edge update identity cli-id --role-attributes x`: PATCH',
    method: 'PATCH',
    path: (c) => `${MGMT}/identities/${c.ids.cli}`,
    body: () => ({ roleAttributes: ['cli-x'] }),
    as: 'cli',
    status: 200,
  },
  {
    source: `${CLI} ziti/cmd/edge/update_identity.go`,
    does: 'an update of an unknown identity: 404 envelope',
    method: 'PATCH',
    path: () => `${MGMT}/identities/no-such-id`,
    body: () => ({ roleAttributes: ['cli-x'] }),
    as: 'cli',
    status: 404,
    check: (b) => expect(b.error.code).toBe('NOT_FOUND'),
  },
  {
    source: `${CLI} ziti/cmd/edge/delete.go`,
    does: '`ziti edge delete identity cli-id`',
    method: 'DELETE',
    path: (c) => `${MGMT}/identities/${c.ids.cli}`,
    as: 'cli',
    status: 200,
  },
  {
    source: CLI_CLUSTER,
    does: '`ziti fabric cluster list` on a single node: the error the CLI prints',
    method: 'GET',
    path: () => '/fabric/v1/cluster/list-members',
    as: 'cli',
    status: 400,
    check: (b) => expect(b.error.code).toBe('SERVER_NOT_RUNNING_IN_HA_MODE'),
  },
  {
    source: CLI_CLUSTER,
    does: '`ziti fabric cluster add` on a single node',
    method: 'POST',
    path: () => '/fabric/v1/cluster/add-member',
    body: () => ({ address: 'tls:ctl2.example.test:6262', isVoter: true }),
    as: 'cli',
    status: 400,
    check: (b) => expect(b.error.code).toBe('SERVER_NOT_RUNNING_IN_HA_MODE'),
  },
];

/** The body `ziti edge create identity <type> <name>` builds (gabs: nil slices and maps become null). */
function cliIdentity(name: string, type: string, enrollment: Record<string, unknown>) {
  return {
    name,
    type,
    enrollment,
    isAdmin: false,
    roleAttributes: null,
    tags: null,
    appData: null,
    defaultHostingCost: 0,
    serviceHostingCosts: {},
    serviceHostingPrecedences: {},
  };
}

/** ZAC's Identity model as its identity form posts it. */
function zacIdentity(name: string, roleAttributes: string[]) {
  return {
    name,
    type: 'Device',
    appData: {},
    isAdmin: false,
    roleAttributes,
    authPolicyId: 'default',
    externalId: '',
    defaultHostingCost: 0,
    defaultHostingPrecedence: 'default',
    tags: {},
    enrollment: { ott: true },
  };
}

/** ZAC's JwtSigner model as its form posts it with only name, audience, issuer and JWKS endpoint filled in. */
function zacSigner(name: string, jwksEndpoint: string) {
  return {
    name,
    audience: 'zac-audience',
    issuer: 'https://idp.example.test',
    clientId: '',
    claimsProperty: '',
    enabled: true,
    useExternalId: false,
    externalAuthUrl: '',
    kid: '',
    scopes: [],
    jwksEndpoint,
    tags: {},
    targetToken: 'ACCESS',
  };
}

function headersFor(row: Row, c: Ctx): Record<string, string> {
  const as = row.as ?? 'zac';
  const token = row.session?.(c) ?? c.admin;
  const base: Record<string, string> =
    as === 'zac'
      ? { 'zt-session': token, 'content-type': 'application/json', accept: 'application/json' }
      : as === 'cli'
        ? { 'zt-session': token, accept: 'application/json' }
        : {};
  // both send their JSON bodies as application/json
  if (row.body !== undefined) base['content-type'] = 'application/json';
  return { ...base, ...(row.headers ?? {}) };
}

let srv: TestServer;
const ctx: Ctx = { admin: '', ids: {}, jwt: {} };

beforeAll(async () => {
  srv = await startServer();
  ctx.admin = await login(srv.base);
  ctx.jwt.caPem = (await createRootCa({ commonName: 'zac-third-party-ca' })).certPem;
});
afterAll(() => srv?.stop());

describe('ZAC and CLI calls, in order', () => {
  for (const row of ROWS) {
    it(`${row.method} ${row.does} [${row.source}]`, async () => {
      const res = await call(row.method, `${srv.base}${row.path(ctx)}`, {
        headers: headersFor(row, ctx),
        ...(row.body ? { raw: JSON.stringify(row.body(ctx)) } : {}),
      });
      expect(res.status, res.text).toBe(row.status);
      if (row.status >= 400) {
        expect(res.body.error.requestId).toMatch(/\S/);
        expect(res.body.meta).toBeTypeOf('object');
      }
      row.check?.(res.body, ctx, res);
    });
  }
});

/** A GET with a content-length body, as the `request` library sends `{json: {}}` (ZAC's node server, DoCall). */
function getWithBody(url: string, token: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const body = '{}';
    const req = request(
      url,
      {
        method: 'GET',
        headers: { 'zt-session': token, 'content-type': 'application/json', 'content-length': String(body.length) },
        agent: false,
      },
      (res) => {
        let text = '';
        res.on('data', (chunk) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('a cluster member (a scripted cluster view)', () => {
  it(`\`ziti fabric cluster list\`: id, address, voter, leader, version, connected dereferenced, readOnly [${CLI_CLUSTER}]`, async () => {
    const members = [fakeMember('n1', true, ['https://n1.example:1280']), fakeMember('n2', true, [srv.base])];
    srv.ctl.svc.cluster = fakeClusterView('n2', () => members);
    try {
      const res = await call('GET', `${srv.base}/fabric/v1/cluster/list-members`, {
        headers: { 'zt-session': ctx.admin, accept: 'application/json' },
      });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.map((m: { id: string; leader: boolean }) => [m.id, m.leader])).toEqual([
        ['n1', true],
        ['n2', false],
      ]);
      for (const m of res.body.data) {
        expect([typeof m.id, typeof m.address, typeof m.version]).toEqual(['string', 'string', 'string']);
        expect([typeof m.voter, typeof m.leader, typeof m.connected]).toEqual(['boolean', 'boolean', 'boolean']);
        expect(typeof m.readOnly).toBe('boolean');
      }
    } finally {
      srv.ctl.svc.cluster = null;
    }
  });
});

describe('calls the shared JSON client cannot make', () => {
  it(`GET with the JSON body {} (the request library's json: {}) [${ZAC_NODE} (DoCall, GetSubs, /api/call)]`, async () => {
    const res = await getWithBody(`${srv.mgmt}/services?limit=100&offset=0&sort=name%20ASC`, ctx.admin);
    expect(res.status, res.text).toBe(200);
    expect(JSON.parse(res.text).data.map((r: { name: string }) => r.name)).toEqual(['zac-svc']);
  });

  it(`legacy enroll: POST /enroll?method=ott&token=… with a PEM CSR [${CLI} ziti/cmd/edge enroll (sdk-golang enroll)]`, async () => {
    const made = await call('POST', `${srv.mgmt}/identities`, {
      token: ctx.admin,
      body: { name: 'cli-enrollee', type: 'Default', isAdmin: false, enrollment: { ott: true } },
    });
    const detail = await call('GET', `${srv.mgmt}/identities/${made.body.data.id}`, { token: ctx.admin });
    const token = detail.body.data.enrollment.ott.token as string;
    const pem = await csr('cli-enrollee', await generateKeyPair());
    const res = await call('POST', `${srv.client}/enroll?${goQuery({ method: 'ott', token: String(token) })}`, {
      headers: { 'content-type': 'application/x-pem-file', accept: 'application/json' },
      raw: pem,
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.cert).toContain('BEGIN CERTIFICATE');
  });
});
