/** The management API as the admin of a test server: raw calls, and creates and patches that must succeed. */
import { afterAll, beforeAll, expect } from 'vitest';
import { call, login, type Res, startServer, type TestServer } from './server.js';

export interface AdminApi {
  mgmt(method: string, path: string, body?: unknown): Promise<Res>;
  /** POST that must answer 201: the new id. */
  create(path: string, body: Record<string, unknown>): Promise<string>;
  /** PATCH that must answer 200. */
  patch(path: string, body: Record<string, unknown>): Promise<void>;
}

/** `srv` and `token` are read at each call (tests assign them in beforeAll). */
export function adminApi(srv: () => TestServer, token: () => string): AdminApi {
  const mgmt = (method: string, path: string, body?: unknown) =>
    call(method, `${srv().mgmt}${path}`, { token: token(), body });
  return {
    mgmt,
    async create(path, body) {
      const r = await mgmt('POST', path, body);
      expect(r.status, r.text).toBe(201);
      return r.body.data.id;
    },
    async patch(path, body) {
      const r = await mgmt('PATCH', path, body);
      expect(r.status, r.text).toBe(200);
    },
  };
}

/**
 * An edge router every identity and every service may use: the router `<prefix>-er` (attribute `<prefix>-er`), an
 * edge router policy `<prefix>-erp` for `#all` identities and a service edge router policy `<prefix>-serp` for `#all`
 * services. Its id.
 */
export async function openEdgeRouter(create: AdminApi['create'], prefix: string): Promise<string> {
  const attr = `${prefix}-er`;
  const id = await create('/edge-routers', { name: attr, roleAttributes: [attr] });
  await create('/edge-router-policies', {
    name: `${prefix}-erp`,
    semantic: 'AnyOf',
    identityRoles: ['#all'],
    edgeRouterRoles: [`#${attr}`],
  });
  await create('/service-edge-router-policies', {
    name: `${prefix}-serp`,
    semantic: 'AnyOf',
    serviceRoles: ['#all'],
    edgeRouterRoles: [`#${attr}`],
  });
  return id;
}

/**
 * A test server started before the file's tests and stopped after them, with the management API as its admin;
 * `srv()` and `admin()` (the admin's token) are read once it has started.
 */
export function adminServer(): AdminApi & { srv(): TestServer; admin(): string } {
  let srv: TestServer | undefined;
  let admin = '';
  beforeAll(async () => {
    srv = await startServer();
    admin = await login(srv.base);
  });
  afterAll(() => srv?.stop());
  const started = () => {
    expect(srv, 'the server starts in beforeAll').toBeDefined();
    return srv!;
  };
  return { ...adminApi(started, () => admin), srv: started, admin: () => admin };
}
