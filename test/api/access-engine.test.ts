/**
 * The policy engine (src/model/access.ts on the role indexes of the policy declarations) against a from-scratch
 * evaluation of every policy, on Keel's real schema and store: random identities, services, edge routers and the
 * three policy types, then random changes on every side (attributes, roles, semantics, types, deletes, with
 * failing commands in the groups), compared after every group and after a reload.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import type { Services } from '../../src/api/services.js';
import { identityEdgeRouters, serviceAccessOf, serviceEdgeRouters } from '../../src/model/access.js';
import type { EntityName } from '../../src/model/index.js';
import { buildSchema } from '../../src/model/index.js';
import type { Command } from '../../src/model/rows.js';
import { parseRoles, rolesMatch } from '../../storage/role-index.js';
import { Store } from '../../storage/store.js';
import type { Row } from '../../storage/types.js';
import { rng } from '../support/rng.js';

const AT = '2026-01-01T00:00:00.000Z';
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const attrsOf = (r: Row) => new Set((r.roleAttributes as string[] | undefined) ?? []);

/** Every policy of `policies` whose `near` roles match `row`, then the rows of `far` their `farRoles` match. */
function naive(store: Store, policies: string, near: string, farRoles: string, far: string, row: Row): Set<string> {
  const out = new Set<string>();
  const farRows = [...store.collection(far).scan()];
  for (const p of store.collection(policies).scan()) {
    if (!rolesMatch(parseRoles(p[near], p.semantic), row.id, attrsOf(row))) continue;
    const roles = parseRoles(p[farRoles], p.semantic);
    for (const f of farRows) if (rolesMatch(roles, f.id, attrsOf(f))) out.add(f.id);
  }
  return out;
}

function naiveDial(store: Store, identity: Row): Set<string> {
  const out = new Set<string>();
  const services = [...store.collection('services').scan()];
  for (const p of store.collection('service-policies').scan()) {
    if (p.type !== 'Dial' || !rolesMatch(parseRoles(p.identityRoles, p.semantic), identity.id, attrsOf(identity))) {
      continue;
    }
    const roles = parseRoles(p.serviceRoles, p.semantic);
    for (const s of services) if (rolesMatch(roles, s.id, attrsOf(s))) out.add(s.id);
  }
  return out;
}

function expectEngineMatchesNaive(store: Store): void {
  const svc = { store, get: (e: string, id: string) => store.get(e, id) } as unknown as Services;
  for (const identity of store.collection('identities').scan()) {
    const access = serviceAccessOf(svc, identity.id);
    const label = `identity ${identity.id}`;
    expect(new Set(access.keys()), label).toEqual(
      naive(store, 'service-policies', 'identityRoles', 'serviceRoles', 'services', identity),
    );
    const dial = new Set([...access].filter(([, a]) => a.dial.length > 0).map(([id]) => id));
    expect(dial, `${label} dial`).toEqual(naiveDial(store, identity));
    expect(identityEdgeRouters(svc, identity.id), `${label} routers`).toEqual(
      naive(store, 'edge-router-policies', 'identityRoles', 'edgeRouterRoles', 'edge-routers', identity),
    );
  }
  for (const service of store.collection('services').scan()) {
    expect(serviceEdgeRouters(svc, service.id), `service ${service.id} routers`).toEqual(
      naive(store, 'service-edge-router-policies', 'serviceRoles', 'edgeRouterRoles', 'edge-routers', service),
    );
  }
}

