/** Keel's served OpenAPI documents: generated from its routes, and every operation matches OpenZiti's by path and id. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startServer, type TestServer } from '../support/server.js';
import { loadSpec, SPEC_AVAILABLE } from '../support/spec.js';

let srv: TestServer;
beforeAll(async () => {
  srv = await startServer();
});
afterAll(() => srv.stop());

describe.each(['client', 'management'] as const)('the served %s document', (api) => {
  it('lists exactly the operations the router serves, with bodies and responses', async () => {
    const doc = (await call('GET', `${srv.base}/edge/${api}/v1/swagger.json`)).body;
    const served = srv.ctl.ops.filter((o) => o.apis.includes(api) && !o.undocumented);
    const documented: string[] = [];
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const method of Object.keys(item)) documented.push(`${method.toUpperCase()} ${path}`);
    }
    expect(documented.sort()).toEqual(served.map((o) => `${o.method} ${o.path}`).sort());
    const create = doc.paths['/authenticate']?.post;
    expect(create.parameters.find((p: any) => p.in === 'body').schema).toEqual({ $ref: '#/definitions/authenticate' });
    // every reference resolves
    const refs = JSON.stringify(doc).match(/#\/definitions\/[A-Za-z0-9_]+/g) ?? [];
    for (const ref of refs) expect(doc.definitions[ref.slice('#/definitions/'.length)], ref).toBeDefined();
  });

  it.skipIf(!SPEC_AVAILABLE)("uses OpenZiti's method, path and operationId for every operation it serves", async () => {
    const doc = (await call('GET', `${srv.base}/edge/${api}/v1/swagger.json`)).body;
    const theirs = loadSpec(api);
    const mismatches: string[] = [];
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        const their = theirs.paths[path]?.[method];
        if (!their) mismatches.push(`${method} ${path} is not in OpenZiti's ${api} spec`);
        else if (their.operationId !== op.operationId)
          mismatches.push(`${method} ${path}: ${op.operationId} vs ${their.operationId}`);
      }
    }
    expect(mismatches).toEqual([]);
  });
});
