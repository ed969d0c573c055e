import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseRoles, RoleIndex, rolesMatch } from '../../storage/role-index.js';
import { Schema } from '../../storage/schema.js';
import { Store } from '../../storage/store.js';
import type { Command, EntityDef } from '../../storage/types.js';
import { rng } from '../support/rng.js';

const defs: EntityDef[] = [
  { name: 'people', type: 'person', fields: { attrs: { type: 'string', set: true, index: true } } },
  {
    name: 'policies',
    type: 'policy',
    fields: { roles: { type: 'string', set: true }, semantic: { type: 'string' } },
  },
];
const INDEX = 'policies.people';
const schema = () =>
  new Schema(defs, {}, [
    () =>
      new RoleIndex({
        name: INDEX,
        policy: { entity: 'policies', rolesField: 'roles', semanticField: 'semantic' },
        target: { entity: 'people', attributesField: 'attrs' },
      }),
  ]);

const AT = '2026-01-01T00:00:00.000Z';
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
async function open(dir?: string): Promise<{ store: Store; dir: string }> {
  const d = dir ?? mkdtempSync(join(tmpdir(), 'keel-roles-'));
  if (!dir) dirs.push(d);
  return { store: await Store.open(d, schema()), dir: d };
}
const idx = (store: Store) => store.derived.get<RoleIndex>(INDEX);

/** The index recomputed naively: every policy evaluated against every person. */
function expectMatchesRecompute(store: Store): void {
  const people = [...store.collection('people').scan()];
  const index = idx(store);
  const reverse = new Map<string, string[]>();
  for (const p of store.collection('policies').scan()) {
    const parsed = parseRoles(p.roles, p.semantic);
    const want = people.filter((x) => rolesMatch(parsed, x.id, new Set((x.attrs as string[]) ?? []))).map((x) => x.id);
    expect([...index.targetsOf(p.id)].sort(), `policy ${p.id}`).toEqual(want.sort());
    for (const id of want) reverse.set(id, [...(reverse.get(id) ?? []), p.id]);
  }
  for (const x of people) {
    expect([...index.policiesOf(x.id)].sort(), `person ${x.id}`).toEqual((reverse.get(x.id) ?? []).sort());
  }
}

describe('role index (derived): policy roles × role attributes', () => {
  it('follows OpenZiti matching: @id, #all, AllOf, AnyOf', async () => {
    const { store } = await open();
    const c = (entity: string, id: string, data: Record<string, unknown>): Command => ({
      op: 'create',
      entity,
      id,
      data,
      at: AT,
    });
    await store.applyGroup(
      [
        c('people', 'a', { attrs: ['x', 'y'] }),
        c('people', 'b', { attrs: ['x'] }),
        c('people', 'c', { attrs: [] }),
        c('policies', 'allOf', { roles: ['#x', '#y'], semantic: 'AllOf' }),
        c('policies', 'anyOf', { roles: ['#x', '#y'], semantic: 'AnyOf' }),
        c('policies', 'all', { roles: ['#all'], semantic: 'AllOf' }),
        c('policies', 'byId', { roles: ['@c', '#nothing'], semantic: 'AllOf' }),
        c('policies', 'noSemantic', { roles: ['#x'] }),
      ],
      { sync: false },
    );
    const i = idx(store);
    expect([...i.targetsOf('allOf')].sort()).toEqual(['a']);
    expect([...i.targetsOf('anyOf')].sort()).toEqual(['a', 'b']);
    expect([...i.targetsOf('all')].sort()).toEqual(['a', 'b', 'c']);
    expect([...i.targetsOf('byId')].sort()).toEqual(['c']);
    expect([...i.targetsOf('noSemantic')].sort()).toEqual(['a', 'b']);
    expect([...i.policiesOf('b')].sort()).toEqual(['all', 'anyOf', 'noSemantic']);
    // an attribute change moves the person in and out
    await store.applyGroup([{ op: 'update', entity: 'people', id: 'b', set: { attrs: ['y', 'x'] }, at: AT }], {
      sync: false,
    });
    expect([...i.targetsOf('allOf')].sort()).toEqual(['a', 'b']);
    await store.applyGroup([{ op: 'delete', entity: 'people', id: 'a', at: AT }], { sync: false });
    expect([...i.targetsOf('allOf')]).toEqual(['b']);
    expect(i.policiesOf('a').size).toBe(0);
    await store.close();
  });

  it('a role attribute change re-evaluates only the policies naming its old or new attributes, or #all', async () => {
    const { store } = await open();
    const cmds: Command[] = [{ op: 'create', entity: 'people', id: 'p', data: { attrs: ['a0'] }, at: AT }];
    for (let i = 0; i < 2000; i++) {
      cmds.push({ op: 'create', entity: 'policies', id: `pol${i}`, data: { roles: [`#a${i}`] }, at: AT });
    }
    cmds.push({ op: 'create', entity: 'policies', id: 'everyone', data: { roles: ['#all'] }, at: AT });
    await store.applyGroup(cmds, { sync: false });
    const i = idx(store);
    const before = i.evaluations;
    await store.applyGroup([{ op: 'update', entity: 'people', id: 'p', set: { attrs: ['a7'] }, at: AT }], {
      sync: false,
    });
    expect(i.evaluations - before).toBe(3); // pol0 (old), pol7 (new), everyone (#all)
    expect([...i.policiesOf('p')].sort()).toEqual(['everyone', 'pol7']);
    await store.close();
  });

  it('incremental maintenance equals a full recomputation after every random step, and after reload', async () => {
    const { store, dir } = await open();
    const random = rng(20261126);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const ATTRS = ['a', 'b', 'c', 'd', 'e', 'f'];
    const PEOPLE = Array.from({ length: 30 }, (_, i) => `p${i}`);
    const POLICIES = Array.from({ length: 12 }, (_, i) => `q${i}`);
    const attrs = () => ATTRS.filter(() => random() < 0.3);
    const roles = () => {
      const r = random();
      if (r < 0.08) return ['#all'];
      const out = attrs().map((a) => `#${a}`);
      if (random() < 0.3) out.push(`@${pick(PEOPLE)}`);
      if (random() < 0.05) out.push('junk');
      return out;
    };
    const step = (): Command => {
      const onPolicy = random() < 0.4;
      const entity = onPolicy ? 'policies' : 'people';
      const id = onPolicy ? pick(POLICIES) : pick(PEOPLE);
      const exists = !!store.get(entity, id);
      const r = random();
      if (exists && r < 0.2) return { op: 'delete', entity, id, at: AT };
      const data = onPolicy
        ? { roles: roles(), semantic: random() < 0.5 ? 'AllOf' : random() < 0.5 ? 'AnyOf' : undefined }
        : { attrs: attrs() };
      // sometimes a command that fails (update of a missing row): it must leave the index alone
      if (!exists && r < 0.1) return { op: 'update', entity, id, set: data, at: AT };
      return exists ? { op: 'update', entity, id, set: data, at: AT } : { op: 'create', entity, id, data, at: AT };
    };
    for (let n = 0; n < 400; n++) {
      const group = Array.from({ length: 1 + Math.floor(random() * 4) }, step);
      // each step's commands: a group (the same row may change twice, or change and be deleted)
      await store.applyGroup(group, { sync: false });
      expectMatchesRecompute(store);
    }
    expect(idx(store).pairCount).toBeGreaterThan(0);
    await store.close();
    const reopened = await open(dir);
    expectMatchesRecompute(reopened.store);
    await reopened.store.close();
  });
});