it('equals a from-scratch evaluation after every random group of changes, and after a reload', async () => {
  const random = rng(9);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const ATTRS = ['a', 'b', 'c', 'd', 'e'];
  const someAttrs = () => ATTRS.filter(() => random() < 0.35);
  const ids = { identities: ['i0', 'i1', 'i2', 'i3', 'i4', 'i5'], services: ['s0', 's1', 's2', 's3'] } as const;
  const routers = ['r0', 'r1', 'r2', 'r3'];
  const roleList = (targets: readonly string[]) => {
    const r = random();
    if (r < 0.1) return ['#all'];
    const roles = someAttrs().map((a) => `#${a}`);
    if (r > 0.7) roles.push(`@${pick(targets)}`);
    return roles;
  };
  const semantic = () => (random() < 0.5 ? 'AllOf' : 'AnyOf');
  const targetsOf: Record<string, readonly string[]> = {
    identityRoles: ids.identities,
    serviceRoles: ids.services,
    edgeRouterRoles: routers,
  };
  const dir = mkdtempSync(join(tmpdir(), 'keel-access-engine-'));
  dirs.push(dir);
  const schema = buildSchema();
  let store = await Store.open(dir, schema);
  const c = (entity: EntityName, id: string, data: Record<string, unknown>): Command => ({
    op: 'create',
    entity,
    id,
    data,
    at: AT,
  });
  const setup: Command[] = [
    c('identity-types', 'Default', { name: 'Default' }),
    c('auth-policies', 'default', { name: 'Default' }),
    ...ids.identities.map((id) =>
      c('identities', id, { name: id, typeId: 'Default', authPolicyId: 'default', roleAttributes: someAttrs() }),
    ),
    ...ids.services.map((id) => c('services', id, { name: id, roleAttributes: someAttrs() })),
    ...routers.map((id) => c('edge-routers', id, { name: id, roleAttributes: someAttrs() })),
  ];
  expect((await store.applyGroup(setup, { sync: false })).every((r) => r.ok)).toBe(true);

  const policy = (k: number): Command => {
    const kind = k % 3;
    const id = `p${k}`;
    if (kind === 0) {
      return c('service-policies', id, {
        name: id,
        type: random() < 0.5 ? 'Dial' : 'Bind',
        semantic: semantic(),
        identityRoles: roleList(ids.identities),
        serviceRoles: roleList(ids.services),
      });
    }
    if (kind === 1) {
      return c('edge-router-policies', id, {
        name: id,
        semantic: semantic(),
        identityRoles: roleList(ids.identities),
        edgeRouterRoles: roleList(routers),
      });
    }
    return c('service-edge-router-policies', id, {
      name: id,
      semantic: semantic(),
      serviceRoles: roleList(ids.services),
      edgeRouterRoles: roleList(routers),
    });
  };
  const policyEntity = ['service-policies', 'edge-router-policies', 'service-edge-router-policies'] as const;
  let next = 0;
  let failures = 0;
  for (let step = 0; step < 120; step++) {
    const group: Command[] = [];
    for (let k = 0; k < 1 + Math.floor(random() * 4); k++) {
      const r = random();
      if (r < 0.3) group.push(policy(next++));
      else if (r < 0.5 && next > 0) {
        const n = Math.floor(random() * next);
        const entity = policyEntity[n % 3]!;
        const field = pick(n % 3 === 1 ? ['identityRoles', 'edgeRouterRoles'] : ['serviceRoles', 'edgeRouterRoles']);
        const set: Record<string, unknown> =
          random() < 0.3 ? { semantic: semantic() } : { [field]: roleList(targetsOf[field]!) };
        if (n % 3 === 0 && random() < 0.3) set.type = random() < 0.5 ? 'Dial' : 'Bind';
        group.push({ op: 'update', entity, id: `p${n}`, set, at: AT });
      } else if (r < 0.6 && next > 0) {
        const n = Math.floor(random() * next);
        group.push({ op: 'delete', entity: policyEntity[n % 3]!, id: `p${n}`, at: AT, ifExists: true });
      } else {
        const entity = pick(['identities', 'services', 'edge-routers'] as const);
        const pool = entity === 'identities' ? ids.identities : entity === 'services' ? ids.services : routers;
        group.push({ op: 'update', entity, id: pick(pool), set: { roleAttributes: someAttrs() }, at: AT });
      }
    }
    // a command that fails (an @id that does not exist) must leave no trace in the indexes
    if (random() < 0.2) {
      group.push(
        c('service-policies', `bad${step}`, {
          name: `bad${step}`,
          type: 'Dial',
          semantic: 'AllOf',
          identityRoles: ['@nope'],
        }),
      );
    }
    const results = await store.applyGroup(group, { sync: false });
    failures += results.filter((x) => !x.ok).length;
    expect(store.failed).toBeNull();
    expectEngineMatchesNaive(store);
  }
  expect(failures).toBeGreaterThan(0);
  await store.close();
  store = await Store.open(dir, schema);
  expectEngineMatchesNaive(store);
  await store.close();
});
