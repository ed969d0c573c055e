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
