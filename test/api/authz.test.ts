/**
 * Authorization, table-driven: every operation Keel serves × every kind of caller × every kind of target → the
 * status it must answer. Each access rule in src/ (the route guard in src/api/register.ts, the identity and
 * authenticator write guards in src/model) has rows that fail when the rule is removed; the table must name every
 * served operation, so a new operation without rows fails the suite.
 *
 * Every request is a fresh one against fresh targets (a write that should have been refused cannot spoil the next
 * row), and goes through `call()`, so each response is also checked against OpenZiti's spec.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/api/errors.js';
import type { Caller } from '../../src/api/op.js';
import { authenticators } from '../../src/model/authenticator.js';
import { createRootCa, issueServerCert } from '../../src/pki/index.js';
import { opensslCsr, Scratch } from '../pki/helpers.js';
import { ADMIN_PASSWORD, call, login, startServer, type TestServer } from '../support/server.js';
import { SPEC_AVAILABLE } from '../support/spec.js';
import { exercisedStatuses } from '../support/spec-check.js';

/** Caller kinds, in the order of the status columns below. */
const CALLERS = [
  'admin', // a (non-default) admin
  'identity', // permissions: ['identity']
  'identityRead', // permissions: ['identity.read']
  'readonly', // permissions: ['admin_readonly']
  'plain', // no permissions
  'partial', // an admin whose session still waits for MFA
  'anon', // no session token
  'bogus', // a token no session has
] as const;
type CallerKind = (typeof CALLERS)[number];

const PERMISSIONS: Record<Exclude<CallerKind, 'anon' | 'bogus'>, { isAdmin: boolean; permissions: string[] }> = {
  admin: { isAdmin: true, permissions: [] },
  identity: { isAdmin: false, permissions: ['identity'] },
  identityRead: { isAdmin: false, permissions: ['identity.read'] },
  readonly: { isAdmin: false, permissions: ['admin_readonly'] },
  plain: { isAdmin: false, permissions: [] },
  partial: { isAdmin: true, permissions: [] },
};

/** Target kinds: what `{id}` names (an identity, or the authenticator or session of one). */
type TargetKind = 'plain' | 'admin' | 'default';

// status columns, one per caller kind in CALLERS order
const EVERYONE = '200 200 200 200 200 200 200 200';
const ANY_SESSION = '200 200 200 200 200 200 401 401'; // MFA-pending sessions included
const FULL_SESSION = '200 200 200 200 200 401 401 401';
const IDENTITY_READ = '200 200 200 200 401 401 401 401';
const ADMIN_READ = '200 401 401 200 401 401 401 401'; // admins and admin_readonly
const identityWrite = (s: number) => `${s} ${s} 401 401 401 401 401 401`;
const adminOnly = (s: number) => `${s} 401 401 401 401 401 401 401`;

interface Prepared {
  id?: string;
  /** `{serviceId}` of the path, where it has one. */
  serviceId?: string;
  query?: string;
  body?: unknown;
  /** A text/plain body instead of JSON. */
  text?: string;
  /** Undoes what an allowed request did to a fixture that cannot be made afresh (the default admin's login). */
  after?: () => Promise<void>;
}

interface Row {
  /** `<api> <METHOD> <path template>`, as `srv.ctl.ops` names it. */
  op: string;
  target?: TargetKind;
  /** What the body tries, when one operation has several rows for the same target. */
  variant?: string;
  /** Builds one request, on fresh fixtures (called once per caller). */
  prepare?: () => Promise<Prepared>;
  expect: string;
  /** The request ends the caller's own session: use a fresh one. */
  endsSession?: boolean;
}

let srv: TestServer;
let root: string; // the default admin's token, to build fixtures
let defaultAdmin: { id: string; authenticatorId: string };
const users = new Map<CallerKind, { username: string; password: string; token: string }>();
let seq = 0;
const uniq = (prefix: string) => `${prefix}-${++seq}`;

async function adminCall(method: string, path: string, body?: unknown) {
  const r = await call(method, `${srv.mgmt}${path}`, { token: root, body });
  if (r.status >= 300) throw new Error(`fixture ${method} ${path}: ${r.status} ${r.text}`);
  return r.body;
}

/** A fresh identity of a kind (the default admin is the one there is); with a updb login when asked. */
async function identity(kind: TargetKind, withLogin = false): Promise<{ id: string; username?: string }> {
  if (kind === 'default') return { id: defaultAdmin.id, username: 'admin' };
  const name = uniq(`target-${kind}`);
  const id = (await adminCall('POST', '/identities', { name, type: 'User', isAdmin: kind === 'admin' })).data.id;
  if (!withLogin) return { id };
  await adminCall('POST', '/authenticators', { method: 'updb', identityId: id, username: name, password: 'target-pw' });
  return { id, username: name };
}

/** The token of a new identity's enrollment (`{ott: true}` or `{updb: username}`). */
async function enrollmentToken(enrollment: Record<string, unknown>): Promise<string> {
  const body = { name: uniq('enrollee'), type: 'Device', isAdmin: false, enrollment };
  const { id } = (await adminCall('POST', '/identities', body)).data;
  const detail = (await adminCall('GET', `/identities/${id}`)).data;
  return (Object.values(detail.enrollment)[0] as { token: string }).token;
}

/** A cert authenticator issued by the network: a new identity enrolled by OTT with the shared CSR. */
async function networkCertAuthenticator(): Promise<string> {
  const token = await enrollmentToken({ ott: true });
  const r = await call('POST', `${srv.client}/enroll/ott`, { body: { token, clientCsr: clientCsr() } });
  if (r.status !== 200) throw new Error(`fixture enroll: ${r.text}`);
  const filter = encodeURIComponent('method="cert"');
  const list = await adminCall('GET', `/authenticators?filter=${filter}&sort=createdAt%20desc&limit=1`);
  return list.data[0].id as string;
}

let csrPem: string | undefined;
/** One CSR made by openssl, reused for every OTT row (each enrollment signs it anew). */
function clientCsr(): string {
  if (csrPem === undefined) {
    const scratch = new Scratch();
    try {
      csrPem = opensslCsr(scratch, 'authz', 'ec', '/CN=authz');
    } finally {
      scratch.remove();
    }
  }
  return csrPem;
}

async function authenticatorOf(kind: TargetKind): Promise<string> {
  if (kind === 'default') return defaultAdmin.authenticatorId;
  const { id } = await identity(kind, true);
  return (await adminCall('GET', `/identities/${id}/authenticators`)).data[0].id;
}

async function sessionOf(kind: TargetKind): Promise<string> {
  const { username } = await identity(kind, true);
  const token = await login(srv.base, username, kind === 'default' ? ADMIN_PASSWORD : 'target-pw');
  return (await call('GET', `${srv.mgmt}/current-api-session`, { token })).body.data.id;
}

async function tokenOf(caller: CallerKind, fresh: boolean): Promise<string | undefined> {
  if (caller === 'anon') return undefined;
  if (caller === 'bogus') return '00000000-0000-4000-8000-000000000000';
  const u = users.get(caller)!;
  return fresh ? login(srv.base, u.username, u.password) : u.token;
}

