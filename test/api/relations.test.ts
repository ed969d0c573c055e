import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../http/errors.js';
import type { HttpRequest } from '../../http/types.js';
import { defineEntity, type Entity } from '../../src/api/entity.js';
import type { OpDef } from '../../src/api/op.js';
import { Services } from '../../src/api/services.js';
import type { Command as KeelCommand, Store as KeelStore } from '../../src/model/rows.js';
import { s } from '../../src/schema/s.js';
import { LocalProposer } from '../../storage/local-proposer.js';
import { RoleIndex } from '../../storage/role-index.js';
import { Schema } from '../../storage/schema.js';
import { Store } from '../../storage/store.js';
import type { Command as AnyCommand } from '../../storage/types.js';

// Test declarations: people with role attributes, their keys (a stored reference), and groups whose roles match
// people (a derived index). Each declares its association lists; the machinery serves them.
const people = defineEntity({
  name: 'people',
  type: 'person',
  tag: 'Person',
  singular: 'Person',
  plural: 'People',
  roleAttributesField: 'roleAttributes',
  fields: {
    name: { type: 'string', unique: true, api: true },
    roleAttributes: { type: 'string', set: true, index: true, api: true, default: [] },
  },
  detail: s.named('personDetail', s.obj({ name: s.str() })),
  relations: [
    { path: 'keys', listed: () => keys, via: { ref: 'personId' }, operationId: 'listPersonKeys' },
    {
      path: 'groups',
      listed: (): Entity<string> => groups,
      via: { index: 'groups.people', side: 'policies' },
      operationId: 'listPersonGroups',
    },
  ],
});
const keys = defineEntity({
  name: 'keys',
  type: 'key',
  tag: 'Key',
  singular: 'Key',
  plural: 'Keys',
  fields: {
    name: { type: 'string', api: true },
    personId: { type: 'string', ref: { entity: 'people', onDelete: 'cascade' }, api: true },
  },
  detail: s.named('keyDetail', s.obj({ name: s.str() })),
});
const groups = defineEntity({
  name: 'groups',
  type: 'group',
  tag: 'Group',
  singular: 'Group',
  plural: 'Groups',
  fields: {
    name: { type: 'string', api: true },
    roles: { type: 'string', set: true, api: true },
    semantic: { type: 'string', api: true },
  },
  detail: s.named('groupDetail', s.obj({ name: s.str() })),
  relations: [
    {
      path: 'people',
      listed: (): Entity<string> => people,
      via: { index: 'groups.people', side: 'targets' },
      operationId: 'listGroupPeople',
    },
  ],
});

const AT = '2026-01-01T00:00:00.000Z';
let dir: string;
let store: Store;
let svc: Services;
const ops = new Map<string, OpDef<unknown>>();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'keel-rel-'));
  const schema = new Schema([people.def, keys.def, groups.def], {}, [
    () =>
      new RoleIndex({
        name: 'groups.people',
        policy: { entity: 'groups', rolesField: 'roles', semanticField: 'semantic' },
        target: { entity: 'people', attributesField: 'roleAttributes' },
      }),
  ]);
  store = await Store.open(dir, schema);
  const proposer = new LocalProposer(store, { maxQueued: 100, sync: false });
  // the machinery under test is generic; Services is typed for Keel's own entities, these are the test's
  svc = new Services(store as unknown as KeelStore, proposer, {
    sessionTimeout_ms: 1,
    apiBaseUrls: [],
    instanceId: 'x',
    clustered: false,
  });
  for (const e of [people, keys, groups]) for (const o of e.ops()) ops.set(o.operationId!, o as OpDef<unknown>);
  const c = (entity: string, id: string, data: Record<string, unknown>) => ({
    op: 'create' as const,
    entity,
    id,
    data,
    at: AT,
  });
  await store.applyGroup(
    [
      c('people', 'ann', { name: 'ann', roleAttributes: ['eng', 'ops'] }),
      c('people', 'bob', { name: 'bob', roleAttributes: ['eng'] }),
      c('people', 'cat', { name: 'cat', roleAttributes: [] }),
      ...['k1', 'k2', 'k3'].map((k) => c('keys', k, { name: `key-${k}`, personId: 'ann' })),
      c('keys', 'k4', { name: 'key-k4', personId: 'bob' }),
      c('groups', 'engineers', { name: 'engineers', roles: ['#eng'], semantic: 'AllOf' }),
      c('groups', 'devops', { name: 'devops', roles: ['#eng', '#ops'], semantic: 'AllOf' }),
      c('groups', 'everyone', { name: 'everyone', roles: ['#all'], semantic: 'AllOf' }),
      c('groups', 'catOnly', { name: 'catOnly', roles: ['@cat'], semantic: 'AnyOf' }),
    ],
    { sync: false },
  );
});
afterAll(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

async function list(operationId: string, id: string, query = '') {
  const op = ops.get(operationId)!;
  const req = { query: new URLSearchParams(query), params: { id } } as unknown as HttpRequest;
  const res = await op.handler({ req, body: undefined, params: { id }, caller: null, svc, api: 'management' });
  const body = JSON.parse(String(res.body));
  return { ids: (body.data as { id: string }[]).map((r) => r.id), meta: body.meta };
}

describe('relations: association lists declared on the entity', () => {
  it('are served at /<entity>/{id}/<path> with the declared operation ids', () => {
    expect(ops.get('listPersonKeys')!.path).toBe('/people/{id}/keys');
    expect(ops.get('listGroupPeople')!.path).toBe('/groups/{id}/people');
    expect(ops.get('listPersonGroups')!.access).toBe('admin');
  });

  it('list a stored reference with filter, sort and paging', async () => {
    expect((await list('listPersonKeys', 'ann')).ids).toEqual(['k1', 'k2', 'k3']);
    expect((await list('listPersonKeys', 'bob')).ids).toEqual(['k4']);
    expect((await list('listPersonKeys', 'ann', 'filter=name="key-k2"')).ids).toEqual(['k2']);
    const page = await list('listPersonKeys', 'ann', 'sort=name desc&limit=2&offset=1');
    expect(page.ids).toEqual(['k2', 'k1']);
    expect(page.meta.pagination).toEqual({ limit: 2, offset: 1, totalCount: 3 });
  });

  it('list a derived index in both directions, following changes', async () => {
    expect((await list('listGroupPeople', 'devops')).ids).toEqual(['ann']);
    expect((await list('listGroupPeople', 'engineers', 'sort=name desc')).ids).toEqual(['bob', 'ann']);
    expect((await list('listGroupPeople', 'everyone', 'filter=name!="ann"')).ids).toEqual(['bob', 'cat']);
    expect((await list('listPersonGroups', 'cat')).ids).toEqual(['catOnly', 'everyone']);
    const update: AnyCommand = {
      op: 'update',
      entity: 'people',
      id: 'bob',
      set: { roleAttributes: ['ops', 'eng'] },
      at: AT,
    };
    await svc.write(update as KeelCommand);
    expect((await list('listGroupPeople', 'devops')).ids).toEqual(['ann', 'bob']);
    expect((await list('listPersonGroups', 'bob')).ids).toEqual(['devops', 'engineers', 'everyone']);
  });

  it('answer 404 for an unknown parent and 400 for a bad filter', async () => {
    await expect(list('listPersonKeys', 'nobody')).rejects.toSatisfy(
      (e: unknown) => e instanceof ApiError && e.status === 404,
    );
    await expect(list('listGroupPeople', 'devops', 'filter=nope=')).rejects.toSatisfy(
      (e: unknown) => e instanceof ApiError && e.status === 400,
    );
  });
});
