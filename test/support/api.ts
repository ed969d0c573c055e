/** Small helpers of the API suites: error assertions, id lists, non-admin users. */
import { expect } from 'vitest';
import type { Services } from '../../src/api/services.js';
import type { Command } from '../../src/model/rows.js';
import { call, login, type Res } from './server.js';

/** The response is OpenZiti's error envelope with this status, code and (optionally) cause field. */
export function expectError(res: Res, status: number, code: string, field?: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.body.error.code).toBe(code);
  if (field !== undefined) expect(res.body.error.cause.field).toBe(field);
}

/** The sorted ids of a list response. */
export function ids(res: Res): string[] {
  expect(res.status, res.text).toBe(200);
  return (res.body.data as { id: string }[]).map((x) => x.id).sort();
}

/**
 * A non-admin identity (with `permissions` and `roleAttributes`) with a password, logged in on the management API:
 * its id and its session token.
 */
export async function userWith(
  base: string,
  adminToken: string,
  name: string,
  opts: { permissions?: string[]; roleAttributes?: string[] } = {},
): Promise<{ id: string; token: string }> {
  const mgmt = `${base}/edge/management/v1`;
  const u = await call('POST', `${mgmt}/identities`, {
    token: adminToken,
    body: {
      name,
      type: 'User',
      isAdmin: false,
      permissions: opts.permissions ?? [],
      roleAttributes: opts.roleAttributes,
    },
  });
  expect(u.status, u.text).toBe(201);
  const a = await call('POST', `${mgmt}/authenticators`, {
    token: adminToken,
    body: { method: 'updb', identityId: u.body.data.id, username: name, password: `${name}-pass` },
  });
  expect(a.status, a.text).toBe(201);
  return { id: u.body.data.id, token: await login(base, name, `${name}-pass`) };
}

const BACKGROUND_COMMANDS: ReadonlySet<string> = new Set(['touchSessions', 'expireSessions']);

function isBackgroundWrite(cmd: Command): boolean {
  return cmd.op === 'custom' && BACKGROUND_COMMANDS.has(cmd.name);
}

/** The setter of each Services' interception (installed once: a second call returns the same setter). */
const interceptions = new WeakMap<Services, (meanwhile: () => Promise<unknown>) => void>();

/**
 * Lets a test change state between a handler's checks and the apply of its command, as it can change on a cluster
 * member whose view lags the log: the function given to the returned setter runs once, before the next write.
 * The wrapper around `svc.write` is installed on the first call for `svc` only.
 */
export function interceptNextWrite(svc: Services): (meanwhile: () => Promise<unknown>) => void {
  const installed = interceptions.get(svc);
  if (installed !== undefined) return installed;
  let pending: (() => Promise<unknown>) | null = null;
  const write = svc.write.bind(svc);
  svc.write = async (cmd: Command) => {
    // the session activity flush and the idle sweep run on timers: on a slow machine one can fall between the
    // test's setter and its request, and must not take the interception meant for the request's own write
    if (isBackgroundWrite(cmd)) return write(cmd);
    const m = pending;
    pending = null;
    if (m) await m();
    return write(cmd);
  };
  const setter = (meanwhile: () => Promise<unknown>) => {
    pending = meanwhile;
  };
  interceptions.set(svc, setter);
  return setter;
}
