/**
 * The entity permissions of the access model (`service`, `config`, `service-policy`, `edge-router-policy`,
 * `service-edge-router-policy`, `posture-check`, `router`, `terminator`, and `identity` that their association lists
 * cross into) and their `.read` / `.create` / `.update` / `.delete` forms grant exactly OpenZiti's
 * DefaultManagementAccess: an admin, the entity permission, the entity-action permission of the operation or, for
 * reads, `admin_readonly`. Everyone else gets 401 `UNAUTHORIZED`.
 *
 * Which entity and action guard an operation is OpenZiti's table, written out here independently of the
 * declarations (COLLECTION_PERMISSION, OPENZITI; docs/permissions.md): a collection's CRUD takes the action of
 * the method, an association list the read permission of the entity it LISTS (`/services/{id}/identities`:
 * `identity.read`), an action the action it performs (`POST /identities/{id}/disable`: `identity.update`). For each
 * permission the operations walked are the ones that table files under it, so a wrong declaration fails the walk;
 * every declared one must be in the table, so a new association list or action must take a row. Every call goes
 * through `call()`, so each response is also checked against OpenZiti's spec.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OpDef } from '../../src/api/op.js';
import { PERMISSIONS } from '../../src/model/identity.js';
import { expectError, userWith } from '../support/api.js';
import { call, login, type Res, startServer, type TestServer } from '../support/server.js';

const ENTITY_PERMISSIONS = [
  'service',
  'config',
  'service-policy',
  'edge-router-policy',
  'service-edge-router-policy',
  'posture-check',
  'router',
  'terminator',
  'identity',
] as const;
type Permission = (typeof ENTITY_PERMISSIONS)[number];

/** The collections whose full CRUD each permission must guard. */
const CRUD_PATHS: Record<Permission, string[]> = {
  service: ['/services'],
  config: ['/configs'],
  'service-policy': ['/service-policies'],
  'edge-router-policy': ['/edge-router-policies'],
  'service-edge-router-policy': ['/service-edge-router-policies'],
  'posture-check': ['/posture-checks'],
  router: ['/edge-routers', '/transit-routers', '/routers'],
  terminator: ['/terminators'],
  identity: ['/identities'],
};

/** The collection a representative create of each permission goes to. */
const CREATE_PATH: Record<Permission, string> = {
  service: '/services',
  config: '/configs',
  'service-policy': '/service-policies',
  'edge-router-policy': '/edge-router-policies',
  'service-edge-router-policy': '/service-edge-router-policies',
  'posture-check': '/posture-checks',
  router: '/edge-routers',
  terminator: '/terminators',
  identity: '/identities',
};

const ACTION_OF: Record<string, 'read' | 'create' | 'update' | 'delete'> = {
  GET: 'read',
  POST: 'create',
  PUT: 'update',
  PATCH: 'update',
  DELETE: 'delete',
};

/** The permission entity of each collection's CRUD (`/<collection>`, `/<collection>/{id}`) in OpenZiti. */
const COLLECTION_PERMISSION: Record<string, string> = {
  '/identities': 'identity',
  '/services': 'service',
  '/configs': 'config',
  '/config-types': 'config-type',
  '/service-policies': 'service-policy',
  '/edge-router-policies': 'edge-router-policy',
  '/service-edge-router-policies': 'service-edge-router-policy',
  '/posture-checks': 'posture-check',
  '/edge-routers': 'router',
  '/transit-routers': 'router',
  '/routers': 'router',
  '/terminators': 'terminator',
  '/cas': 'ca',
  '/enrollments': 'enrollment',
  '/auth-policies': 'auth-policy',
  '/external-jwt-signers': 'external-jwt-signer',
};

/**
 * OpenZiti's permission (`entity.action`; `admin`: admins only) of every management association list and action,
 * from its v2 routers (controller/internal/routes/<entity>_router.go, docs/permissions.md). An association list needs
 * the read permission of the entity it lists, not of its parent.
 */
