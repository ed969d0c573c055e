/**
 * The generated data of the access and startup benchmarks (seeded: the same rows on every run): `identities`
 * identities with 3 of 1 000 role attributes (the first `hot` also `hot`, the next `hot` `warm`), services with 2 of
 * 200 attributes, edge routers with 2 of 50 attributes, policies: 60 % service policies (Dial/Bind, 1–2 `#attr` per
 * side, AllOf/AnyOf, 1 % `#all` on the service side), 25 % edge router policies, 15 % service edge router policies;
 * and the service policy `hot-policy` (`#hot` identities may dial `#s1`, `#s2`). Ids `i0000001`, `s…`, `r…`, `p…`.
 */
import type { EntityName } from '../src/model/index.js';
import type { Command } from '../src/model/rows.js';
import type { Store } from '../storage/store.js';

export interface DataSizes {
  identities: number;
  services: number;
  routers: number;
  policies: number;
}

/**
 * The sizes `--identities`, `--services`, `--routers`, `--policies` ask for (benchOptions' `opt`); by default
 * 100 000 / 10 000 / 1 000 / 2 000, a fifth of that with `--quick`.
 */
export function dataSizes(opt: (name: string, dflt: number) => number, quick: boolean): DataSizes {
  return {
    identities: opt('--identities', quick ? 20_000 : 100_000),
    services: opt('--services', quick ? 2_000 : 10_000),
    routers: opt('--routers', quick ? 200 : 1_000),
    policies: opt('--policies', quick ? 400 : 2_000),
  };
}

export const AT = '2026-01-01T00:00:00.000Z';
export const pad = (i: number) => String(i).padStart(7, '0');

/** A seeded generator of numbers in [0, 1). */
export function seeded(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s / 0x80000000;
  };
}

/** How many identities are `hot` (and how many `warm`). */
export const hotCount = (sizes: DataSizes) => Math.min(10_000, Math.floor(sizes.identities / 4));

/** The create commands of the data (the identity type `Default` and the auth policy `default` exist already). */
export function* benchCommands(sizes: DataSizes, random = seeded(7)): Generator<Command> {
  const pick = (prefix: string, n: number) => `${prefix}${Math.floor(random() * n)}`;
  const roles = (prefix: string, n: number) => [
    `#${pick(prefix, n)}`,
    ...(random() < 0.5 ? [`#${pick(prefix, n)}`] : []),
  ];
  const semantic = () => (random() < 0.5 ? 'AllOf' : 'AnyOf');
  const create = (entity: EntityName, id: string, data: Record<string, unknown>): Command => ({
    op: 'create',
    entity,
    id,
    data,
    at: AT,
  });
  const hot = hotCount(sizes);
  for (let i = 0; i < sizes.identities; i++) {
    const extra = i < hot ? ['hot'] : i < 2 * hot ? ['warm'] : [];
    const attrs = [...new Set([pick('a', 1000), pick('a', 1000), pick('a', 1000)]), ...extra];
    yield create('identities', `i${pad(i)}`, {
      name: `identity-${i}`,
      typeId: 'Default',
      authPolicyId: 'default',
      roleAttributes: attrs,
    });
  }
  for (let i = 0; i < sizes.services; i++) {
    const attrs = [...new Set([pick('s', 200), pick('s', 200)])];
    yield create('services', `s${pad(i)}`, { name: `service-${i}`, roleAttributes: attrs, encryptionRequired: true });
  }
  for (let i = 0; i < sizes.routers; i++) {
    const attrs = [...new Set([pick('r', 50), pick('r', 50)])];
    yield create('edge-routers', `r${pad(i)}`, { name: `router-${i}`, roleAttributes: attrs });
  }
  for (let i = 0; i < sizes.policies; i++) {
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

/** Applies `cmds` to `store` in groups of 4 000 (unsynced batches); throws on the first refused command. */
export async function applyAll(store: Store, cmds: Iterable<Command>): Promise<void> {
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
