// Server side of the HTTP-layer overhead benchmark; run in its own process:
//   node dist/http/bench/overhead-server.js <bare|uws|uws-envelope|node>
// Prints `PORT <n>` once listening and serves until SIGTERM/SIGINT.
import { pathToFileURL } from 'node:url';
import { createApp } from '../app.js';
import { serveStaticJson } from '../bare-uws.js';
import { serveNode } from '../engines/node.js';
import { serveUws } from '../engines/uws.js';
import { dataEnvelope } from '../errors.js';
import { Router } from '../router.js';
import type { HttpResponse, HttpServer } from '../types.js';

export const BENCH_DATA = { version: 'v0.0.0-bench', revision: '0123456789abcdef', runtimeVersion: 'node' };
export const BENCH_PATH = '/edge/client/v1/version';

/** A router shaped like the controller's: ~280 routes over 40 entity types plus the target route. */
export function benchRouter(handler: () => HttpResponse): Router {
  const r = new Router();
  const base = '/edge/management/v1';
  for (let i = 0; i < 40; i++) {
    const e = `entity-${i}`;
    const h = () => ({ status: 200 });
    r.add('GET', `${base}/${e}`, h);
    r.add('POST', `${base}/${e}`, h);
    r.add('GET', `${base}/${e}/{id}`, h);
    r.add('PUT', `${base}/${e}/{id}`, h);
    r.add('PATCH', `${base}/${e}/{id}`, h);
    r.add('DELETE', `${base}/${e}/{id}`, h);
    r.add('GET', `${base}/${e}/{id}/things`, h);
  }
  r.add('GET', BENCH_PATH, handler);
  return r;
}

async function main(): Promise<void> {
  const mode = process.argv[2] ?? 'uws';
  const fixed = dataEnvelope(BENCH_DATA);
  const defaultHeaders = { server: 'ziti-controller/v0.0.0-bench', 'ziti-instance-id': 'bench' };
  let server: HttpServer;
  if (mode === 'bare') {
    server = await serveStaticJson(String(fixed.body), 0);
  } else {
    const handler = mode === 'uws-envelope' ? () => dataEnvelope(BENCH_DATA) : () => fixed;
    const app = createApp({ router: benchRouter(handler), defaultHeaders });
    const listen = { host: '127.0.0.1', port: 0, maxConnections: 100_000 };
    if (mode === 'node') server = await serveNode(app, listen);
    else if (mode === 'uws' || mode === 'uws-envelope') server = await serveUws(app, listen);
    else throw new Error(`unknown mode ${mode}`);
  }
  process.stdout.write(`PORT ${server.port}\n`);
  const stop = () => {
    void server.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
