import { Errors } from '../api/errors.js';
import { type ApiName, type OpDef, op } from '../api/op.js';
import { API_BASE } from '../api/register.js';
import { ok, okJson } from '../api/respond.js';
import type { Services } from '../api/services.js';
import { baseEntity, detailEnvelope, meta } from '../model/common.js';
import { s } from '../schema/s.js';
import { KEEL_BUILD_DATE, KEEL_REVISION, KEEL_VERSION } from '../version.js';

const BOTH: ApiName[] = ['client', 'management'];

const apiVersion = s.named(
  'apiVersion',
  s.obj({ apiBaseUrls: s.arr(s.str()), path: s.str(), version: s.str() }, ['path']),
);
const versionSchema = s.named(
  'version',
  s.obj({
    apiVersions: s.map(s.map(apiVersion)),
    buildDate: s.str(),
    capabilities: s.arr(s.str()),
    revision: s.str(),
    runtimeVersion: s.str(),
    version: s.str(),
  }),
);
const capabilities = s.named('capabilities', s.enum(['OIDC_AUTH', 'HA_CONTROLLER'] as const));
const specDetail = s.named('specDetail', s.allOf(baseEntity, s.obj({ name: s.str() }, ['name'])));

/** The capabilities this controller knows of (enabled or not). Keel has no OIDC endpoint yet, so it never reports OIDC_AUTH as enabled. */
export const ENUMERATED_CAPABILITIES = ['OIDC_AUTH', 'HA_CONTROLLER'];

export function versionData(svc: Services): Record<string, unknown> {
  const binding = (path: string) => ({ v1: { apiBaseUrls: svc.config.apiBaseUrls.map((u) => u + path), path } });
  return {
    apiVersions: {
      edge: binding(API_BASE.client),
      'edge-client': binding(API_BASE.client),
      'edge-management': binding(API_BASE.management),
    },
    buildDate: KEEL_BUILD_DATE,
    capabilities: svc.config.clustered ? ['HA_CONTROLLER'] : [],
    revision: KEEL_REVISION,
    runtimeVersion: `node${process.versions.node}`,
    version: KEEL_VERSION,
  };
}

/** The version body only changes with the advertised addresses: serialize it once per change. */
const versionCache = new WeakMap<Services, { key: string; json: string }>();
function versionJson(svc: Services): string {
  const key = `${svc.config.clustered}|${svc.config.apiBaseUrls.join('|')}`;
  const hit = versionCache.get(svc);
  if (hit && hit.key === key) return hit.json;
  const json = JSON.stringify(versionData(svc));
  versionCache.set(svc, { key, json });
  return json;
}

/** Spec ids are looked up in a Map: an id such as `constructor` or `__proto__` must not reach Object.prototype. */
const SPEC_IDS: ReadonlyMap<string, ApiName> = new Map([
  ['edge-client', 'client'],
  ['edge-management', 'management'],
]);
const SPEC_CREATED_AT = '2026-11-25T00:00:00.000Z';

function specRow(id: string) {
  return {
    _links: { self: { href: `./specs/${id}` }, spec: { href: `./specs/${id}/spec` } },
    createdAt: SPEC_CREATED_AT,
    id,
    name: id === 'edge-client' ? 'Ziti Edge Client API' : 'Ziti Edge Management API',
    tags: {},
    updatedAt: SPEC_CREATED_AT,
  };
}

