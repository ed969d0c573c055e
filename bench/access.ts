/**
 * `npm run bench -- access [--quick] [--identities N] [--services N] [--policies N] [--routers N]`: the policy
 * engine (src/model/access.ts on the role indexes of src/model/policy.ts) on one node's real store, beside a naive
 * evaluator that reads the same rows and evaluates every policy.
 *
 * Data (generated, seeded): N identities with 3 of 1 000 role attributes (10 000 of them also `hot`, 10 000
 * `warm`), S services with 2 of 200 attributes, R edge routers with 2 of 50 attributes, P policies: 60 % service
 * policies (Dial/Bind, 1–2 `#attr` per side, AllOf/AnyOf, 1 % `#all` on the service side), 25 % edge router
 * policies, 15 % service edge router policies. Measured:
 * - load: the store opened on its LevelDB (rows read, collections and every derived index rebuilt), and its heap;
 * - service list: one identity's services with Dial/Bind (engine: its policies' services from the role indexes;
 *   naive: every service policy evaluated against the identity, then each matching one against every service);
 * - policy change: a service policy moved from `#hot` to `#warm` identities (10 000 leave, 10 000 join), applied
 *   through `applyGroup` (engine: the synced-off batch with the incremental index update; naive: re-evaluating that
 *   policy against every identity, the least a system without the index must do to answer afterwards).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { HttpRequest } from '../http/types.js';
import { collectionSource, runList } from '../src/api/list.js';
import type { Services } from '../src/api/services.js';
import { identityEdgeRouters, serviceAccessOf } from '../src/model/access.js';
import { buildSchema } from '../src/model/index.js';
import { services } from '../src/model/service.js';
import { parseRoles, rolesMatch } from '../storage/role-index.js';
import { Store } from '../storage/store.js';
import type { Command, Row } from '../storage/types.js';
import { benchOptions } from './options.js';

const { quick, opt } = benchOptions(process.argv.slice(2));
const N = opt('--identities', quick ? 20_000 : 100_000);
const S = opt('--services', quick ? 2_000 : 10_000);
const P = opt('--policies', quick ? 400 : 2_000);
const R = opt('--routers', quick ? 200 : 1_000);
const HOT = Math.min(10_000, Math.floor(N / 4));
const SAMPLES = quick ? 50 : 200;

let seed = 7;
const random = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed / 0x80000000;
};
const pick = (prefix: string, n: number) => `${prefix}${Math.floor(random() * n)}`;
const pad = (i: number) => String(i).padStart(7, '0');
const AT = '2026-01-01T00:00:00.000Z';
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;
const roles = (prefix: string, n: number) => [
  `#${pick(prefix, n)}`,
  ...(random() < 0.5 ? [`#${pick(prefix, n)}`] : []),
];
const semantic = () => (random() < 0.5 ? 'AllOf' : 'AnyOf');

function* commands(): Generator<Command> {
  const create = (entity: string, id: string, data: Record<string, unknown>): Command => ({
    op: 'create',
    entity,
    id,
    data,
    at: AT,
  });
  yield create('identity-types', 'Default', { name: 'Default' });
  yield create('auth-policies', 'default', { name: 'Default' });
  for (let i = 0; i < N; i++) {
    const extra = i < HOT ? ['hot'] : i < 2 * HOT ? ['warm'] : [];
    const attrs = [...new Set([pick('a', 1000), pick('a', 1000), pick('a', 1000)]), ...extra];
    yield create('identities', `i${pad(i)}`, {
      name: `identity-${i}`,
      typeId: 'Default',
      authPolicyId: 'default',
      roleAttributes: attrs,
    });
  }
  for (let i = 0; i < S; i++) {
    const attrs = [...new Set([pick('s', 200), pick('s', 200)])];
    yield create('services', `s${pad(i)}`, { name: `service-${i}`, roleAttributes: attrs, encryptionRequired: true });
  }
  for (let i = 0; i < R; i++) {
    const attrs = [...new Set([pick('r', 50), pick('r', 50)])];
    yield create('edge-routers', `r${pad(i)}`, { name: `router-${i}`, roleAttributes: attrs });
  }
  for (let i = 0; i < P; i++) {
    const kind = random();
    const id = `p${pad(i)}`;
    if (kind < 0.6) {
      yield create('service-policies', id, {
        name: `sp-${i}`,
        type: random() < 0.7 ? 'Dial' : 'Bind',
        semantic: semantic(),
        identityRoles: roles('a', 1000),
        serviceRoles: random() < 0.01 ? ['#all'] : roles('s', 200),
        postureCheckRoles: [],
      });
    } else if (kind < 0.85) {
      yield create('edge-router-policies', id, {
        name: `erp-${i}`,
        semantic: semantic(),
        identityRoles: roles('a', 1000),
        edgeRouterRoles: roles('r', 50),
      });
    } else {
      yield create('service-edge-router-policies', id, {
        name: `serp-${i}`,
        semantic: semantic(),
        serviceRoles: roles('s', 200),
        edgeRouterRoles: roles('r', 50),
      });
    }
  }
  yield create('service-policies', 'hot-policy', {
    name: 'hot-policy',
    type: 'Dial',
    semantic: 'AnyOf',
    identityRoles: ['#hot'],
    serviceRoles: ['#s1', '#s2'],
    postureCheckRoles: [],
  });
}

async function applyAll(store: Store, cmds: Iterable<Command>): Promise<void> {
  let group: Command[] = [];
  const flush = async () => {
    const results = await store.applyGroup(group, { sync: false });
    const failed = results.find((r) => !r.ok);
    if (failed && !failed.ok) throw new Error(`bench data rejected: ${JSON.stringify(failed.error)}`);
    group = [];
  };
  for (const cmd of cmds) {
    group.push(cmd);
    if (group.length === 4000) await flush();
  }
  if (group.length > 0) await flush();
}

/** Naive: every service policy against the identity, then each matching policy against every service. */
function naiveServices(store: Store, identity: Row): Map<string, Set<string>> {
  const attrs = new Set(identity.roleAttributes as string[]);
  const out = new Map<string, Set<string>>();
  const services = [...store.collection('services').scan()];
  for (const p of store.collection('service-policies').scan()) {
    if (!rolesMatch(parseRoles(p.identityRoles, p.semantic), identity.id, attrs)) continue;
    const serviceRoles = parseRoles(p.serviceRoles, p.semantic);
    for (const s of services) {
      if (!rolesMatch(serviceRoles, s.id, new Set(s.roleAttributes as string[]))) continue;
      let perms = out.get(s.id);
      if (!perms) out.set(s.id, (perms = new Set()));
      perms.add(p.type as string);
    }
  }
  return out;
}

