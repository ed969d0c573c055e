// Baseline for benchmarks: a bare uWebSockets.js app answering every request with one fixed
// JSON body — no router, no envelope, no request object. Whatever the real stack costs on top
// of this is the HTTP layer's overhead.

import uws from '@trufflesuite/uws-js-unofficial';
import { listenUws } from './engines/uws.js';
import type { HttpServer } from './types.js';

export function serveStaticJson(body: string, port: number, host = '127.0.0.1'): Promise<HttpServer> {
  const bytes = Buffer.from(body);
  const app = uws.App();
  app.any('/*', (res) => {
    res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(bytes);
  });
  return listenUws(app, host, port);
}
