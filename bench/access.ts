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
 *   policy against every identity, the least a system without the index must do to answer afterwards);
 * - sessions that lost access: a Dial session for each identity the moved policy reaches, the policy moved back, and
 *   the service policy enforcer (src/auth/session-enforcer.ts) checking and deleting them, against a naive check of
 *   the same sessions (every Dial policy evaluated against each session's identity and service; no deletes);
 * - session create: `POST /sessions` over HTTP on a controller started on the same data (synced writes), p50/p99
 *   for sampled identities that may dial a service through an edge router both sides allow (each with an API
 *   session written beside the data); beside it the decision alone in-process, engine (src/model/access.ts) vs
 *   naive (every service policy against the identity and the service, every edge router policy and service edge
 *   router policy against every edge router).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { HttpRequest } from '../http/types.js';
import { collectionSource, runList } from '../src/api/list.js';
import type { Services } from '../src/api/services.js';
import { SessionEnforcer } from '../src/auth/session-enforcer.js';
import { Controller } from '../src/controller.js';
import { identityEdgeRouters, serviceAccessOf, serviceEdgeRouters } from '../src/model/access.js';
import type { EntityName } from '../src/model/index.js';
import { buildSchema } from '../src/model/index.js';
import { roleIndexName } from '../src/model/policy.js';
import type { Change, Command } from '../src/model/rows.js';
import { services } from '../src/model/service.js';
import { uuid } from '../src/util/ids.js';
import { parseRoles, type RoleIndex, rolesMatch } from '../storage/role-index.js';
import { Store } from '../storage/store.js';
import type { Row } from '../storage/types.js';
import { AT, applyAll, benchCommands, type DataSizes, hotCount, pad, seeded } from './data.js';
import { benchOptions } from './options.js';

const { quick, opt } = benchOptions(process.argv.slice(2));
const N = opt('--identities', quick ? 20_000 : 100_000);
const S = opt('--services', quick ? 2_000 : 10_000);
const P = opt('--policies', quick ? 400 : 2_000);
const R = opt('--routers', quick ? 200 : 1_000);
const SIZES: DataSizes = { identities: N, services: S, routers: R, policies: P };
const HOT = hotCount(SIZES);
const SAMPLES = quick ? 50 : 200;
// the generator draws from its own sequence: this one picks the samples
const random = seeded(11);
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;
const commands = () => benchCommands(SIZES);

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

const attrsOf = (r: Row) => new Set(r.roleAttributes as string[]);

/** Naive: the policies of `entity` (kept by `keep`) whose `field` roles select `row`, every policy evaluated. */
function naiveMatching(store: Store, entity: string, field: string, row: Row, keep: (p: Row) => boolean = () => true) {
  const out: Row[] = [];
  for (const p of store.collection(entity).scan()) {
    if (keep(p) && rolesMatch(parseRoles(p[field], p.semantic), row.id, attrsOf(row))) out.push(p);
  }
  return out;
}

/**
 * Naive session decision: a Dial policy grants the service to the identity, and some edge router is allowed by an
 * edge router policy of the identity and a service edge router policy of the service (every policy evaluated, every
 * router tried).
 */
function naiveMaySession(store: Store, identity: Row, service: Row): boolean {
  const dial = naiveMatching(store, 'service-policies', 'identityRoles', identity, (p) => p.type === 'Dial');
  if (!dial.some((p) => rolesMatch(parseRoles(p.serviceRoles, p.semantic), service.id, attrsOf(service)))) return false;
  const routerRoles = (ps: Row[]) => ps.map((p) => parseRoles(p.edgeRouterRoles, p.semantic));
  const mine = routerRoles(naiveMatching(store, 'edge-router-policies', 'identityRoles', identity));
  const its = routerRoles(naiveMatching(store, 'service-edge-router-policies', 'serviceRoles', service));
  for (const r of store.collection('edge-routers').scan()) {
    const attrs = attrsOf(r);
    if (mine.some((m) => rolesMatch(m, r.id, attrs)) && its.some((m) => rolesMatch(m, r.id, attrs))) return true;
  }
  return false;
}

/** An API session of `identityId` written beside the data (logins are the auth bench's). */
function apiSessionCommand(id: string, token: string, identityId: string, at: string): Command {
  return {
    op: 'create',
    entity: 'api-sessions',
    id,
    data: { token, identityId, configTypes: [], isMfaRequired: false, isMfaComplete: false, lastActivityAt: at },
    at,
  };
}

/** The engine's session decision (what POST /sessions asks of the policy engine). */
function engineMaySession(svc: Services, identityId: string, serviceId: string): boolean {
  const access = serviceAccessOf(svc, identityId, serviceId).get(serviceId);
  if (!access || access.dial.length === 0) return false;
  const mine = identityEdgeRouters(svc, identityId);
  for (const r of serviceEdgeRouters(svc, serviceId)) if (mine.has(r)) return true;
  return false;
}

const percentile = (xs: number[], q: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
};

const dir = mkdtempSync(join(tmpdir(), 'keel-bench-access-'));
try {
  const schema = buildSchema();
  // the controller's first start initialises the data directory (identity types, auth policy, admin, keys)
  const quiet = () => {};
  const ctlOpts = { dataDir: dir, host: '127.0.0.1', port: 0, adminPassword: 'bench-admin-pw', log: quiet };
  await (await Controller.start(ctlOpts)).stop();
  const stateDir = join(dir, 'state');
  let t0 = process.hrtime.bigint();
  const writer = await Store.open(stateDir, schema);
  await applyAll(writer, commands());
  await writer.close();
  const writeMs = ms(t0);

  global.gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  t0 = process.hrtime.bigint();
  const store = await Store.open(stateDir, schema);
  const loadMs = ms(t0);
  global.gc?.();
  const heapMiB = (process.memoryUsage().heapUsed - heap0) / 2 ** 20;
  const svc = { store, get: (e: EntityName, id: string) => store.get(e, id) } as unknown as Services;

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
  // session create: pairs (identity, service) the engine allows, checked against the naive decision
  const pairs: [string, string][] = [];
  let engineDecideMs = 0;
  let naiveDecideMs = 0;
  for (let tries = 0; pairs.length < SAMPLES && tries < SAMPLES * 50; tries++) {
    const id = `i${pad(Math.floor(random() * N))}`;
    const dial = [...serviceAccessOf(svc, id)].filter(([, a]) => a.dial.length > 0).map(([s]) => s);
    const serviceId = dial[Math.floor(random() * dial.length)];
    if (serviceId === undefined) continue;
    t0 = process.hrtime.bigint();
    const engine = engineMaySession(svc, id, serviceId);
    const engineOne = ms(t0);
    t0 = process.hrtime.bigint();
    const naive = naiveMaySession(store, store.get('identities', id)!, store.get('services', serviceId)!);
    const naiveOne = ms(t0);
    if (engine !== naive) throw new Error(`session decision differs for ${id} → ${serviceId}: ${engine} vs ${naive}`);
    if (!engine) continue;
    engineDecideMs += engineOne;
    naiveDecideMs += naiveOne;
    pairs.push([id, serviceId]);
  }
  if (pairs.length === 0) throw new Error('no identity may create a session: the generated data set is too sparse');
  // one API session per sampled identity, written beside the data (logins are the auth bench's)
  const nowIso = new Date().toISOString();
  const tokens = pairs.map(() => uuid());
  const sessionRows = await store.applyGroup(
    pairs.map(([identityId], k): Command => apiSessionCommand(`bench-as-${k}`, tokens[k]!, identityId, nowIso)),
    { sync: true },
  );
  if (sessionRows.some((r) => !r.ok)) throw new Error('bench API sessions rejected');

  // the service policy enforcer: a Dial session on a hot-policy service for every warm identity (granted by the
  // moved hot policy, which now names #warm), then the policy moved back to #hot: every one of them loses access
  const hotService = [
    ...store.derived.get<RoleIndex>(roleIndexName('service-policies', 'serviceRoles')).targetsOf(hot.id),
  ][0]!;
  const enforced = Array.from({ length: HOT }, (_, k) => ({ k, identityId: `i${pad(HOT + k)}` }));
  for (let i = 0; i < enforced.length; i += 1_000) {
    const made = await store.applyGroup(
      enforced.slice(i, i + 1_000).flatMap(({ k, identityId }): Command[] => [
        apiSessionCommand(`enf-as-${k}`, uuid(), identityId, nowIso),
        {
          op: 'create',
          entity: 'sessions',
          id: `enf-s-${k}`,
          data: {
            token: uuid(),
            apiSessionId: `enf-as-${k}`,
            identityId,
            serviceId: hotService,
            type: 'Dial',
            tags: {},
          },
          at: nowIso,
        },
      ]),
      { sync: false },
    );
    if (made.some((r) => !r.ok)) throw new Error('bench sessions rejected');
  }
  const enforcerSvc = {
    store,
    get: (e: EntityName, id: string) => store.get(e, id),
    cluster: null,
    nowIso: () => nowIso,
    log: () => {},
    write: async (cmd: Command) => {
      const [r] = await store.applyGroup([cmd], { sync: false });
      if (!r!.ok) throw new Error(`enforcer write refused: ${r!.error.reason}`);
      return r!.value;
    },
  } as unknown as Services;
  const enforcer = new SessionEnforcer(enforcerSvc);
  const policyBefore = store.get('service-policies', hot.id)!;
  const back = await store.applyGroup(
    [{ op: 'update', entity: 'service-policies', id: hot.id, set: { identityRoles: ['#hot'] }, at: AT }],
    { sync: false },
  );
  if (!back[0]!.ok) throw new Error('policy change failed');
  t0 = process.hrtime.bigint();
  enforcer.onPublish([
    { entity: 'service-policies', id: hot.id, before: policyBefore, after: store.get('service-policies', hot.id)! },
  ] as Change[]);
  await enforcer.settled();
  const enforceMs = ms(t0);
  const left = enforced.filter(({ k }) => store.get('sessions', `enf-s-${k}`) !== undefined).length;
  // naive: each of those sessions checked by evaluating every Dial policy against its identity and service
  t0 = process.hrtime.bigint();
  let naiveLost = 0;
  const service = store.get('services', hotService)!;
  for (const { identityId } of enforced) {
    const dial = naiveMatching(
      store,
      'service-policies',
      'identityRoles',
      store.get('identities', identityId)!,
      (p) => p.type === 'Dial',
    );
    if (!dial.some((p) => rolesMatch(parseRoles(p.serviceRoles, p.semantic), service.id, attrsOf(service))))
      naiveLost++;
  }
  const naiveEnforceMs = ms(t0);
  if (naiveLost !== HOT - left)
    throw new Error(`enforcer deleted ${HOT - left} sessions, the naive check finds ${naiveLost}`);
  // back to #warm, as the session create below expects
  const again = await store.applyGroup(
    [{ op: 'update', entity: 'service-policies', id: hot.id, set: { identityRoles: ['#warm'] }, at: AT }],
    { sync: false },
  );
  if (!again[0]!.ok) throw new Error('policy change failed');
  await enforcer.stop();
  await store.close();

  const ctl = await Controller.start(ctlOpts);
  const latencies: number[] = [];
  try {
    const url = `${ctl.baseUrl}/edge/client/v1/sessions`;
    const rounds = quick ? 4 : 5;
    for (let round = 0; round <= rounds; round++) {
      for (let k = 0; k < pairs.length; k++) {
        t0 = process.hrtime.bigint();
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'zt-session': tokens[k]! },
          body: JSON.stringify({ serviceId: pairs[k]![1], type: 'Dial' }),
        });
        const took = ms(t0);
        if (res.status !== 201) throw new Error(`POST /sessions: ${res.status} ${await res.text()}`);
        await res.arrayBuffer();
        if (round > 0) latencies.push(took); // round 0 warms up
      }
    }
  } finally {
    await ctl.stop();
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
  console.log(
    `  sessions that lost access (${HOT} sessions of the identities a policy change left): checked and ` +
      `${HOT - left} deleted in ${f(enforceMs)} ms (src/auth/session-enforcer.ts); naive check of the same sessions ` +
      `${f(naiveEnforceMs)} ms (no deletes): ${(naiveEnforceMs / enforceMs).toFixed(1)}x`,
  );
  console.log(
    `  session create (POST /sessions, synced write, ${latencies.length} requests over ${pairs.length} identities): ` +
      `p50 ${f(percentile(latencies, 0.5))} ms, p99 ${f(percentile(latencies, 0.99))} ms; the decision alone: engine ` +
      `${f(engineDecideMs / pairs.length)} ms vs naive ${f(naiveDecideMs / pairs.length)} ms: ` +
      `${(naiveDecideMs / engineDecideMs).toFixed(0)}x`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