/** `specs(api)` returns the served OpenAPI document of an API (built once, from the registered operations). */
export function informationalOps(specs: (api: ApiName) => string): OpDef<unknown>[] {
  const jsonSpec = (api: ApiName) => ({
    status: 200,
    headers: { 'content-type': 'application/json' },
    body: specs(api),
  });
  return [
    // `/` and `/version` answer the same body (version_router.go)
    ...(['/version', '/'] as const).map((path) =>
      op({
        method: 'GET',
        path,
        apis: BOTH,
        operationId: path === '/' ? 'listRoot' : 'listVersion',
        tags: ['Informational'],
        summary: 'Returns version information',
        access: 'none',
        responses: {
          200: { description: 'Version information', schema: detailEnvelope('listVersionEnvelope', versionSchema) },
        },
        handler: ({ svc }) => okJson(versionJson(svc)),
      }),
    ),
    op({
      method: 'GET',
      path: '/enumerated-capabilities',
      apis: BOTH,
      operationId: 'listEnumeratedCapabilities',
      tags: ['Informational'],
      summary: 'Returns all capabilities this version of the controller is aware of, enabled or not.',
      access: 'none',
      responses: {
        200: {
          description: 'A list of enumerated capabilities',
          schema: s.named(
            'listEnumeratedCapabilitiesEnvelope',
            s.obj({ data: s.arr(capabilities), meta }, ['meta', 'data']),
          ),
        },
      },
      handler: () => ok(ENUMERATED_CAPABILITIES),
    }),
    op({
      method: 'GET',
      path: '/protocols',
      apis: ['client'],
      operationId: 'listProtocols',
      tags: ['Informational'],
      summary: 'Return a list of the listening Edge protocols',
      access: 'none',
      responses: {
        200: {
          description: 'A list of supported Edge protocols',
          schema: s.named(
            'listProtocolsEnvelope',
            s.obj(
              {
                data: s.named('listProtocols', s.map(s.named('protocol', s.obj({ address: s.str() }, ['address'])))),
                meta,
              },
              ['meta', 'data'],
            ),
          ),
        },
      },
      handler: ({ svc }) => {
        const out: Record<string, { address: string }> = {};
        for (const url of svc.config.apiBaseUrls) {
          const u = new URL(url);
          out[u.protocol.replace(':', '')] = { address: u.host };
        }
        return ok(out);
      },
    }),
    op({
      method: 'GET',
      path: '/specs',
      apis: BOTH,
      operationId: 'listSpecs',
      tags: ['Informational'],
      summary: 'Returns a list of API specs',
      access: 'none',
      responses: {
        200: {
          description: 'A list of specifications',
          schema: s.named(
            'listSpecsEnvelope',
            s.obj({ data: s.named('specList', s.arr(specDetail)), meta }, ['meta', 'data']),
          ),
        },
      },
      // OpenZiti lists only the client spec here (REFERENCE §6); both are available by id.
      handler: () => ok([specRow('edge-client')]),
    }),
    op({
      method: 'GET',
      path: '/specs/{id}',
      apis: BOTH,
      operationId: 'detailSpec',
      tags: ['Informational'],
      summary: 'Return a single spec resource',
      access: 'none',
      responses: {
        200: { description: 'A single specification', schema: detailEnvelope('detailSpecEnvelope', specDetail) },
      },
      handler: ({ params }) => {
        if (!SPEC_IDS.has(params.id!))
          throw Errors.NOT_FOUND({ code: 'UNHANDLED', message: `spec with id ${params.id} not found` });
        return ok(specRow(params.id!));
      },
    }),
    op({
      method: 'GET',
      path: '/specs/{id}/spec',
      apis: BOTH,
      operationId: 'detailSpecBody',
      tags: ['Informational'],
      summary: "Returns the spec's file",
      description: 'Return the body of the specification (Swagger 2.0, JSON).',
      access: 'none',
      responses: { 200: { description: 'The specification document' } },
      handler: ({ params }) => {
        const api = SPEC_IDS.get(params.id!);
        if (!api) throw Errors.NOT_FOUND({ code: 'UNHANDLED', message: `spec with id ${params.id} not found` });
        return jsonSpec(api);
      },
    }),
    op({
      method: 'GET',
      path: '/swagger.json',
      apis: BOTH,
      tags: ['Informational'],
      summary: 'The OpenAPI document of this API',
      access: 'none',
      undocumented: true,
      responses: { 200: { description: 'The specification document' } },
      handler: ({ api }) => jsonSpec(api),
    }),
  ];
}