const TARGETS: TargetKind[] = ['plain', 'admin', 'default'];
const forTargets = (make: (t: TargetKind) => Row): Row[] => TARGETS.map(make);

function rows(): Row[] {
  const out: Row[] = [];
  for (const api of ['client', 'management'] as const) {
    for (const path of ['/version', '/', '/enumerated-capabilities', '/specs', '/swagger.json']) {
      out.push({ op: `${api} GET ${path}`, expect: EVERYONE });
    }
    for (const path of ['/specs/{id}', '/specs/{id}/spec']) {
      out.push({ op: `${api} GET ${path}`, prepare: async () => ({ id: `edge-${api}` }), expect: EVERYONE });
    }
    out.push({
      op: `${api} POST /authenticate`,
      prepare: async () => ({
        query: 'method=password',
        body: { username: 'authz-login', password: 'authz-login-pw' },
      }),
      expect: EVERYONE,
    });
    out.push({ op: `${api} GET /current-api-session`, expect: ANY_SESSION });
    out.push({ op: `${api} DELETE /current-api-session`, expect: ANY_SESSION, endsSession: true });
    out.push({ op: `${api} GET /current-identity`, expect: FULL_SESSION });
    out.push({ op: `${api} GET /controllers`, expect: FULL_SESSION });
  }
  out.push({ op: 'client GET /protocols', expect: EVERYONE });
  for (const api of ['client', 'management'] as const)
    out.push({ op: `${api} GET /.well-known/est/cacerts`, expect: EVERYONE });
  for (const api of ['client', 'management'] as const) out.push({ op: `${api} GET /network-jwts`, expect: EVERYONE });

  // enrollment (client API, no session needed): each request consumes a fresh enrollment's token
  out.push(
    {
      op: 'client POST /enroll/ott',
      prepare: async () => ({ body: { token: await enrollmentToken({ ott: true }), clientCsr: clientCsr() } }),
      expect: EVERYONE,
    },
    {
      op: 'client POST /enroll/updb',
      prepare: async () => ({
        query: `token=${await enrollmentToken({ updb: uniq('enroll-user') })}`,
        body: { password: 'enrolled-pw' },
      }),
      expect: EVERYONE,
    },
    {
      op: 'client POST /enroll',
      prepare: async () => ({
        query: `method=updb&token=${await enrollmentToken({ updb: uniq('enroll-user') })}`,
        body: { password: 'enrolled-pw' },
      }),
      expect: EVERYONE,
    },
    {
      // without a client certificate (this server is plain HTTP) an ottca enrollment fails alike for everyone: the
      // row shows that no session is asked for (the enrollment itself: test/api/enroll.test.ts)
      op: 'client POST /enroll/ottca',
      prepare: async () => ({ body: { token: '00000000-0000-4000-8000-000000000001' } }),
      expect: '400 400 400 400 400 400 400 400',
    },
    { op: 'client POST /enroll/ca', expect: '400 400 400 400 400 400 400 400' },
    // extending is for the authenticator's own identity: any other's is not found, for admins too
    ...(['client', 'management'] as const).flatMap((api) =>
      ['extend', 'extend-verify'].map((action) => ({
        op: `${api} POST /current-identity/authenticators/{id}/${action}`,
        prepare: async () => ({
          id: await networkCertAuthenticator(),
          body: action === 'extend' ? { clientCertCsr: clientCsr() } : { clientCert: 'x' },
        }),
        expect: '404 404 404 404 404 401 401 401',
      })),
    ),
    { op: 'client GET /enroll/jwks', expect: EVERYONE },
  );

  // identities
  const m = 'management';
  // third-party CAs (permission entity `ca`): a fresh CA per request
  const newCa = async (verified = false) => {
    const made = await createRootCa({ commonName: uniq('authz-ca') });
    const body = {
      name: uniq('authz-ca'),
      certPem: made.certPem,
      isAutoCaEnrollmentEnabled: false,
      isOttCaEnrollmentEnabled: true,
      isAuthEnabled: false,
      identityRoles: [],
    };
    const id = (await adminCall('POST', '/cas', body)).data.id as string;
    const token = (await adminCall('GET', `/cas/${id}`)).data.verificationToken as string;
    const proof = (await issueServerCert(made, { commonName: token, usage: 'client' })).certPem;
    if (verified) {
      const r = await call('POST', `${srv.mgmt}/cas/${id}/verify`, {
        token: root,
        raw: proof,
        headers: { 'content-type': 'text/plain' },
      });
      if (r.status !== 200) throw new Error(`fixture verify: ${r.text}`);
    }
    return { id, body, proof };
  };
  const caUpdate = {
    name: 'x',
    isAutoCaEnrollmentEnabled: false,
    isOttCaEnrollmentEnabled: false,
    isAuthEnabled: false,
    identityRoles: [],
    identityNameFormat: '[commonName]',
  };
  out.push(
    { op: `${m} GET /cas`, expect: ADMIN_READ },
    {
      op: `${m} POST /cas`,
      prepare: async () => {
        const made = await createRootCa({ commonName: uniq('authz-new-ca') });
        const { body } = await newCa();
        return { body: { ...body, name: uniq('authz-ca'), certPem: made.certPem } };
      },
      expect: adminOnly(201),
    },
    { op: `${m} GET /cas/{id}`, prepare: async () => ({ id: (await newCa()).id }), expect: ADMIN_READ },
    {
      op: `${m} PUT /cas/{id}`,
      prepare: async () => ({ id: (await newCa()).id, body: { ...caUpdate, name: uniq('authz-put') } }),
      expect: adminOnly(200),
    },
    {
      op: `${m} PATCH /cas/{id}`,
      prepare: async () => ({ id: (await newCa()).id, body: { isAuthEnabled: true } }),
      expect: adminOnly(200),
    },
    { op: `${m} DELETE /cas/{id}`, prepare: async () => ({ id: (await newCa()).id }), expect: adminOnly(200) },
    { op: `${m} GET /cas/{id}/jwt`, prepare: async () => ({ id: (await newCa()).id }), expect: ADMIN_READ },
    {
      op: `${m} POST /cas/{id}/verify`,
      prepare: async () => {
        const ca = await newCa();
        return { id: ca.id, text: ca.proof };
      },
      expect: adminOnly(200),
    },
  );

  // outstanding enrollments (management): admins, and admin_readonly for reads (permission entity `enrollment`)
  const HOUR_MS = 3_600_000;
  const outstanding = async () => {
    const { id } = await identity('plain');
    const body = { method: 'ott', identityId: id, expiresAt: new Date(Date.now() + HOUR_MS).toISOString() };
    return { identityId: id, id: (await adminCall('POST', '/enrollments', body)).data.id as string };
  };
  out.push(
    { op: `${m} GET /enrollments`, expect: ADMIN_READ },
    {
      op: `${m} POST /enrollments`,
      prepare: async () => ({
        body: {
          method: 'ott',
          identityId: (await identity('plain')).id,
          expiresAt: new Date(Date.now() + HOUR_MS).toISOString(),
        },
      }),
      expect: adminOnly(201),
    },
    { op: `${m} GET /enrollments/{id}`, prepare: async () => ({ id: (await outstanding()).id }), expect: ADMIN_READ },
    {
      op: `${m} DELETE /enrollments/{id}`,
      prepare: async () => ({ id: (await outstanding()).id }),
      expect: adminOnly(200),
    },
    {
      op: `${m} POST /enrollments/{id}/refresh`,
      prepare: async () => ({
        id: (await outstanding()).id,
        body: { expiresAt: new Date(Date.now() + 2 * HOUR_MS).toISOString() },
      }),
      expect: adminOnly(200),
    },
    {
      op: `${m} POST /authenticators/{id}/re-enroll`,
      prepare: async () => ({
        id: await authenticatorOf('plain'),
        body: { expiresAt: new Date(Date.now() + HOUR_MS).toISOString() },
      }),
      expect: adminOnly(201),
    },
    {
      op: `${m} POST /authenticators/{id}/request-extend`,
      prepare: async () => ({ id: await networkCertAuthenticator(), body: { rollKeys: false } }),
      expect: adminOnly(200),
    },
    {
      op: `${m} GET /identities/{id}/enrollments`,
      prepare: async () => ({ id: (await outstanding()).identityId }),
      expect: ADMIN_READ,
    },
  );

  out.push({ op: `${m} GET /identities`, expect: IDENTITY_READ });
  for (const [variant, extra, status] of [
    ['plain', { isAdmin: false }, identityWrite(201)],
    ['admin', { isAdmin: true }, adminOnly(201)],
    ['with permissions', { isAdmin: false, permissions: ['identity.read'] }, adminOnly(201)],
  ] as const) {
    out.push({
      op: `${m} POST /identities`,
      variant,
      prepare: async () => ({ body: { name: uniq('created'), type: 'User', ...extra } }),
      expect: status,
    });
  }
  out.push(
    ...forTargets((target) => ({
      op: `${m} GET /identities/{id}`,
      target,
      prepare: async () => ({ id: (await identity(target)).id }),
      expect: IDENTITY_READ,
    })),
    ...forTargets((target) => ({
      op: `${m} GET /identities/{id}/authenticators`,
      target,
      prepare: async () => ({ id: (await identity(target)).id }),
      // OpenZiti files it under `authenticator.read`, which it grants nobody: admins and admin_readonly
      expect: ADMIN_READ,
    })),
  );
  const editBody = async (target: TargetKind, method: string, change: object): Promise<Prepared> => {
    const { id } = await identity(target);
    const current = (await adminCall('GET', `/identities/${id}`)).data;
    const keep = method === 'PUT' ? { name: current.name, type: 'User', isAdmin: current.isAdmin } : {};
    return { id, body: { ...keep, tags: { edited: 'yes' }, ...change } };
  };
  const edits: [TargetKind, string, object, string][] = [
    // `identity` holders may edit plain identities, not make them admins or grant permissions …
    ['plain', 'edit', {}, identityWrite(200)],
    ['plain', 'promote', { isAdmin: true }, adminOnly(200)],
    ['plain', 'grant permissions', { permissions: ['identity'] }, adminOnly(200)],
    // … nor edit or demote an admin (the `existing?.isAdmin` guard); nobody demotes the default admin
    ['admin', 'edit', {}, adminOnly(200)],
    ['admin', 'demote', { isAdmin: false }, adminOnly(200)],
    ['default', 'edit', {}, adminOnly(200)],
    ['default', 'demote', { isAdmin: false }, `400 ${adminOnly(200).slice(4)}`],
  ];
  for (const method of ['PUT', 'PATCH'] as const) {
    for (const [target, variant, change, status] of edits) {
      const op = `${m} ${method} /identities/{id}`;
      // non-admins may not PUT an identity at all (OpenZiti: "use PATCH instead")
      const expect = method === 'PUT' && status === identityWrite(200) ? adminOnly(200) : status;
      out.push({ op, target, variant, prepare: () => editBody(target, method, change), expect });
    }
  }
  out.push(
    {
      op: `${m} DELETE /identities/{id}`,
      target: 'plain',
      prepare: async () => ({ id: (await identity('plain')).id }),
      expect: identityWrite(200),
    },
    {
      op: `${m} DELETE /identities/{id}`,
      target: 'admin',
      prepare: async () => ({ id: (await identity('admin')).id }),
      expect: adminOnly(200),
    },
    {
      op: `${m} DELETE /identities/{id}`,
      target: 'default',
      prepare: async () => ({ id: defaultAdmin.id }),
      expect: `400 ${adminOnly(200).slice(4)}`,
    },
    { op: `${m} GET /identity-role-attributes`, expect: IDENTITY_READ },
    { op: `${m} GET /identity-types`, expect: FULL_SESSION },
    { op: `${m} GET /identity-types/{id}`, prepare: async () => ({ id: 'Default' }), expect: FULL_SESSION },
    { op: `${m} GET /auth-policies`, expect: ADMIN_READ },
    { op: `${m} GET /auth-policies/{id}`, prepare: async () => ({ id: 'default' }), expect: ADMIN_READ },
    { op: `${m} GET /config-types`, expect: ADMIN_READ },
    { op: `${m} GET /config-types/{id}`, prepare: async () => ({ id: 'g7cIWbcGg' }), expect: ADMIN_READ },
  );

  // config types and configs: reads for admins and admin_readonly, writes for admins (and their own permissions)
  const configType = async () => (await adminCall('POST', '/config-types', { name: uniq('ct'), schema: {} })).data.id;
  const config = async () =>
    (await adminCall('POST', '/configs', { name: uniq('cfg'), configTypeId: await configType(), data: {} })).data.id;
  out.push(
    {
      op: `${m} POST /config-types`,
      prepare: async () => ({ body: { name: uniq('ct'), schema: {} } }),
      expect: adminOnly(201),
    },
    {
      op: `${m} PUT /config-types/{id}`,
      prepare: async () => ({ id: await configType(), body: { name: uniq('ct') } }),
      expect: adminOnly(200),
    },
    {
      op: `${m} PATCH /config-types/{id}`,
      prepare: async () => ({ id: await configType(), body: { tags: { x: 1 } } }),
      expect: adminOnly(200),
    },
    { op: `${m} DELETE /config-types/{id}`, prepare: async () => ({ id: await configType() }), expect: adminOnly(200) },
    {
      op: `${m} GET /config-types/{id}/configs`,
      prepare: async () => ({ id: await configType() }),
      expect: ADMIN_READ,
    },
    { op: `${m} GET /configs`, expect: ADMIN_READ },
    { op: `${m} GET /configs/{id}`, prepare: async () => ({ id: await config() }), expect: ADMIN_READ },
    {
      op: `${m} POST /configs`,
      prepare: async () => ({ body: { name: uniq('cfg'), configTypeId: await configType(), data: {} } }),
      expect: adminOnly(201),
    },
    {
      op: `${m} PUT /configs/{id}`,
      prepare: async () => ({ id: await config(), body: { name: uniq('cfg'), data: {} } }),
      expect: adminOnly(200),
    },
    {
      op: `${m} PATCH /configs/{id}`,
      prepare: async () => ({ id: await config(), body: { tags: { x: 1 } } }),
      expect: adminOnly(200),
    },
    { op: `${m} DELETE /configs/{id}`, prepare: async () => ({ id: await config() }), expect: adminOnly(200) },
  );

  // authenticators: reads for admins and admin_readonly, writes for admins only (whoever owns them)
  out.push({ op: `${m} GET /authenticators`, expect: ADMIN_READ });
  out.push(
    ...forTargets((target) => ({
      op: `${m} GET /authenticators/{id}`,
      target,
      prepare: async () => ({ id: await authenticatorOf(target) }),
      expect: ADMIN_READ,
    })),
    ...forTargets((target) => ({
      op: `${m} POST /authenticators`,
      target,
      prepare: async () => ({
        body: { method: 'updb', identityId: (await identity(target)).id, username: uniq('login'), password: 'pw-123' },
      }),
      // the default admin already has a updb authenticator
      expect: target === 'default' ? `409 ${adminOnly(200).slice(4)}` : adminOnly(201),
    })),
    ...forTargets((target) => ({
      op: `${m} PUT /authenticators/{id}`,
      target,
      prepare: async () => {
        const id = await authenticatorOf(target);
        const { username } = (await adminCall('GET', `/authenticators/${id}`)).data;
        return { id, body: { username, password: target === 'default' ? ADMIN_PASSWORD : 'target-pw' } };
      },
      expect: adminOnly(200),
    })),
    ...forTargets((target) => ({
      op: `${m} PATCH /authenticators/{id}`,
      target,
      prepare: async () => ({ id: await authenticatorOf(target), body: { tags: { edited: 'yes' } } }),
      expect: adminOnly(200),
    })),
    ...forTargets((target) => ({
      op: `${m} DELETE /authenticators/{id}`,
      target,
      prepare: async () => ({
        id: await authenticatorOf(target),
        after: target === 'default' ? restoreDefaultAdminLogin : undefined,
      }),
      expect: adminOnly(200),
    })),
  );

  // API sessions are `ops` business (admin_readonly reads them)
  out.push({ op: `${m} GET /api-sessions`, expect: ADMIN_READ });
  out.push(
    ...forTargets((target) => ({
      op: `${m} GET /api-sessions/{id}`,
      target,
      prepare: async () => ({ id: await sessionOf(target) }),
      expect: ADMIN_READ,
    })),
    ...forTargets((target) => ({
      op: `${m} DELETE /api-sessions/{id}`,
      target,
      prepare: async () => ({ id: await sessionOf(target) }),
      expect: adminOnly(200),
    })),
  );
  out.push(...accessModelRows());
  out.push(...selfServiceRows());
  out.push(...operationsRows());
  out.push(...routerEnrollRows());
  out.push(...sessionCertificateRows());
  // identity status (disable/enable): identity permission holders may, like the other identity writes
  out.push(
    ...forTargets((target) => ({
      op: `${m} POST /identities/{id}/disable`,
      target,
      prepare: async () => ({ id: (await identity(target)).id, body: { durationMinutes: 0 } }),
      // nobody disables the default admin (400); only admins act on admins
      expect:
        target === 'plain'
          ? identityWrite(200)
          : target === 'admin'
            ? adminOnly(200)
            : `400 ${adminOnly(200).slice(4)}`,
    })),
    ...forTargets((target) => ({
      op: `${m} POST /identities/{id}/enable`,
      target,
      prepare: async () => ({ id: (await identity(target)).id }),
      expect: target === 'plain' ? identityWrite(200) : adminOnly(200),
    })),
    ...forTargets((target) => ({
      op: `${m} DELETE /identities/{id}/mfa`,
      target,
      prepare: async () => ({ id: (await identity(target)).id }),
      // the targets have no MFA (404) — once the route and the admin-target guard let the caller through
      expect: target === 'plain' ? identityWrite(404) : adminOnly(404),
    })),
  );

  // auth policies: admins (and the auth-policy permissions)
  const authPolicy = async () => (await adminCall('POST', '/auth-policies', policyBody())).data.id;
  out.push(
    { op: `${m} POST /auth-policies`, prepare: async () => ({ body: policyBody() }), expect: adminOnly(201) },
    {
      op: `${m} PUT /auth-policies/{id}`,
      prepare: async () => ({ id: await authPolicy(), body: policyBody() }),
      expect: adminOnly(200),
    },
    {
      op: `${m} PATCH /auth-policies/{id}`,
      prepare: async () => ({ id: await authPolicy(), body: { tags: { x: 1 } } }),
      expect: adminOnly(200),
    },
    {
      op: `${m} DELETE /auth-policies/{id}`,
      prepare: async () => ({ id: await authPolicy() }),
      expect: adminOnly(200),
    },
  );

  // external JWT signers: admins (and the external-jwt-signer permissions); the client's list is public
  const signerBody = () => ({
    name: uniq('signer'),
    enabled: true,
    issuer: 'https://issuer.example',
    audience: 'keel',
    jwksEndpoint: 'https://issuer.example/jwks',
    externalAuthUrl: 'https://issuer.example/auth',
  });
  const signer = async () => (await adminCall('POST', '/external-jwt-signers', signerBody())).data.id;
  out.push(
    { op: 'client GET /external-jwt-signers', expect: EVERYONE },
    { op: `${m} GET /external-jwt-signers`, expect: ADMIN_READ },
    { op: `${m} GET /external-jwt-signers/{id}`, prepare: async () => ({ id: await signer() }), expect: ADMIN_READ },
    { op: `${m} POST /external-jwt-signers`, prepare: async () => ({ body: signerBody() }), expect: adminOnly(201) },
    {
      op: `${m} PUT /external-jwt-signers/{id}`,
      prepare: async () => ({ id: await signer(), body: signerBody() }),
      expect: adminOnly(200),
    },
    {
      op: `${m} PATCH /external-jwt-signers/{id}`,
      prepare: async () => ({ id: await signer(), body: { tags: { x: 1 } } }),
      expect: adminOnly(200),
    },
    {
      op: `${m} DELETE /external-jwt-signers/{id}`,
      prepare: async () => ({ id: await signer() }),
      expect: adminOnly(200),
    },
  );

  // MFA self-service, for callers without an MFA enrolment (enrolment itself comes last: it changes the caller):
  // every session may call them and finds nothing to act on; MFA-pending sessions only those OpenZiti lets them
  // call (not the recovery codes, the removal or totp-token, which need a full session there)
  const NO_MFA = (s: number) => `${s} ${s} ${s} ${s} ${s} ${s} 401 401`;
  const NO_MFA_FULL = (s: number) => `${s} ${s} ${s} ${s} ${s} 401 401 401`;
  for (const api of ['client', 'management'] as const) {
    out.push(
      { op: `${api} GET /current-identity/mfa`, expect: NO_MFA(404) },
      { op: `${api} GET /current-identity/mfa/qr-code`, expect: NO_MFA(404) },
      {
        op: `${api} POST /current-identity/mfa/verify`,
        prepare: async () => ({ body: { code: '123456' } }),
        expect: NO_MFA(404),
      },
      { op: `${api} GET /current-identity/mfa/recovery-codes`, expect: NO_MFA_FULL(404) },
      {
        op: `${api} POST /current-identity/mfa/recovery-codes`,
        prepare: async () => ({ body: { code: '123456' } }),
        expect: NO_MFA_FULL(404),
      },
      { op: `${api} DELETE /current-identity/mfa`, expect: NO_MFA_FULL(404) },
      { op: `${api} POST /authenticate/mfa`, prepare: async () => ({ body: { code: '123456' } }), expect: NO_MFA(409) },
      {
        op: `${api} POST /current-api-session/totp-token`,
        prepare: async () => ({ body: { code: '123456' } }),
        expect: `${FULL_SESSION.slice(0, 19).replaceAll('200', '409')} 401 401 401`,
      },
    );
  }
  // the first enrolment of each caller succeeds; the second API finds it started (409 MFA_EXISTS)
  out.push({ op: 'client POST /current-identity/mfa', expect: NO_MFA(201) });
  out.push({ op: 'management POST /current-identity/mfa', expect: NO_MFA(409) });
  return out;
}

