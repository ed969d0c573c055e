/**
 * A policy naming an attribute that no entity holds (the common case right after the policy is written) matches
 * nothing and leaves the store working; the entity that takes the attribute later is matched.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { RoleIndex } from '../../storage/role-index.js';
import { Schema } from '../../storage/schema.js';
import { Store } from '../../storage/store.js';
import type { Command } from '../../storage/types.js';

const schema = () =>
  new Schema(
    [
      { name: 'people', type: 'person', fields: { attrs: { type: 'string', set: true, index: true } } },
      {
        name: 'policies',
        type: 'policy',
        fields: { roles: { type: 'string', set: true }, semantic: { type: 'string' } },
      },
    ],
    {},
    [
      () =>
        new RoleIndex({
          name: 'policies.people',
          policy: { entity: 'policies', rolesField: 'roles', semanticField: 'semantic' },
          target: { entity: 'people', attributesField: 'attrs' },
        }),
    ],
  );
const AT = '2026-01-01T00:00:00.000Z';
let dir = '';
afterEach(() => rmSync(dir, { recursive: true, force: true }));

it('AllOf and AnyOf policies naming absent attributes match nothing, then match who takes them', async () => {
  dir = mkdtempSync(join(tmpdir(), 'keel-roles-absent-'));
  const store = await Store.open(dir, schema());
  const write = async (cmds: Command[]) => {
    const results = await store.applyGroup(cmds, { sync: false });
    expect(results.every((r) => r.ok)).toBe(true);
  };
  await write([
    { op: 'create', entity: 'people', id: 'p1', data: { attrs: ['a'] }, at: AT },
    { op: 'create', entity: 'policies', id: 'all-of', data: { roles: ['#a', '#nobody'], semantic: 'AllOf' }, at: AT },
    { op: 'create', entity: 'policies', id: 'any-of', data: { roles: ['#nobody'], semantic: 'AnyOf' }, at: AT },
  ]);
  const idx = store.derived.get<RoleIndex>('policies.people');
  expect(store.failed).toBeNull();
  expect([...idx.targetsOf('all-of')]).toEqual([]);
  expect([...idx.targetsOf('any-of')]).toEqual([]);
  await write([{ op: 'update', entity: 'people', id: 'p1', set: { attrs: ['a', 'nobody'] }, at: AT }]);
  expect([...idx.policiesOf('p1')].sort()).toEqual(['all-of', 'any-of']);
  await store.close();
  const reopened = await Store.open(dir, schema());
  expect([...reopened.derived.get<RoleIndex>('policies.people').policiesOf('p1')].sort()).toEqual(['all-of', 'any-of']);
  await reopened.close();
});
