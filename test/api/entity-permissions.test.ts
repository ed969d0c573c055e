/**
 * The entity permissions of the access model (`service`, `config`, `service-policy`, `edge-router-policy`,
 * `service-edge-router-policy`, `posture-check`, `router`, `terminator`) and their `.read` / `.create` / `.update` /
 * `.delete` forms grant exactly OpenZiti's DefaultManagementAccess: an admin, the entity permission, the
 * entity-action permission of the request's method (GET read, POST create, PUT/PATCH update, DELETE delete) or, for
 * reads, `admin_readonly`. Everyone else gets 401 `UNAUTHORIZED`.
 *
 * For each permission the operations walked are the ones the controller serves under it (`srv.ctl.ops`), so every
 * association list, role-attribute list and sub-resource is walked too; each list must hold the entity's CRUD paths,
 * so an operation that loses its `permission` declaration fails here. Every call goes through `call()`, so each
 * response is also checked against OpenZiti's spec.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OpDef } from '../../src/api/op.js';
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
};

const ACTION_OF: Record<string, 'read' | 'create' | 'update' | 'delete'> = {
  GET: 'read',
  POST: 'create',
  PUT: 'update',
  PATCH: 'update',
  DELETE: 'delete',
};

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
  if (collection === '/posture-check-types') return 'OS';
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

/** Whether OpenZiti's DefaultManagementAccess lets this caller call an operation guarded by `permission`. */
function granted(caller: Caller, permission: Permission, method: string): boolean {
  const action = ACTION_OF[method]!;
  if (caller.isAdmin === true) return true;
  if (action === 'read' && caller.permissions.includes('admin_readonly')) return true;
  return caller.permissions.includes(permission) || caller.permissions.includes(`${permission}.${action}`);
}

const shared: Caller[] = [];
const perEntity = new Map<Permission, Caller[]>();

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
  ]) {
    fixture.set(collection, await adminCreate(collection));
  }
  fixture.set('/routers', fixture.get('/transit-routers')!);
  fixture.set('/terminators', await adminCreate('/terminators'));
  shared.push(
    { label: 'admin', permissions: [], isAdmin: true, token: root },
    await caller(['admin_readonly']),
    await caller(['identity']),
    await caller([]),
  );
  for (const p of ENTITY_PERMISSIONS) {
    const own: Caller[] = [];
    for (const form of [p, `${p}.read`, `${p}.create`, `${p}.update`, `${p}.delete`]) own.push(await caller([form]));
    perEntity.set(p, own);
  }
}, 120_000);

afterAll(async () => {
  await srv.stop();
});

function opsOf(permission: Permission): OpDef<unknown>[] {
  return srv.ctl.ops.filter((op) => op.apis.includes('management') && op.permission === permission);
}

async function send(op: OpDef<unknown>, token: string): Promise<Res> {
  const path = op.path.includes('{id}') ? op.path.replace('{id}', encodeURIComponent(await idFor(op))) : op.path;
  expect(path, `${op.path}: a path parameter other than {id}`).not.toMatch(/\{/);
  const body = op.method === 'GET' || op.method === 'DELETE' ? undefined : {};
  return call(op.method, `${srv.mgmt}${path}`, { token, ...(body !== undefined ? { body } : {}) });
}

describe.each(ENTITY_PERMISSIONS)('the %s permission', (permission) => {
  it('guards the entity CRUD paths (a dropped permission declaration fails here)', () => {
    const served = new Set(opsOf(permission).map((op) => `${op.method} ${op.path}`));
    for (const base of CRUD_PATHS[permission]) {
      for (const want of [`GET ${base}`, `POST ${base}`]) expect(served, want).toContain(want);
      for (const m of ['GET', 'PUT', 'PATCH', 'DELETE'])
        expect(served, `${m} ${base}/{id}`).toContain(`${m} ${base}/{id}`);
    }
  });

  it('every operation: admin, the permission and its matching action form pass; everyone else gets 401', async () => {
    const callers = [...shared, ...perEntity.get(permission)!];
    const outcomes: string[] = [];
    const wanted: string[] = [];
    for (const op of opsOf(permission)) {
      for (const c of callers) {
        const res = await send(op, c.token);
        const pass = granted(c, permission, op.method);
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
    const refusedCreate = callers.filter((c) => !granted(c, permission, 'POST'));
    const refusedDelete = callers.filter((c) => !granted(c, permission, 'DELETE'));
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
