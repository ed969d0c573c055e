/**
 * `npm run bench -- policy [--quick] [--identities N] [--policies N]`: the derived role index (storage/role-index.ts)
 * maintained incrementally, against naive evaluation of the same changes on the same generated data.
 *
 * Data: N identities with 3 of 1 000 role attributes each (10 000 of them also hold `hot`, another 10 000 `warm`),
 * P policies naming 1–2 attributes (AllOf/AnyOf), 1 % `#all`, 5 % an `@id`. Measured:
 * - build: the index computed from scratch (what a load does);
 * - identity change: one identity's attributes replaced (incremental: the policies naming its old or new attributes
 *   or `#all`; naive: every policy evaluated against it);
 * - policy change: a policy moved from `#hot` to `#warm` (10 000 identities leave, 10 000 join; incremental: from the
 *   attribute index; naive: the policy evaluated against every identity).
 */
import { Collection } from '../storage/collection.js';
import type { Change, PublishedState } from '../storage/derived.js';
import { parseRoles, RoleIndex, rolesMatch } from '../storage/role-index.js';
import type { EntityDef, Row } from '../storage/types.js';
import { benchOptions } from './options.js';

const { quick, opt } = benchOptions(process.argv.slice(2));
const N = opt('--identities', quick ? 20_000 : 100_000);
const P = opt('--policies', quick ? 500 : 2_000);
const HOT = Math.min(10_000, Math.floor(N / 4));
const CHANGES = quick ? 200 : 1_000;

const identityDef: EntityDef = {
  name: 'identities',
  type: 'identity',
  fields: { roleAttributes: { type: 'string', set: true, index: true } },
};
const policyDef: EntityDef = {
  name: 'service-policies',
  type: 'servicePolicy',
  fields: { identityRoles: { type: 'string', set: true }, semantic: { type: 'string' } },
};
const collections = new Map([
  ['identities', new Collection(identityDef)],
  ['service-policies', new Collection(policyDef)],
]);
const state: PublishedState = { collection: (e) => collections.get(e)! };
const identities = collections.get('identities')!;
const policies = collections.get('service-policies')!;

let seed = 42;
const random = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed / 0x80000000;
};
const attr = () => `a${Math.floor(random() * 1000)}`;
const AT = '2026-01-01T00:00:00.000Z';
const row = (id: string, data: Record<string, unknown>): Row => ({
  id,
  createdAt: AT,
  updatedAt: AT,
  tags: {},
  ...data,
});
const pad = (i: number) => String(i).padStart(7, '0');

for (let i = 0; i < N; i++) {
  const extra = i < HOT ? ['hot'] : i < 2 * HOT ? ['warm'] : [];
  identities.put(row(`i${pad(i)}`, { roleAttributes: [attr(), attr(), attr(), ...extra] }));
}
for (let i = 0; i < P; i++) {
  const r = random();
  const roles = r < 0.01 ? ['#all'] : [`#${attr()}`, ...(random() < 0.5 ? [`#${attr()}`] : [])];
  if (r > 0.95) roles.push(`@i${pad(Math.floor(random() * N))}`);
  policies.put(row(`p${pad(i)}`, { identityRoles: roles, semantic: random() < 0.5 ? 'AllOf' : 'AnyOf' }));
}
policies.put(row('hot-policy', { identityRoles: ['#hot'], semantic: 'AnyOf' }));

const index = new RoleIndex({
  name: 'bench',
  policy: { entity: 'service-policies', rolesField: 'identityRoles', semanticField: 'semantic' },
  target: { entity: 'identities', attributesField: 'roleAttributes' },
});
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

global.gc?.();
const heap0 = process.memoryUsage().heapUsed;
let t0 = process.hrtime.bigint();
index.rebuild(state);
const buildMs = ms(t0);
global.gc?.();
const heapMiB = (process.memoryUsage().heapUsed - heap0) / 2 ** 20;

/** Naive: every policy evaluated against one identity. */
function naiveIdentity(r: Row): number {
  const attrs = new Set(r.roleAttributes as string[]);
  let n = 0;
  for (const p of policies.scan()) if (rolesMatch(parseRoles(p.identityRoles, p.semantic), r.id, attrs)) n++;
  return n;
}
/** Naive: one policy evaluated against every identity. */
function naivePolicy(p: Row): number {
  const parsed = parseRoles(p.identityRoles, p.semantic);
  let n = 0;
  for (const r of identities.scan()) if (rolesMatch(parsed, r.id, new Set(r.roleAttributes as string[]))) n++;
  return n;
}

function publish(c: Collection, entity: string, next: Row): Change {
  const before = c.get(next.id);
  c.put(next);
  return { entity, id: next.id, before, after: next };
}

let incMs = 0;
let naiveMs = 0;
const evals0 = index.evaluations;
for (let k = 0; k < CHANGES; k++) {
  const id = `i${pad(2 * HOT + Math.floor(random() * (N - 2 * HOT)))}`;
  const next = row(id, { roleAttributes: [attr(), attr(), attr()] });
  const change = publish(identities, 'identities', next);
  t0 = process.hrtime.bigint();
  index.update([change], state);
  incMs += ms(t0);
  t0 = process.hrtime.bigint();
  naiveIdentity(next);
  naiveMs += ms(t0);
}
const evalsPerChange = (index.evaluations - evals0) / CHANGES;

const moved = row('hot-policy', { identityRoles: ['#warm'], semantic: 'AnyOf' });
const policyChange = publish(policies, 'service-policies', moved);
t0 = process.hrtime.bigint();
index.update([policyChange], state);
const policyIncMs = ms(t0);
if (index.targetsOf('hot-policy').size !== HOT) throw new Error('hot policy did not move to the warm identities');
t0 = process.hrtime.bigint();
naivePolicy(moved);
const policyNaiveMs = ms(t0);

const f = (x: number) => x.toFixed(3);
console.log(`role index: ${N} identities, ${P + 1} policies, ${index.pairCount} matching pairs`);
console.log(
  `  build from scratch: ${buildMs.toFixed(0)} ms, heap +${heapMiB.toFixed(1)} MiB${global.gc ? '' : ' (run node with --expose-gc for a steadier figure)'}`,
);
console.log(
  `  identity attribute change: incremental ${f(incMs / CHANGES)} ms (${evalsPerChange.toFixed(1)} policies evaluated)` +
    ` vs naive ${f(naiveMs / CHANGES)} ms (${P + 1} evaluated): ${(naiveMs / incMs).toFixed(1)}x`,
);
console.log(
  `  policy change moving ${HOT} + ${HOT} identities: incremental ${f(policyIncMs)} ms vs naive ${f(policyNaiveMs)} ms: ` +
    `${(policyNaiveMs / policyIncMs).toFixed(1)}x`,
);