/**
 * Services, edge routers and the three policy types (permissions `service`, `router`, `service-policy`,
 * `edge-router-policy`, `service-edge-router-policy`: none of the callers above holds one, so reads are for admins
 * and admin_readonly, writes for admins), their association lists (each needs the read permission of the entity it
 * lists, as in OpenZiti: a list of identities `identity.read`), and the client's views of services and edge routers
 * (any full session).
 */
function accessModelRows(): Row[] {
  const m = 'management';
  const c = 'client';
  const service = async () =>
    (await adminCall('POST', '/services', { name: uniq('svc'), encryptionRequired: true })).data.id as string;
  const router = async () => (await adminCall('POST', '/edge-routers', { name: uniq('er') })).data.id as string;
  const policyBodies: Record<string, () => Record<string, unknown>> = {
    '/service-policies': () => ({ name: uniq('sp'), type: 'Dial', semantic: 'AllOf' }),
    '/edge-router-policies': () => ({ name: uniq('erp'), semantic: 'AllOf' }),
    '/service-edge-router-policies': () => ({ name: uniq('serp'), semantic: 'AllOf' }),
  };
  const makers: Record<string, () => Record<string, unknown>> = {
    ...policyBodies,
    '/routers': () => ({ name: uniq('rt') }),
  };
  const make = async (path: string) => (await adminCall('POST', path, makers[path]!())).data.id as string;
  /** A service every identity may dial (a policy of `#all` identities). */
  const usable = async () => {
    const id = await service();
    await adminCall('POST', '/service-policies', {
      name: uniq('sp-all'),
      type: 'Dial',
      semantic: 'AllOf',
      identityRoles: ['#all'],
      serviceRoles: [`@${id}`],
    });
    return id;
  };
  /** A service every identity may dial through an edge router both sides' policies allow. */
  const reachable = async () => {
    const id = await usable();
    const er = await router();
    await adminCall('POST', '/edge-router-policies', {
      name: uniq('erp-all'),
      semantic: 'AllOf',
      identityRoles: ['#all'],
      edgeRouterRoles: [`@${er}`],
    });
    await adminCall('POST', '/service-edge-router-policies', {
      name: uniq('serp'),
      semantic: 'AllOf',
      serviceRoles: [`@${id}`],
      edgeRouterRoles: [`@${er}`],
    });
    return id;
  };
  /** A session of the default admin's. */
  const session = async () => {
    const r = await call('POST', `${srv.client}/sessions`, { token: root, body: { serviceId: await reachable() } });
    if (r.status !== 201) throw new Error(`fixture session: ${r.status} ${r.text}`);
    return r.body.data.id as string;
  };
  const terminatorBody = async () => ({
    service: await service(),
    router: await make('/routers'),
    binding: 'edge',
    address: uniq('hosted'),
  });
  const terminator = async () => (await adminCall('POST', '/terminators', await terminatorBody())).data.id as string;
  const CREATED = FULL_SESSION.replace(/200/g, '201');
  const NOT_OWN = FULL_SESSION.replace(/200/g, '404');
  const crud = (
    path: string,
    fixture: () => Promise<string>,
    body: () => Record<string, unknown> | Promise<Record<string, unknown>>,
    patch: Record<string, unknown> = { tags: { x: 1 } },
  ): Row[] => [
    { op: `${m} GET ${path}`, expect: ADMIN_READ },
    { op: `${m} GET ${path}/{id}`, prepare: async () => ({ id: await fixture() }), expect: ADMIN_READ },
    { op: `${m} POST ${path}`, prepare: async () => ({ body: await body() }), expect: adminOnly(201) },
    {
      op: `${m} PUT ${path}/{id}`,
      prepare: async () => ({ id: await fixture(), body: await body() }),
      expect: adminOnly(200),
    },
    {
      op: `${m} PATCH ${path}/{id}`,
      prepare: async () => ({ id: await fixture(), body: patch }),
      expect: adminOnly(200),
    },
    { op: `${m} DELETE ${path}/{id}`, prepare: async () => ({ id: await fixture() }), expect: adminOnly(200) },
  ];
  const lists = (parent: string, fixture: () => Promise<string>, paths: string[], expect = ADMIN_READ): Row[] =>
    paths.map((p) => ({ op: `${m} GET ${parent}/{id}/${p}`, prepare: async () => ({ id: await fixture() }), expect }));
  const plainIdentity = async () => (await identity('plain')).id;
  const check = async () =>
    (await adminCall('POST', '/posture-checks', { name: uniq('pc'), typeId: 'DOMAIN', domains: ['corp'] })).data
      .id as string;
  return [
    ...crud('/posture-checks', check, () => ({ name: uniq('pc'), typeId: 'DOMAIN', domains: ['corp'] }), {
      typeId: 'DOMAIN',
      tags: { x: 1 },
    }),
    { op: `${m} GET /posture-check-types`, expect: FULL_SESSION },
    { op: `${m} GET /posture-check-types/{id}`, prepare: async () => ({ id: 'MFA' }), expect: FULL_SESSION },
    { op: `${m} GET /posture-check-role-attributes`, expect: ADMIN_READ },
    {
      op: `${c} POST /posture-response`,
      prepare: async () => ({ body: { id: 'x', typeId: 'DOMAIN', domain: 'corp' } }),
      expect: CREATED,
    },
    {
      op: `${c} POST /posture-response-bulk`,
      prepare: async () => ({ body: [{ id: 'x', typeId: 'DOMAIN', domain: 'corp' }] }),
      expect: FULL_SESSION,
    },
    ...crud('/services', service, () => ({ name: uniq('svc'), encryptionRequired: true })),
    ...crud('/edge-routers', router, () => ({ name: uniq('er') })),
    ...Object.entries(policyBodies).flatMap(([path, body]) => crud(path, () => make(path), body)),
    // an association list needs the read permission of what it lists (OpenZiti): identities need `identity.read`
    ...lists('/services', service, ['configs', 'service-policies', 'service-edge-router-policies']),
    ...lists('/services', service, ['identities'], IDENTITY_READ),
    ...lists('/services', service, ['edge-routers']),
    ...lists('/edge-routers', router, ['edge-router-policies', 'service-edge-router-policies', 'services']),
    ...lists('/edge-routers', router, ['identities'], IDENTITY_READ),
    ...lists('/service-policies', () => make('/service-policies'), ['services', 'posture-checks']),
    ...lists('/service-policies', () => make('/service-policies'), ['identities'], IDENTITY_READ),
    ...lists('/edge-router-policies', () => make('/edge-router-policies'), ['edge-routers']),
    ...lists('/edge-router-policies', () => make('/edge-router-policies'), ['identities'], IDENTITY_READ),
    ...lists('/service-edge-router-policies', () => make('/service-edge-router-policies'), [
      'edge-routers',
      'services',
    ]),
    ...lists('/configs', async () => {
      const typeId = (await adminCall('POST', '/config-types', { name: uniq('ct'), schema: {} })).data.id;
      return (await adminCall('POST', '/configs', { name: uniq('cfg'), configTypeId: typeId, data: {} })).data.id;
    }, ['services']),
    ...lists('/identities', plainIdentity, ['services', 'service-policies', 'edge-routers', 'edge-router-policies']),
    ...lists(
      '/identities',
      plainIdentity,
      ['service-configs', 'posture-data', 'failed-service-requests'],
      IDENTITY_READ,
    ),
    {
      op: `${m} POST /identities/{id}/service-configs`,
      prepare: async () => ({ id: await plainIdentity(), body: [] }),
      expect: identityWrite(200),
    },
    {
      op: `${m} DELETE /identities/{id}/service-configs`,
      prepare: async () => ({ id: await plainIdentity() }),
      expect: identityWrite(200),
    },
    {
      op: `${m} GET /identities/{id}/policy-advice/{serviceId}`,
      prepare: async () => ({ id: await plainIdentity(), serviceId: await service() }),
      // OpenZiti: `service.read`
      expect: ADMIN_READ,
    },
    { op: `${m} GET /service-role-attributes`, expect: ADMIN_READ },
    { op: `${m} GET /edge-router-role-attributes`, expect: ADMIN_READ },
    { op: `${m} GET /summary`, expect: FULL_SESSION },
    { op: `${c} GET /services`, expect: FULL_SESSION },
    { op: `${c} GET /services/{id}`, prepare: async () => ({ id: await usable() }), expect: FULL_SESSION },
    { op: `${c} GET /services/{id}/edge-routers`, prepare: async () => ({ id: await usable() }), expect: FULL_SESSION },
    { op: `${c} GET /current-identity/edge-routers`, expect: FULL_SESSION },
    { op: `${c} GET /current-api-session/service-updates`, expect: FULL_SESSION },
    // sessions: the client's own (another identity's — here the default admin's — does not exist for it)
    { op: `${c} POST /sessions`, prepare: async () => ({ body: { serviceId: await reachable() } }), expect: CREATED },
    { op: `${c} GET /sessions`, expect: FULL_SESSION },
    { op: `${c} GET /sessions/{id}`, prepare: async () => ({ id: await session() }), expect: NOT_OWN },
    { op: `${c} DELETE /sessions/{id}`, prepare: async () => ({ id: await session() }), expect: NOT_OWN },
    ...crud(
      '/routers',
      () => make('/routers'),
      () => ({ name: uniq('rt') }),
    ),
    ...crud(
      '/transit-routers',
      () => make('/routers'),
      () => ({ name: uniq('tr') }),
    ),
    ...crud('/terminators', terminator, terminatorBody),
    ...lists('/services', service, ['terminators']),
    { op: `${c} GET /services/{id}/terminators`, prepare: async () => ({ id: await usable() }), expect: FULL_SESSION },
    ...(['PUT', 'PATCH', 'DELETE'] as const).map((method) => ({
      op: `${c} ${method} /services/{id}`,
      prepare: async () => ({ id: await service(), body: method === 'DELETE' ? undefined : { name: uniq('svc') } }),
      // no handler in OpenZiti's client API: any session gets 501
      expect: '501 501 501 501 501 501 401 401',
    })),
    {
      op: `${m} GET /sessions/{id}/route-path`,
      prepare: async () => ({ id: await session() }),
      expect: ADMIN_READ,
    },
    { op: `${m} GET /sessions`, expect: ADMIN_READ },
    { op: `${m} GET /sessions/{id}`, prepare: async () => ({ id: await session() }), expect: ADMIN_READ },
    { op: `${m} DELETE /sessions/{id}`, prepare: async () => ({ id: await session() }), expect: adminOnly(200) },
  ];
}

