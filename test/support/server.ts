/** Starts a controller in-process on an ephemeral port with a throwaway data directory, for tests. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Controller, type ControllerOptions } from '../../src/controller.js';
import { checkResponse } from './spec-check.js';
import { httpsFetch } from './tls-call.js';

export const ADMIN_PASSWORD = 'admin-test-password';

export interface TestServer {
  ctl: Controller;
  base: string;
  mgmt: string;
  client: string;
  dataDir: string;
  stop(opts?: { keepData?: boolean }): Promise<void>;
}

export async function startServer(opts: Partial<ControllerOptions> = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'keel-test-'));
  const ctl = await Controller.start({
    dataDir,
    host: '127.0.0.1',
    port: 0,
    adminPassword: ADMIN_PASSWORD,
    sync: false,
    ...opts,
  });
  const base = ctl.baseUrl;
  return {
    ctl,
    base,
    mgmt: `${base}/edge/management/v1`,
    client: `${base}/edge/client/v1`,
    dataDir,
    async stop({ keepData = false } = {}) {
      await ctl.stop();
      if (!keepData) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface Res {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

/**
 * A tiny JSON client: `call(method, url, {body, token, headers, raw})`. Every response to an operation OpenZiti's
 * spec declares is checked against it (status and body schema, see spec-check.ts), so any test calling the API
 * through here is also a conformance test.
 */
export async function call(
  method: string,
  url: string,
  opts: { body?: unknown; token?: string; headers?: Record<string, string>; raw?: string } = {},
): Promise<Res> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers['zt-session'] = opts.token;
  let body: string | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = url.startsWith('https:')
    ? await httpsFetch(url, { method, headers, ...(body !== undefined ? { body } : {}) })
    : await fetch(url, { method, headers, body }).then(async (r) => ({
        status: r.status,
        headers: r.headers,
        text: await r.text(),
      }));
  const text = res.text;
  let parsed: any;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  const out = { status: res.status, headers: res.headers, body: parsed, text };
  checkResponse(method, url, out);
  return out;
}

export async function login(base: string, username = 'admin', password = ADMIN_PASSWORD): Promise<string> {
  const r = await call('POST', `${base}/edge/management/v1/authenticate?method=password`, {
    body: { username, password },
  });
  if (r.status !== 200) throw new Error(`login failed: ${r.status} ${r.text}`);
  return r.headers.get('zt-session')!;
}