const OPENZITI: Record<string, string> = {
  // identity_router.go
  'GET /identities/{id}/authenticators': 'authenticator.read',
  'GET /identities/{id}/enrollments': 'enrollment.read',
  'GET /identities/{id}/edge-router-policies': 'edge-router-policy.read',
  'GET /identities/{id}/edge-routers': 'router.read',
  'GET /identities/{id}/service-policies': 'service-policy.read',
  'GET /identities/{id}/services': 'service.read',
  'GET /identities/{id}/service-configs': 'identity.read',
  'POST /identities/{id}/service-configs': 'identity.update',
  'DELETE /identities/{id}/service-configs': 'identity.update',
  'GET /identities/{id}/policy-advice/{serviceId}': 'service.read',
  'GET /identities/{id}/posture-data': 'identity.read',
  'GET /identities/{id}/failed-service-requests': 'identity.read',
  'DELETE /identities/{id}/mfa': 'identity.update',
  'PUT /identities/{id}/trace': 'identity.update',
  'POST /identities/{id}/enable': 'identity.update',
  'POST /identities/{id}/disable': 'identity.update',
  // service_router.go
  'GET /services/{id}/service-edge-router-policies': 'service-edge-router-policy.read',
  'GET /services/{id}/edge-routers': 'router.read',
  'GET /services/{id}/service-policies': 'service-policy.read',
  'GET /services/{id}/identities': 'identity.read',
  'GET /services/{id}/configs': 'config.read',
  'GET /services/{id}/terminators': 'terminator.read',
  // config_router.go, config_type_router.go
  'GET /configs/{id}/services': 'service.read',
  'GET /config-types/{id}/configs': 'config.read',
  // edge_router_router.go
  'POST /edge-routers/{id}/re-enroll': 'router.update',
  'GET /edge-routers/{id}/edge-router-policies': 'edge-router-policy.read',
  'GET /edge-routers/{id}/service-edge-router-policies': 'service-edge-router-policy.read',
  'GET /edge-routers/{id}/identities': 'identity.read',
  'GET /edge-routers/{id}/services': 'service.read',
  // service_policy_router.go, edge_router_policy_router.go, service_edge_router_policy_router.go
  'GET /service-policies/{id}/services': 'service.read',
  'GET /service-policies/{id}/identities': 'identity.read',
  'GET /service-policies/{id}/posture-checks': 'posture-check.read',
  'GET /edge-router-policies/{id}/edge-routers': 'router.read',
  'GET /edge-router-policies/{id}/identities': 'identity.read',
  'GET /service-edge-router-policies/{id}/edge-routers': 'router.read',
  'GET /service-edge-router-policies/{id}/services': 'service.read',
  // role_attributes_router.go
  'GET /identity-role-attributes': 'identity.read',
  'GET /service-role-attributes': 'service.read',
  'GET /edge-router-role-attributes': 'router.read',
  'GET /posture-check-role-attributes': 'posture-check.read',
  // ca_router.go, enrollment_router.go, authenticator_router.go, session_router.go
  'POST /cas/{id}/verify': 'ca.update',
  'GET /cas/{id}/jwt': 'ca.read',
  'POST /enrollments/{id}/refresh': 'enrollment.update',
  'POST /authenticators/{id}/re-enroll': 'admin',
  'POST /authenticators/{id}/request-extend': 'admin',
  'GET /sessions/{id}/route-path': 'ops.read',
};

/**
 * Keel's own where it keeps a deviation (docs/permissions.md says why): the controller settings' `effective` view
 * (OpenZiti: admins only; Keel files it with the settings' CRUD, which admin_readonly may read).
 */
const KEEL_DEVIATIONS: Record<string, string> = {
  'GET /controller-settings/{id}/effective': 'controller-setting.read',
  'PUT /controller-settings/{id}/effective': 'controller-setting.update',
  'PATCH /controller-settings/{id}/effective': 'controller-setting.update',
  'DELETE /controller-settings/{id}/effective': 'controller-setting.delete',
};

/** What an operation declares: `entity.action`, or `admin` without a permission. */
function declared(op: OpDef<unknown>): string {
  return op.permission ? `${op.permission}.${op.permissionAction ?? ACTION_OF[op.method]}` : 'admin';
}

/** OpenZiti's `entity.action` of a management operation, if the tables above know it. */
function expected(op: OpDef<unknown>): string | undefined {
  const key = `${op.method} ${op.path}`;
  if (key in OPENZITI) return OPENZITI[key];
  const crud = /^(\/[^/]+)(\/\{id\})?$/.exec(op.path);
  const entity = crud ? COLLECTION_PERMISSION[crud[1]!] : undefined;
  return entity === undefined ? undefined : `${entity}.${ACTION_OF[op.method]}`;
}

