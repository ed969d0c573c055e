/** HTTPS requests with a client certificate (mutual TLS), checked against the spec like `call()`. */
import { readFileSync } from 'node:fs';
import { Agent, request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import type { ControllerOptions } from '../../src/controller.js';
import { ADMIN_PASSWORD, startServer, type TestServer } from './server.js';
import { checkResponse } from './spec-check.js';

export interface TlsRes {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  text: string;
}

/** CA certificates `call()` trusts for https:// URLs (the roots of `keel run` processes the test started). */
const trusted = new Set<string>();
/** Keep-alive connections trusting `trusted` (made anew when a CA is added), as fetch keeps its connections. */
let agent: Agent | null = null;

/** Lets `call()` (test/support/server.ts) reach HTTPS listeners whose certificate chains to `caPem`. */
export function trustCa(caPem: string): void {
  if (trusted.has(caPem)) return;
  trusted.add(caPem);
  agent?.destroy();
  agent = null;
}

/** A fetch-like HTTPS request trusting the CAs given to trustCa (fetch cannot be given a CA without undici). */
export function httpsFetch(
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string },
): Promise<{ status: number; headers: Headers; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      {
        method: init.method,
        headers: init.headers,
        agent: (agent ??= new Agent({ keepAlive: true, ca: [...trusted] })),
        timeout: 20_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => {
          const headers = new Headers();
          for (const [name, value] of Object.entries(res.headers)) {
            for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(name, v);
          }
          resolve({ status: res.statusCode ?? 0, headers, text: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end(init.body);
  });
}

/** One HTTPS request trusting `ca`, with a client key and certificate when given; checked against the spec. */
export function tlsCall(
  method: string,
  url: string,
  opts: { ca: string; key?: string; cert?: string; body?: unknown; token?: string; raw?: string; type?: string },
): Promise<TlsRes> {
  const headers: Record<string, string> = {};
  let payload: string | undefined;
  if (opts.raw !== undefined) {
    payload = opts.raw;
    headers['content-type'] = opts.type ?? 'text/plain';
  } else if (opts.body !== undefined) {
    payload = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  if (opts.token) headers['zt-session'] = opts.token;
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      { method, headers, ca: opts.ca, key: opts.key, cert: opts.cert, agent: false, timeout: 20_000 },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => {
          let body: any;
          try {
            body = text ? JSON.parse(text) : undefined;
          } catch {
            body = undefined;
          }
          const out = { status: res.statusCode ?? 0, headers: res.headers, body, text };
          try {
            checkResponse(method, url, out);
            resolve(out);
          } catch (err) {
            reject(err);
          }
        });
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end(payload);
  });
}

/**
 * A controller on the node engine with API TLS (client certificates for mutual TLS), the trust anchor a client
 * bootstraps (the root, as in /.well-known/est/cacerts) and the default admin's session token.
 */
export async function startTlsServer(
  opts: Partial<ControllerOptions> = {},
): Promise<{ srv: TestServer; ca: string; admin: string }> {
  const srv = await startServer({ engine: 'node', apiTls: true, ...opts });
  const ca = readFileSync(join(srv.dataDir, 'pki', 'ca.cert.pem'), 'utf8');
  const r = await tlsCall('POST', `${srv.mgmt}/authenticate?method=password`, {
    ca,
    body: { username: 'admin', password: ADMIN_PASSWORD },
  });
  return { srv, ca, admin: r.headers['zt-session'] as string };
}
