/**
 * The rendering cache under writes, in process (no HTTP, no other load): a list page of 10 identities rendered
 * with `renderJson` in a loop while an identity of the page is updated (a tag, as `npm run bench -- http`'s mixed
 * points PATCH) before every 100th (1 %) or 10th (10 %) read. Printed: the rendering time per read, best of three
 * runs of 20 000 reads. Before per-collection stamps every write made every cached rendering stale; now only the
 * rewritten row renders again (and what reads the collections it changed).
 *
 *   node scripts/build.mjs && node dist/bench/render-cache.js
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Services } from '../src/api/services.js';
import { identities } from '../src/model/identity.js';
import { buildSchema, type EntityName } from '../src/model/index.js';
import { LocalProposer } from '../storage/local-proposer.js';
import { Store } from '../storage/store.js';

const AT = '2026-01-01T00:00:00.000Z';
const READS = 20_000;
const PAGE = 10;
const IDENTITIES = 12;

const dir = mkdtempSync(join(tmpdir(), 'keel-render-bench-'));
const store = await Store.open(dir, buildSchema());
const svc = new Services(store, new LocalProposer(store, { maxQueued: 100, sync: false }), {
  sessionTimeout_ms: 60_000,
  apiBaseUrls: [],
  instanceId: 'bench',
  clustered: false,
});
const rows: Array<[entity: EntityName, id: string, data: Record<string, unknown>]> = [
  ['identity-types', 'User', { name: 'User' }],
  ['auth-policies', 'default', { name: 'Default', primary: { cert: {}, updb: {}, extJwt: {} }, secondary: {} }],
];
for (let i = 0; i < IDENTITIES; i++) {
  rows.push(
    ['identities', `i${i}`, { name: `bench-id-${i}`, typeId: 'User', authPolicyId: 'default' }],
    ['authenticators', `a${i}`, { identityId: `i${i}`, method: 'updb', username: `user-${i}` }],
  );
}
for (const [entity, id, data] of rows) {
  const [r] = await store.applyGroup([{ op: 'create', entity, id, data, at: AT }], { sync: false });
  if (!r?.ok) throw new Error(`seed failed: ${JSON.stringify(r)}`);
}

let seq = 0;
/** Rendering µs per read of the page, with a write before every `writeEvery`-th read (0: none). */
async function run(writeEvery: number): Promise<number> {
  let read_ns = 0n;
  let size = 0;
  for (let n = 0; n < READS; n++) {
    if (writeEvery > 0 && n % writeEvery === 0) {
      const id = `i${seq++ % IDENTITIES}`;
      const set = { tags: { write: String(seq) } };
      await store.applyGroup([{ op: 'update', entity: 'identities', id, set, at: AT }], { sync: false });
    }
    const t0 = process.hrtime.bigint();
    let taken = 0;
    for (const row of store.collection('identities').scan()) {
      if (taken++ === PAGE) break;
      size += identities.renderJson(row, svc).length;
    }
    read_ns += process.hrtime.bigint() - t0;
  }
  if (size === 0) throw new Error('nothing rendered');
  return Number(read_ns) / READS / 1000;
}

await run(0); // warm-up
for (const [label, every] of [
  ['no writes', 0],
  ['1 % writes', 100],
  ['10 % writes', 10],
] as const) {
  const runs = [await run(every), await run(every), await run(every)];
  console.log(
    `${label.padEnd(12)} page of ${PAGE} identities: ${Math.min(...runs).toFixed(2)} µs per read (best of 3)`,
  );
}
await store.close();
rmSync(dir, { recursive: true, force: true });
