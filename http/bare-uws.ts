// Baseline for benchmarks: a bare uWebSockets.js app answering every request with one fixed
// JSON body — no router, no envelope, no request object. Whatever the real stack costs on top
// of this is the HTTP layer's overhead.

import type { us_listen_socket } from '@trufflesuite/uws-js-unofficial';
import uws from '@trufflesuite/uws-js-unofficial';
import type { HttpServer } from './types.js';

export function serveStaticJson(body: string, port: number, host = '127.0.0.1'): Promise<HttpServer> {
  const bytes = Buffer.from(body);
  const app = uws.App();
  app.any('/*', (res) => {
    res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(bytes);
  });
  return new Promise<HttpServer>((resolve, reject) => {
    app.listen(host, port, (socket: us_listen_socket | false) => {
      if (socket === false) {
        reject(new Error(`bare uws: cannot listen on ${host}:${port}`));
        return;
      }
      let closed = false;
      resolve({
        engine: 'uws',
        port: uws.us_socket_local_port(socket as never),
        close: async () => {
          if (closed) return;
          closed = true;
          uws.us_listen_socket_close(socket);
          (app as typeof app & { close?: () => void }).close?.();
        },
      });
    });
  });
}