/** Naive: one policy's identity roles against every identity. */
function naivePolicyIdentities(store: Store, policy: Row): number {
  const parsed = parseRoles(policy.identityRoles, policy.semantic);
  let n = 0;
  for (const r of store.collection('identities').scan()) {
    if (rolesMatch(parsed, r.id, new Set(r.roleAttributes as string[]))) n++;
  }
  return n;
}

const dir = mkdtempSync(join(tmpdir(), 'keel-bench-access-'));
try {
  const schema = buildSchema();
  let t0 = process.hrtime.bigint();
  const writer = await Store.open(join(dir, 'db'), schema);
  await applyAll(writer, commands());
  await writer.close();
  const writeMs = ms(t0);

  global.gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  t0 = process.hrtime.bigint();
  const store = await Store.open(join(dir, 'db'), schema);
  const loadMs = ms(t0);
  global.gc?.();
  const heapMiB = (process.memoryUsage().heapUsed - heap0) / 2 ** 20;
  const svc = { store, get: (e: string, id: string) => store.get(e, id) } as unknown as Services;

  // one identity's services, engine vs naive, on the same sample of identities
  let engineMs = 0;
  let pageMs = 0;
  let naiveMs = 0;
  let listed = 0;
  let routers = 0;
  for (let k = 0; k < SAMPLES; k++) {
    const id = `i${pad(Math.floor(random() * N))}`;
    t0 = process.hrtime.bigint();
    const access = serviceAccessOf(svc, id);
    engineMs += ms(t0);
    // what GET /services (client) adds: the list query over those ids and the first page rendered
    const page = await runList(
      { query: new URLSearchParams() } as HttpRequest,
      services.symbolTable(svc),
      collectionSource(store.collection('services'), new Set(access.keys())),
    );
    for (const row of page.rows) services.renderJson(row, svc);
    pageMs += ms(t0);
    routers += identityEdgeRouters(svc, id).size;
    t0 = process.hrtime.bigint();
    const naive = naiveServices(store, store.get('identities', id)!);
    naiveMs += ms(t0);
    if (naive.size !== access.size)
      throw new Error(`engine and naive disagree for ${id}: ${access.size} vs ${naive.size}`);
    listed += access.size;
  }

  const hot = store.get('service-policies', 'hot-policy')!;
  t0 = process.hrtime.bigint();
  const results = await store.applyGroup(
    [{ op: 'update', entity: 'service-policies', id: hot.id, set: { identityRoles: ['#warm'] }, at: AT }],
    { sync: false },
  );
  const changeMs = ms(t0);
  if (!results[0]!.ok) throw new Error('policy change failed');
  t0 = process.hrtime.bigint();
  const moved = naivePolicyIdentities(store, store.get('service-policies', hot.id)!);
  const naiveChangeMs = ms(t0);
  if (moved !== HOT) throw new Error(`hot policy should select ${HOT} identities, selects ${moved}`);
  // the first warm identity now reaches the hot policy's services
  if (![...serviceAccessOf(svc, `i${pad(HOT)}`).values()].some((a) => a.dial.includes(hot.id))) {
    throw new Error('the moved policy does not reach the warm identities');
  }
  const f = (x: number) => x.toFixed(3);
  console.log(
    `access engine: ${N} identities, ${S} services, ${R} edge routers, ${P + 1} policies (written in ${(writeMs / 1000).toFixed(1)} s)`,
  );
  console.log(
    `  load (LevelDB → collections + ${schema.derived.length} role indexes): ${loadMs.toFixed(0)} ms, heap +${heapMiB.toFixed(0)} MiB` +
      `${global.gc ? '' : ' (node --expose-gc for a steadier figure)'}`,
  );
  console.log(
    `  one identity's services (avg of ${SAMPLES}, ${(listed / SAMPLES).toFixed(1)} services, ${(routers / SAMPLES).toFixed(1)} edge routers): ` +
      `engine ${f(engineMs / SAMPLES)} ms (with the first page listed and rendered ${f(pageMs / SAMPLES)} ms) vs naive ` +
      `${f(naiveMs / SAMPLES)} ms: ${(naiveMs / engineMs).toFixed(0)}x`,
  );
  console.log(
    `  policy change moving ${HOT} + ${HOT} identities: applied (batch + index update) in ${f(changeMs)} ms; ` +
      `naive re-evaluation of that policy ${f(naiveChangeMs)} ms: ${(naiveChangeMs / changeMs).toFixed(1)}x`,
  );
  await store.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