/**
 * Self-service authenticators (both APIs): the list is any full session's own; one named by id is another
 * identity's here (a plain target's), which does not exist for any caller, admins included.
 */
function selfServiceRows(): Row[] {
  const NOT_OWN = '404 404 404 404 404 401 401 401';
  const change = { currentPassword: 'target-pw', username: uniq('self-renamed'), password: 'self-new-pw' };
  return (['client', 'management'] as const).flatMap((api): Row[] => [
    { op: `${api} GET /current-identity/authenticators`, expect: FULL_SESSION },
    {
      op: `${api} GET /current-identity/authenticators/{id}`,
      prepare: async () => ({ id: await authenticatorOf('plain') }),
      expect: NOT_OWN,
    },
    ...(['PUT', 'PATCH'] as const).map((method) => ({
      op: `${api} ${method} /current-identity/authenticators/{id}`,
      prepare: async () => ({ id: await authenticatorOf('plain'), body: change }),
      expect: NOT_OWN,
    })),
  ]);
}

/** Revocations, controller settings, database operations (management, admins), identity tracing (identity.update). */
function operationsRows(): Row[] {
  const m = 'management';
  const revocation = async () =>
    (await adminCall('POST', '/revocations', { id: randomUUID(), type: 'JTI' })).data.id as string;
  return [
    { op: `${m} GET /revocations`, expect: ADMIN_READ },
    { op: `${m} GET /revocations/{id}`, prepare: async () => ({ id: await revocation() }), expect: ADMIN_READ },
    {
      op: `${m} POST /revocations`,
      prepare: async () => ({ body: { id: randomUUID(), type: 'JTI' } }),
      expect: adminOnly(201),
    },
    ...controllerSettingRows(),
    ...databaseRows(),
    {
      op: `${m} PUT /identities/{id}/trace`,
      prepare: async () => ({ id: (await identity('plain')).id, body: { enabled: true, duration: '5m' } }),
      // OpenZiti: `identity.update`
      expect: identityWrite(200),
    },
  ];
}

