// Engine selection: uWebSockets.js unless TLS with client certificates (node only) is needed.
import type { App } from './app.js';
import { type NodeServeOptions, serveNode } from './engines/node.js';
import { serveUws, type UwsServeOptions } from './engines/uws.js';
import type { HttpServer } from './types.js';

export type Engine = 'uws' | 'node';

export type ServeOptions = ({ engine?: 'uws' } & UwsServeOptions) | ({ engine: 'node' } & NodeServeOptions);

export function serve(app: App, opts: ServeOptions): Promise<HttpServer> {
  if (opts.engine === 'node') return serveNode(app, opts);
  return serveUws(app, opts);
}