let srv: TestServer;
let root: string;
let seq = 0;
const uniq = (prefix: string) => `${prefix}-${++seq}`;

/** Ids of the rows created in beforeAll, by collection (the first segment of a path). */
const fixture = new Map<string, string>();

/** A valid create body per collection (fresh names each call). */
function createBody(collection: string): Record<string, unknown> {
  const name = uniq(`ep${collection.replace(/\//g, '-')}`);
  switch (collection) {
    case '/services':
      return { name, encryptionRequired: true };
    case '/configs':
      return { name, configTypeId: fixture.get('/config-types'), data: { a: 1 } };
    case '/config-types':
      return { name };
    case '/service-policies':
      return { name, type: 'Dial', semantic: 'AllOf' };
    case '/edge-router-policies':
    case '/service-edge-router-policies':
      return { name, semantic: 'AllOf' };
    case '/posture-checks':
      return { name, typeId: 'MFA' };
    case '/edge-routers':
    case '/transit-routers':
    case '/routers':
      return { name };
    case '/terminators':
      return { service: fixture.get('/services'), router: fixture.get('/routers'), binding: 'edge', address: 'a' };
    case '/identities':
      return { name, type: 'User', isAdmin: false };
    default:
      throw new Error(`no create body for ${collection}`);
  }
}

async function adminCreate(collection: string): Promise<string> {
  const r = await call('POST', `${srv.mgmt}${collection}`, { token: root, body: createBody(collection) });
  expect(r.status, `${collection}: ${r.text}`).toBe(201);
  return r.body.data.id;
}

async function rowCount(collection: string): Promise<number> {
  const r = await call('GET', `${srv.mgmt}${collection}?limit=1`, { token: root });
  expect(r.status, r.text).toBe(200);
  return r.body.meta.pagination.totalCount;
}

const collectionOf = (path: string) => `/${path.split('/')[1]}`;

/** The `{id}` to send: a fixture row, or a fresh one where the call may remove or re-key it. */
async function idFor(op: OpDef<unknown>): Promise<string> {
  const collection = collectionOf(op.path);
  if (op.method === 'DELETE' || op.method === 'POST') return adminCreate(collection);
  const id = fixture.get(collection);
  if (id === undefined) throw new Error(`no fixture row for ${op.path}`);
  return id;
}

interface Caller {
  label: string;
  permissions: string[];
  isAdmin?: boolean;
  token: string;
}

/** Whether OpenZiti's DefaultManagementAccess lets this caller do `action` under `permission`. */
function granted(caller: Caller, permission: string, action: string): boolean {
  if (caller.isAdmin === true) return true;
  if (action === 'read' && caller.permissions.includes('admin_readonly')) return true;
  return caller.permissions.includes(permission) || caller.permissions.includes(`${permission}.${action}`);
}

const shared: Caller[] = [];
const perEntity = new Map<Permission, Caller[]>();
const byForm = new Map<string, Caller>();

/** A caller holding exactly one permission form (made once). */
async function formCaller(form: string): Promise<Caller> {
  let c = byForm.get(form);
  if (c === undefined) {
    c = await caller([form]);
    byForm.set(form, c);
  }
  return c;
}

async function caller(permissions: string[]): Promise<Caller> {
  const label = permissions.length === 0 ? 'no permissions' : permissions.join(',');
  const u = await userWith(srv.base, root, uniq('ep-user'), { permissions });
  return { label, permissions, token: u.token };
}

beforeAll(async () => {
  srv = await startServer();
  root = await login(srv.base);
  // fixtures in dependency order (configs need a type, terminators a service and a router)
  for (const collection of [
    '/config-types',
    '/configs',
    '/services',
    '/service-policies',
    '/edge-router-policies',
    '/service-edge-router-policies',
    '/posture-checks',
    '/edge-routers',
    '/transit-routers',
    '/identities',
  ]) {
    fixture.set(collection, await adminCreate(collection));
  }
  fixture.set('/routers', fixture.get('/transit-routers')!);
  fixture.set('/terminators', await adminCreate('/terminators'));
  shared.push(
    { label: 'admin', permissions: [], isAdmin: true, token: root },
    await caller(['admin_readonly']),
    await caller(['identity']),
    await caller(['identity.read']),
    await caller([]),
  );
  for (const p of ENTITY_PERMISSIONS) {
    const own: Caller[] = [];
    for (const form of [p, `${p}.read`, `${p}.create`, `${p}.update`, `${p}.delete`]) own.push(await formCaller(form));
    perEntity.set(p, own);
  }
}, 120_000);