/** Database operations: admins only (a check started by one row has finished before the next row starts one). */
function databaseRows(): Row[] {
  const m = 'management';
  const idle = async () => {
    for (let i = 0; i < 400; i++) {
      if (!(await adminCall('GET', '/database/data-integrity-results')).data.inProgress) return {};
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error('fixture: the integrity check did not finish');
  };
  return [
    { op: `${m} POST /database/snapshot`, expect: adminOnly(200) },
    { op: `${m} POST /database/check-data-integrity`, prepare: idle, expect: adminOnly(202) },
    { op: `${m} POST /database/fix-data-integrity`, prepare: idle, expect: adminOnly(202) },
    { op: `${m} GET /database/data-integrity-results`, expect: adminOnly(200) },
  ];
}

/** Controller settings: `global`, and this node's own (made or removed first, as each row needs). */
function controllerSettingRows(): Row[] {
  const m = 'management';
  const ctl = async () => (await adminCall('GET', '/controllers')).data[0].id as string;
  const own = async (present: boolean) => {
    const id = await ctl();
    const has = srv.ctl.svc.get('controller-settings', id) !== undefined;
    if (has && !present) await adminCall('DELETE', `/controller-settings/${id}/effective`);
    if (!has && present) await adminCall('POST', '/controller-settings', { controllerId: id });
    return id;
  };
  const global = async () => ({ id: 'global' });
  const globalChange = async () => ({ id: 'global', body: { oidc: {} } });
  return [
    { op: `${m} GET /controller-settings`, expect: ADMIN_READ },
    { op: `${m} GET /controller-settings/{id}`, prepare: global, expect: ADMIN_READ },
    { op: `${m} GET /controller-settings/{id}/effective`, prepare: global, expect: ADMIN_READ },
    { op: `${m} PUT /controller-settings/{id}/effective`, prepare: globalChange, expect: adminOnly(200) },
    { op: `${m} PATCH /controller-settings/{id}/effective`, prepare: globalChange, expect: adminOnly(200) },
    {
      op: `${m} POST /controller-settings`,
      prepare: async () => ({ body: { controllerId: await own(false) } }),
      expect: adminOnly(201),
    },
    {
      op: `${m} DELETE /controller-settings/{id}/effective`,
      prepare: async () => ({ id: await own(true) }),
      expect: adminOnly(200),
    },
  ];
}

/** A fresh auth policy body (every field the spec requires). */
function policyBody(): Record<string, unknown> {
  return {
    name: uniq('policy'),
    primary: {
      cert: { allowed: true, allowExpiredCerts: false },
      extJwt: { allowed: false, allowedSigners: [] },
      updb: {
        allowed: true,
        lockoutDurationMinutes: 0,
        maxAttempts: 0,
        minPasswordLength: 5,
        requireMixedCase: false,
        requireNumberChar: false,
        requireSpecialChar: false,
      },
    },
    secondary: { requireTotp: false },
  };
}

/** After the default admin's authenticator was deleted (by an admin): give it back, then refresh `root`. */
async function restoreDefaultAdminLogin(): Promise<void> {
  const admin = users.get('admin')!.token;
  const r = await call('POST', `${srv.mgmt}/authenticators`, {
    token: admin,
    body: { method: 'updb', identityId: defaultAdmin.id, username: 'admin', password: ADMIN_PASSWORD },
  });
  if (r.status !== 201) return; // it was not deleted: nothing to restore
  defaultAdmin.authenticatorId = r.body.data.id;
  root = await login(srv.base);
}

/**
 * Edge router enrollment (enroll with a fresh router's token, no session needed; extend; re-enroll), token
 * enrollment and the enrollment challenge (no session needed).
 */
function routerEnrollRows(): Row[] {
  const router = async () => (await adminCall('POST', '/edge-routers', { name: uniq('er-enroll') })).data.id as string;
  return [
    {
      op: 'client POST /enroll/erott',
      prepare: async () => {
        const id = await router();
        const token = (await adminCall('GET', `/edge-routers/${id}`)).data.enrollmentToken as string;
        const scratch = new Scratch();
        try {
          const csr = opensslCsr(scratch, 'er', 'ec', `/CN=${id}`);
          return { body: { token, serverCsr: csr, clientCsr: csr } };
        } finally {
          scratch.remove();
        }
      },
      expect: EVERYONE,
    },
    // the router is known by its TLS client certificate (test/api/router-enroll.test.ts), not by a session: a
    // request without CSRs fails alike for everyone
    {
      op: 'client POST /enroll/extend/router',
      prepare: async () => ({ body: { certCsr: clientCsr() } }),
      expect: '400 400 400 400 400 400 400 400',
    },
    {
      op: 'management POST /edge-routers/{id}/re-enroll',
      prepare: async () => ({ id: await router() }),
      expect: adminOnly(200),
    },
    // without a signer's token (the enrollment itself: test/api/token-enroll.test.ts) it fails alike for everyone
    { op: 'client POST /enroll/token', prepare: async () => ({ body: {} }), expect: '400 400 400 400 400 400 400 400' },
    {
      op: 'client POST /enroll/challenge',
      prepare: async () => {
        const [key] = (await call('GET', `${srv.client}/enroll/jwks`)).body.keys;
        return { body: { nonce: '0d3c1a77-4b8e-4f2a-9c61-2f5e8a9b7c10', keyId: key.kid } };
      },
      expect: EVERYONE,
    },
  ];
}

/** Ephemeral certificates: for the caller's own API session; another session's certificate does not exist for it. */
function sessionCertificateRows(): Row[] {
  const c = 'client';
  const path = '/current-api-session/certificates';
  const NOT_OWN = '404 404 404 404 404 401 401 401';
  const othersCertificate = async () => {
    const r = await call('POST', `${srv.client}${path}`, { token: root, body: { csr: clientCsr() } });
    if (r.status !== 201) throw new Error(`fixture certificate: ${r.status} ${r.text}`);
    return r.body.data.id as string;
  };
  return [
    { op: `${c} GET ${path}`, expect: FULL_SESSION },
    {
      op: `${c} POST ${path}`,
      prepare: async () => ({ body: { csr: clientCsr() } }),
      expect: FULL_SESSION.replace(/200/g, '201'),
    },
    { op: `${c} GET ${path}/{id}`, prepare: async () => ({ id: await othersCertificate() }), expect: NOT_OWN },
    { op: `${c} DELETE ${path}/{id}`, prepare: async () => ({ id: await othersCertificate() }), expect: NOT_OWN },
  ];
}

const ROWS = rows();

beforeAll(async () => {
  srv = await startServer();
  root = await login(srv.base);
  const me = (await call('GET', `${srv.mgmt}/current-identity`, { token: root })).body.data;
  defaultAdmin = { id: me.id, authenticatorId: me.authenticators.updb.id };
  const loginUser = await adminCall('POST', '/identities', { name: 'authz-login', type: 'User', isAdmin: false });
  await adminCall('POST', '/authenticators', {
    method: 'updb',
    identityId: loginUser.data.id,
    username: 'authz-login',
    password: 'authz-login-pw',
  });
  for (const [kind, p] of Object.entries(PERMISSIONS) as [keyof typeof PERMISSIONS, (typeof PERMISSIONS)['admin']][]) {
    const username = `caller-${kind}`;
    const password = `${username}-pw`;
    const id = (await adminCall('POST', '/identities', { name: username, type: 'User', ...p })).data.id;
    await adminCall('POST', '/authenticators', { method: 'updb', identityId: id, username, password });
    if (kind === 'partial') {
      // MFA enrolment arrives with the MFA work; the flag it sets is what makes a login's session partial
      await srv.ctl.svc.write({
        op: 'update',
        entity: 'identities',
        id,
        set: { isMfaEnabled: true },
        at: srv.ctl.svc.nowIso(),
        system: true,
      });
    }
    users.set(kind, { username, password, token: await login(srv.base, username, password) });
  }
  const partial = await call('GET', `${srv.mgmt}/current-api-session`, { token: users.get('partial')!.token });
  expect(partial.body.data).toMatchObject({ isMfaRequired: true, isMfaComplete: false });
}, 60_000);
afterAll(() => srv.stop());

describe('what non-admins see of what they may read', () => {
  it('session tokens and enrollment secrets are for admins only', async () => {
    const sessionId = await sessionOf('plain');
    const enrolled = (
      await adminCall('POST', '/identities', {
        name: uniq('enrolled'),
        type: 'User',
        isAdmin: false,
        enrollment: { ott: true },
      })
    ).data.id;
    const seen = async (caller: CallerKind) => {
      const token = await tokenOf(caller, false);
      const session = (await call('GET', `${srv.mgmt}/api-sessions/${sessionId}`, { token })).body.data;
      const ident = (await call('GET', `${srv.mgmt}/identities/${enrolled}`, { token })).body.data;
      return { sessionToken: session.token !== '', enrollmentJwt: ident.enrollment.ott.jwt !== undefined };
    };
    expect(await seen('admin')).toEqual({ sessionToken: true, enrollmentJwt: true });
    expect(await seen('readonly')).toEqual({ sessionToken: false, enrollmentJwt: false });
    // the same on /enrollments, which admin_readonly may read
    const [enrollmentId] = Object.values(
      (await adminCall('GET', `/identities/${enrolled}`)).data.enrollment as Record<string, { id: string }>,
    ).map((e) => e.id);
    for (const [caller, secrets] of [
      ['admin', true],
      ['readonly', false],
    ] as const) {
      const token = await tokenOf(caller, false);
      const d = (await call('GET', `${srv.mgmt}/enrollments/${enrollmentId}`, { token })).body.data;
      expect({ token: d.token !== '', jwt: d.jwt !== undefined }).toEqual({ token: secrets, jwt: secrets });
      const listed = (await call('GET', `${srv.mgmt}/identities/${enrolled}/enrollments`, { token })).body.data;
      expect(listed[0].token !== '', caller).toBe(secrets);
    }
  });
});

describe('guards behind the route guard', () => {
  // Authenticator writes need an admin at the route (hasAdminAccess), so these entity guards cannot be reached over
  // HTTP today; they stay as defence in depth should the route's permission ever widen, and are tested directly.
  const fakeRow = (fields: Record<string, unknown>) => ({ createdAt: '', updatedAt: '', tags: {}, id: '', ...fields });
  const asHelpdesk = (): Caller => ({
    session: fakeRow({ id: 's', token: 't' }),
    identity: fakeRow({ id: 'helpdesk', isAdmin: false, permissions: ['identity'] }),
  });

  it("a non-admin may not change or delete an admin's authenticator", async () => {
    const row = srv.ctl.svc.get('authenticators', defaultAdmin.authenticatorId)!;
    const svc = srv.ctl.svc;
    const refused = (f: () => unknown) =>
      Promise.resolve()
        .then(f)
        .then(
          () => 'allowed',
          (e) => (e instanceof ApiError ? `${e.status} ${e.code}` : String(e)),
        );
    expect(
      await refused(() =>
        authenticators.fromApi!(
          { password: 'taken-over' },
          { mode: 'patch', svc, existing: row, caller: asHelpdesk(), copied: {}, expect: [] },
        ),
      ),
    ).toBe('401 UNAUTHORIZED');
    expect(
      await refused(() =>
        authenticators.fromApi!(
          { method: 'updb', identityId: defaultAdmin.id, username: 'second', password: 'taken-over' },
          { mode: 'create', svc, caller: asHelpdesk(), copied: {}, expect: [] },
        ),
      ),
    ).toBe('401 UNAUTHORIZED');
    expect(await refused(() => authenticators.beforeDelete!(row, svc, asHelpdesk()))).toBe('401 UNAUTHORIZED');
    // and the same calls for a plain identity's authenticator pass the guard
    const plain = srv.ctl.svc.get('authenticators', await authenticatorOf('plain'))!;
    expect(await refused(() => authenticators.beforeDelete!(plain, svc, asHelpdesk()))).toBe('allowed');
  });
});

describe('authorization table', () => {
  it('names every operation Keel serves, and only those', () => {
    const served = new Set(srv.ctl.ops.flatMap((o) => o.apis.map((api) => `${api} ${o.method} ${o.path}`)));
    const covered = new Set(ROWS.map((r) => r.op));
    expect([...served].filter((k) => !covered.has(k))).toEqual([]);
    expect([...covered].filter((k) => !served.has(k))).toEqual([]);
  });

  const label = (r: Row) => [r.op, r.target && `target ${r.target}`, r.variant].filter(Boolean).join(', ');
  it.each(ROWS.map((r) => [label(r), r] as const))('%s', async (_label, row) => {
    const [api, method, template] = row.op.split(' ') as [string, string, string];
    const got: string[] = [];
    for (const caller of CALLERS) {
      const p = row.prepare ? await row.prepare() : {};
      const path = template
        .replace('{id}', encodeURIComponent(p.id ?? ''))
        .replace('{serviceId}', encodeURIComponent(p.serviceId ?? ''));
      const token = await tokenOf(caller, row.endsSession === true);
      const query = p.query ? `?${p.query}` : '';
      const r = await call(method, `${srv.base}/edge/${api}/v1${path}${query}`, {
        token,
        body: p.body,
        ...(p.text !== undefined ? { raw: p.text, headers: { 'content-type': 'text/plain' } } : {}),
      });
      if (r.status === 401) {
        expect(r.body.error.code, `${caller}: ${r.text}`).toBe('UNAUTHORIZED');
        // a missing or unknown token gets the challenge that says so; a valid session without access gets none
        const challenge = /error="(\w+)"/.exec(r.headers.get('www-authenticate') ?? '')?.[1] ?? null;
        expect(challenge, caller).toBe(caller === 'anon' ? 'missing' : caller === 'bogus' ? 'invalid' : null);
      }
      got.push(String(r.status));
      await p.after?.();
    }
    expect(got.join(' '), `columns: ${CALLERS.join(' ')}`).toBe(row.expect);
  });

  it.skipIf(!SPEC_AVAILABLE)("checked every status above against OpenZiti's spec (per operation and status)", () => {
    // Keel's own endpoints (`swagger.json`) are no spec operations
    const ours = new Set(
      srv.ctl.ops.filter((o) => o.undocumented).flatMap((o) => o.apis.map((a) => `${a} ${o.method} ${o.path}`)),
    );
    const expected = ROWS.filter((r) => !ours.has(r.op)).flatMap((r) =>
      r.expect.split(' ').map((status) => `${r.op} ${status}`),
    );
    expect([...new Set(expected)].filter((k) => !exercisedStatuses.has(k))).toEqual([]);
  });
});
