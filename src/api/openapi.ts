import { apiErrorEnvelope } from '../model/common.js';
import { toSwagger } from '../schema/s.js';
import { EDGE_API_VERSION } from '../version.js';
import type { ApiName, OpDef } from './op.js';
import { API_BASE } from './register.js';

const TITLES: Record<ApiName, string> = { client: 'Ziti Edge Client', management: 'Ziti Edge Management' };

const STANDARD_ERRORS: Record<number, string> = {
  400: "The supplied request contains invalid fields or could not be parsed (json and non-json bodies). The error's code, message, and cause fields can be inspected for further information",
  401: 'The supplied session does not have the correct access rights to request this resource',
  404: 'The requested resource does not exist',
  409: 'The resource requested to be removed/altered cannot be as it is referenced by another object.',
  429: 'The resource requested is rate limited and the rate limit has been exceeded',
  503: 'The request could not be completed due to the server being busy or in a temporarily bad state',
};

/**
 * Keel's own OpenAPI (Swagger 2.0) document for one API, generated from the operations it actually serves:
 * every path, parameter, body schema and response schema comes from the route definitions.
 */
export function buildOpenApi(api: ApiName, ops: OpDef<unknown>[], version: string): Record<string, unknown> {
  const defs: Record<string, unknown> = {};
  const paths: Record<string, Record<string, unknown>> = {};
  const errorRef = toSwagger(apiErrorEnvelope, defs, false);
  for (const op of ops) {
    if (!op.apis.includes(api) || op.undocumented) continue;
    const parameters: Record<string, unknown>[] = [];
    for (const m of op.path.matchAll(/\{([^}]+)\}/g)) {
      parameters.push({ in: 'path', name: m[1], required: true, type: 'string' });
    }
    for (const q of op.query ?? []) {
      const p: Record<string, unknown> = { in: 'query', name: q.name, type: q.type };
      if (q.type === 'array') Object.assign(p, { items: { type: 'string' }, collectionFormat: 'multi' });
      if (q.required) p.required = true;
      if (q.enum) p.enum = q.enum;
      if (q.description) p.description = q.description;
      parameters.push(p);
    }
    if (op.body) {
      parameters.push({
        in: 'body',
        name: op.bodyName ?? 'body',
        required: op.bodyRequired !== false,
        schema: toSwagger(op.body, defs, false),
      });
    }
    const responses: Record<string, unknown> = {};
    for (const [status, r] of Object.entries(op.responses)) {
      responses[status] = r.schema
        ? { description: r.description, schema: toSwagger(r.schema, defs, false) }
        : { description: r.description };
    }
    const errors = op.access === 'none' ? [400, 429] : [400, 401, 404, 429, 503];
    if (op.method === 'GET' && !op.path.includes('{')) errors.splice(errors.indexOf(404), errors.includes(404) ? 1 : 0);
    if (op.method === 'DELETE') errors.push(409);
    for (const status of errors) {
      if (!responses[status]) responses[status] = { description: STANDARD_ERRORS[status], schema: errorRef };
    }
    const operation: Record<string, unknown> = {
      tags: op.tags,
      summary: op.summary,
      responses,
      security: op.access === 'none' ? [] : [{ ztSession: [] }],
    };
    if (op.operationId) operation.operationId = op.operationId;
    if (op.description) operation.description = op.description;
    if (op.produces) operation.produces = op.produces;
    if (op.consumes) operation.consumes = op.consumes; // the document's default is application/json
    if (parameters.length > 0) operation.parameters = parameters;
    paths[op.path] ??= {};
    paths[op.path]![op.method.toLowerCase()] = operation;
  }
  const sortedPaths = Object.fromEntries(Object.entries(paths).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const sortedDefs = Object.fromEntries(Object.entries(defs).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return {
    swagger: '2.0',
    info: {
      title: TITLES[api],
      description: `OpenZiti-compatible Edge ${api === 'client' ? 'Client' : 'Management'} API served by Keel ${version}`,
      version: EDGE_API_VERSION,
      license: { name: 'Apache 2.0', url: 'http://www.apache.org/licenses/LICENSE-2.0.html' },
    },
    basePath: API_BASE[api],
    schemes: ['https'],
    consumes: ['application/json'],
    produces: ['application/json'],
    securityDefinitions: {
      ztSession: {
        type: 'apiKey',
        in: 'header',
        name: 'zt-session',
        description: 'An API Key that is provided post authentication',
      },
    },
    paths: sortedPaths,
    definitions: sortedDefs,
  };
}