afterAll(async () => {
  await srv.stop();
});

const managementOps = () => srv.ctl.ops.filter((op) => op.apis.includes('management'));

/** The operations that declare `permission`. */
function declaredOps(permission: Permission): OpDef<unknown>[] {
  return managementOps().filter((op) => op.permission === permission);
}

/** The operations OpenZiti files under `permission` (the tables above), whatever they declare. */
function opsOf(permission: Permission): OpDef<unknown>[] {
  return managementOps().filter((op) => expected(op)?.startsWith(`${permission}.`));
}

const actionOf = (op: OpDef<unknown>) => expected(op)!.split('.')[1]!;

async function send(op: OpDef<unknown>, token: string): Promise<Res> {
  let path = op.path.includes('{id}') ? op.path.replace('{id}', encodeURIComponent(await idFor(op))) : op.path;
  path = path.replace('{serviceId}', fixture.get('/services')!);
  expect(path, `${op.path}: a path parameter other than {id}`).not.toMatch(/\{/);
  const body = op.method === 'GET' || op.method === 'DELETE' ? undefined : {};
  return call(op.method, `${srv.mgmt}${path}`, { token, ...(body !== undefined ? { body } : {}) });
}

describe.each(ENTITY_PERMISSIONS)('the %s permission', (permission) => {
  it('guards the entity CRUD paths (a dropped permission declaration fails here)', () => {
    const served = new Set(declaredOps(permission).map((op) => `${op.method} ${op.path}`));
    for (const base of CRUD_PATHS[permission]) {
      for (const want of [`GET ${base}`, `POST ${base}`]) expect(served, want).toContain(want);
      for (const m of ['GET', 'PUT', 'PATCH', 'DELETE'])
        expect(served, `${m} ${base}/{id}`).toContain(`${m} ${base}/{id}`);
    }
  });

  it('every operation OpenZiti files under it: admin, the permission and the action form pass; others get 401', async () => {
    const callers = [...shared, ...perEntity.get(permission)!];
    const outcomes: string[] = [];
    const wanted: string[] = [];
    for (const op of opsOf(permission)) {
      for (const c of callers) {
        const res = await send(op, c.token);
        const pass = granted(c, permission, actionOf(op));
        // a passing GET answers 200 (its {id} is a real row); other passing calls may be 200/201/400 by the body
        const seen =
          res.status === 401 ? `401 ${res.body?.error?.code}` : op.method === 'GET' ? `${res.status}` : 'passed';
        const want = !pass ? '401 UNAUTHORIZED' : op.method === 'GET' ? '200' : 'passed';
        outcomes.push(`${op.method} ${op.path} as ${c.label}: ${seen}`);
        wanted.push(`${op.method} ${op.path} as ${c.label}: ${want}`);
      }
    }
    expect(outcomes).toEqual(wanted);
  }, 120_000);

  it('a refused delete leaves the row; a refused create leaves no row behind', async () => {
    const collection = CREATE_PATH[permission];
    const callers = [...shared, ...perEntity.get(permission)!];
    const refusedCreate = callers.filter((c) => !granted(c, permission, 'create'));
    const refusedDelete = callers.filter((c) => !granted(c, permission, 'delete'));
    expect(refusedCreate.map((c) => c.label)).toContain(`${permission}.read`);
    const before = await rowCount(collection);
    for (const c of refusedCreate) {
      const body = createBody(collection);
      expectError(await call('POST', `${srv.mgmt}${collection}`, { token: c.token, body }), 401, 'UNAUTHORIZED');
    }
    expect(await rowCount(collection)).toBe(before);
    // the body was a valid one: the create form creates with it
    const creator = callers.find((c) => c.label === `${permission}.create`)!;
    const made = await call('POST', `${srv.mgmt}${collection}`, { token: creator.token, body: createBody(collection) });
    expect(made.status, made.text).toBe(201);
    expect(await rowCount(collection)).toBe(before + 1);
    const id = made.body.data.id as string;
    for (const c of refusedDelete) {
      expectError(await call('DELETE', `${srv.mgmt}${collection}/${id}`, { token: c.token }), 401, 'UNAUTHORIZED');
    }
    expect((await call('GET', `${srv.mgmt}${collection}/${id}`, { token: root })).status).toBe(200);
    const deleter = callers.find((c) => c.label === `${permission}.delete`)!;
    expect((await call('DELETE', `${srv.mgmt}${collection}/${id}`, { token: deleter.token })).status).toBe(200);
    expect(await rowCount(collection)).toBe(before);
  });
});

describe("OpenZiti's permission table", () => {
  it('every management operation it knows declares the entity and action OpenZiti checks', () => {
    const seen: string[] = [];
    const want: string[] = [];
    for (const op of managementOps()) {
      const key = `${op.method} ${op.path}`;
      const entry = KEEL_DEVIATIONS[key] ?? expected(op);
      if (entry === undefined) continue;
      seen.push(`${key}: ${declared(op)}`);
      want.push(`${key}: ${entry}`);
    }
    expect(seen).toEqual(want);
    const served = new Set(managementOps().map((op) => `${op.method} ${op.path}`));
    for (const key of [...Object.keys(OPENZITI), ...Object.keys(KEEL_DEVIATIONS)]) expect(served, key).toContain(key);
  });

  it('every association list and action, and every operation of a walked permission, has a row', () => {
    const walked: readonly string[] = ENTITY_PERMISSIONS;
    const missing = managementOps()
      .filter((op) => op.access === 'admin' && (/\/\{id\}\/./.test(op.path) || walked.includes(op.permission ?? '')))
      .filter((op) => KEEL_DEVIATIONS[`${op.method} ${op.path}`] === undefined && expected(op) === undefined)
      .map((op) => `${op.method} ${op.path}`);
    expect(missing).toEqual([]);
  });

  it('the actions and lists of the other permissions: the entity and its named action pass, other forms get 401', async () => {
    const walked = new Set<string>(ENTITY_PERMISSIONS);
    const rows = Object.entries(OPENZITI)
      .map(([key, entry]) => ({ key, entity: entry.split('.')[0]!, action: entry.split('.')[1] }))
      .filter((r) => r.action !== undefined && !walked.has(r.entity) && PERMISSIONS.some((p) => p === r.entity));
    expect(rows.map((r) => r.entity).sort()).toEqual(['ca', 'ca', 'enrollment', 'enrollment', 'ops']);
    const outcomes: string[] = [];
    const wanted: string[] = [];
    for (const { key, entity, action } of rows) {
      const [method, template] = key.split(' ') as [string, string];
      // an unknown id: the route's access check answers before the handler looks the row up (404)
      const path = template.replace('{id}', randomUUID()).replace('{serviceId}', randomUUID());
      for (const form of PERMISSIONS.filter((p) => p === entity || p.startsWith(`${entity}.`))) {
        const res = await call(method, `${srv.mgmt}${path}`, { token: (await formCaller(form)).token });
        outcomes.push(`${key} as ${form}: ${res.status === 401 ? '401' : 'passed'}`);
        wanted.push(`${key} as ${form}: ${form === entity || form === `${entity}.${action}` ? 'passed' : '401'}`);
      }
    }
    expect(outcomes).toEqual(wanted);
  });
});

describe('per-identity service configs', () => {
  it('are guarded by `identity`, not by `service` or `config`', async () => {
    const identityOps = srv.ctl.ops.filter(
      (op) => op.apis.includes('management') && op.path === '/identities/{id}/service-configs',
    );
    expect(identityOps.map((op) => op.method).sort()).toEqual(['DELETE', 'GET', 'POST']);
    for (const op of identityOps) expect(op.permission, `${op.method} ${op.path}`).toBe('identity');
    const target = (await userWith(srv.base, root, uniq('ep-target'))).id;
    const url = `${srv.mgmt}/identities/${target}/service-configs`;
    const byPermission = new Map<string, Caller>();
    for (const c of [...shared, ...perEntity.get('service')!, ...perEntity.get('config')!])
      byPermission.set(c.label, c);
    for (const label of ['service', 'service.read', 'config', 'config.read', 'no permissions']) {
      expectError(await call('GET', url, { token: byPermission.get(label)!.token }), 401, 'UNAUTHORIZED');
    }
    expect((await call('GET', url, { token: byPermission.get('identity')!.token })).status).toBe(200);
    expect((await call('GET', url, { token: byPermission.get('admin_readonly')!.token })).status).toBe(200);
  });
});

describe('enrollments of admin identities (OpenZiti: hidden from callers without admin rights)', () => {
  it('are refused (401) to the `enrollment` permission on create, detail, refresh and delete, and left out of its lists', async () => {
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const identity = async (isAdmin: boolean) => {
      const res = await call('POST', `${srv.mgmt}/identities`, {
        token: root,
        body: { name: uniq('ep-enr'), type: 'User', isAdmin },
      });
      expect(res.status, res.text).toBe(201);
      return res.body.data.id as string;
    };
    const [adminId, userId] = [await identity(true), await identity(false)];
    const enroll = async (token: string, identityId: string, method: string) =>
      call('POST', `${srv.mgmt}/enrollments`, {
        token,
        body: { method, identityId, expiresAt, ...(method === 'updb' ? { username: uniq('ep-enr-u') } : {}) },
      });
    const ids: Record<string, string> = {};
    for (const [who, identityId] of [
      ['admin', adminId],
      ['user', userId],
    ] as const) {
      const res = await enroll(root, identityId, 'ott');
      expect(res.status, res.text).toBe(201);
      ids[who] = res.body.data.id;
    }
    const holder = await formCaller('enrollment');
    const reader = await formCaller('enrollment.read');
    // create: refused for the admin identity, not for the plain one (and nothing is left behind)
    expectError(await enroll(holder.token, adminId, 'updb'), 401, 'UNAUTHORIZED');
    const plain = await enroll(holder.token, userId, 'updb');
    expect(plain.status, plain.text).toBe(201);
    // detail, refresh, delete of the admin identity's enrollment
    for (const token of [holder.token, reader.token]) {
      expectError(await call('GET', `${srv.mgmt}/enrollments/${ids.admin}`, { token }), 401, 'UNAUTHORIZED');
    }
    expect((await call('GET', `${srv.mgmt}/enrollments/${ids.user}`, { token: reader.token })).status).toBe(200);
    const refresh = (id: string) =>
      call('POST', `${srv.mgmt}/enrollments/${id}/refresh`, { token: holder.token, body: { expiresAt } });
    expectError(await refresh(ids.admin!), 401, 'UNAUTHORIZED');
    expect((await refresh(ids.user!)).status).toBe(200);
    expectError(
      await call('DELETE', `${srv.mgmt}/enrollments/${ids.admin}`, { token: holder.token }),
      401,
      'UNAUTHORIZED',
    );
    // lists: the admin identity's enrollment is out of the rows and of totalCount, page by page
    const filter = encodeURIComponent(`identityId in ["${adminId}", "${userId}"]`);
    const listed = async (token: string, query: string) => {
      const res = await call('GET', `${srv.mgmt}/enrollments?filter=${filter}${query}`, { token });
      expect(res.status, res.text).toBe(200);
      return { ids: res.body.data.map((e: { id: string }) => e.id), total: res.body.meta.pagination.totalCount };
    };
    const all = await listed(root, '');
    expect(all.ids).toContain(ids.admin);
    const mine = await listed(holder.token, '');
    expect(mine.ids).not.toContain(ids.admin);
    expect(mine.ids).toContain(ids.user);
    expect(mine.total).toBe(all.total - 1);
    const firstPage = await listed(holder.token, '&limit=1&offset=0&sort=id');
    const secondPage = await listed(holder.token, '&limit=1&offset=1&sort=id');
    expect([...firstPage.ids, ...secondPage.ids].sort()).toEqual([...mine.ids].sort());
    expect(firstPage.total).toBe(mine.total);
    const ofIdentity = (id: string, token: string) =>
      call('GET', `${srv.mgmt}/identities/${id}/enrollments`, { token });
    expect((await ofIdentity(adminId, reader.token)).body.data).toEqual([]);
    expect((await ofIdentity(adminId, reader.token)).body.meta.pagination.totalCount).toBe(0);
    expect((await ofIdentity(adminId, root)).body.data.map((e: { id: string }) => e.id)).toEqual([ids.admin]);
    expect((await ofIdentity(userId, reader.token)).body.data.map((e: { id: string }) => e.id)).toContain(ids.user);
    // an admin still does everything
    expect((await call('GET', `${srv.mgmt}/enrollments/${ids.admin}`, { token: root })).status).toBe(200);
    expect((await call('DELETE', `${srv.mgmt}/enrollments/${ids.admin}`, { token: root })).status).toBe(200);
  });
});
