import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LocalProposer, OverloadedError } from '../../storage/local-proposer.js';
import { Schema } from '../../storage/schema.js';
import { SortedRows } from '../../storage/sorted-rows.js';
import { Store } from '../../storage/store.js';
import { type Command, type CommandResult, StoreFailedError } from '../../storage/types.js';
import { AT, create, defs } from '../support/store-defs.js';

const dirs: string[] = [];
function tempDir() {
  const d = mkdtempSync(join(tmpdir(), 'keel-store-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function open(dir = tempDir(), custom = {}) {
  return Store.open(dir, new Schema(defs, custom));
}
async function one(store: Store, cmd: Command): Promise<CommandResult> {
  return (await store.applyGroup([cmd], { sync: false }))[0]!;
}

describe('store: commands', () => {
  it('creates rows with base fields and indexes them', async () => {
    const s = await open();
    expect(await one(s, create('policies', 'p1', { name: 'P' }))).toEqual({ ok: true, value: 'p1' });
    await one(s, create('people', 'a', { name: 'Ann', policyId: 'p1', attrs: ['x', 'y'] }));
    expect(s.get('people', 'a')).toMatchObject({ id: 'a', name: 'Ann', createdAt: AT, updatedAt: AT, tags: {} });
    expect(s.lookup('people', 'attrs', 'y')).toEqual(['a']);
    expect(s.lookup('people', 'name', 'Ann')).toEqual(['a']);
    expect(s.lookup('people', 'policyId', 'p1')).toEqual(['a']);
    await s.close();
  });

  it('rejects duplicates, dangling references and unknown ids with recorded errors', async () => {
    const s = await open();
    await one(s, create('policies', 'p1', { name: 'P' }));
    expect(await one(s, create('policies', 'p1', { name: 'Q' }))).toMatchObject({
      ok: false,
      error: { code: 'ALREADY_EXISTS' },
    });
    expect(await one(s, create('policies', 'p2', { name: 'P' }))).toMatchObject({
      ok: false,
      error: {
        code: 'UNIQUE',
        field: 'name',
        value: 'P',
        reason: "duplicate value 'P' in unique index on policies store",
      },
    });
    expect(await one(s, create('people', 'a', { name: 'A', policyId: 'nope' }))).toMatchObject({
      ok: false,
      error: { code: 'REF_NOT_FOUND', field: 'policyId', value: 'nope' },
    });
    expect(await one(s, { op: 'update', entity: 'people', id: 'zz', set: { name: 'x' }, at: AT })).toMatchObject({
      ok: false,
      error: { code: 'NOT_FOUND', reason: 'person with id zz not found' },
    });
    expect(s.collection('people').size).toBe(0);
    await s.close();
  });

  it('updates move index entries and keep unique values free for reuse', async () => {
    const s = await open();
    await one(s, create('people', 'a', { name: 'Ann', attrs: ['x'] }));
    await one(s, {
      op: 'update',
      entity: 'people',
      id: 'a',
      set: { name: 'Anna', attrs: ['z'] },
      at: '2026-01-02T00:00:00.000Z',
    });
    expect(s.lookup('people', 'attrs', 'x')).toEqual([]);
    expect(s.lookup('people', 'attrs', 'z')).toEqual(['a']);
    expect(s.get('people', 'a')!.updatedAt).toBe('2026-01-02T00:00:00.000Z');
    expect(await one(s, create('people', 'b', { name: 'Ann' }))).toMatchObject({ ok: true });
    expect(await one(s, { op: 'update', entity: 'people', id: 'b', set: { name: 'Anna' }, at: AT })).toMatchObject({
      ok: false,
      error: { code: 'UNIQUE' },
    });
    await s.close();
  });

  it('builds rows with a fixed field order (the same stored bytes on every node and version)', async () => {
    const s = await open();
    await one(
      s,
      create('people', 'a', { tags: { t: 1 }, name: 'Ann', attrs: undefined, id: 'a', policyId: undefined }),
    );
    const row = s.get('people', 'a')!;
    // the data's fields in their order (undefined ones left out, base fields in place), then the base fields
    expect(Object.keys(row)).toEqual(['tags', 'name', 'id', 'createdAt', 'updatedAt']);
    expect(row).toEqual({ tags: { t: 1 }, name: 'Ann', id: 'a', createdAt: AT, updatedAt: AT });
    const at = '2026-01-02T00:00:00.000Z';
    await one(s, { op: 'update', entity: 'people', id: 'a', set: { attrs: ['x'], tags: undefined, name: 'A' }, at });
    const next = s.get('people', 'a')!;
    // an update keeps the row's order, drops fields set to undefined (tags then default to {}) and appends new ones
    expect(Object.keys(next)).toEqual(['name', 'id', 'createdAt', 'updatedAt', 'attrs', 'tags']);
    expect(next).toEqual({ name: 'A', id: 'a', createdAt: AT, updatedAt: at, attrs: ['x'], tags: {} });
    expect(Object.getPrototypeOf(next)).toBe(Object.prototype);
    await s.close();
  });

  it('restricts, cascades (transitively) and clears on delete', async () => {
    const s = await open();
    await one(s, create('policies', 'p1', { name: 'P' }));
    await one(s, create('people', 'a', { name: 'A', policyId: 'p1' }));
    await one(s, create('people', 'b', { name: 'B', friendIds: ['a'] }));
    await one(s, create('keys', 'k1', { personId: 'a' }));
    await one(s, create('tokens', 't1', { keyId: 'k1' }));
    expect(await one(s, { op: 'delete', entity: 'policies', id: 'p1', at: AT })).toMatchObject({
      ok: false,
      error: { code: 'REFERENCED', reason: 'cannot delete policy p1, referenced by person [a]' },
    });
    expect(s.get('policies', 'p1')).toBeDefined();
    expect(await one(s, { op: 'delete', entity: 'people', id: 'a', at: AT })).toMatchObject({ ok: true });
    expect(s.get('keys', 'k1')).toBeUndefined();
    expect(s.get('tokens', 't1')).toBeUndefined();
    expect(s.get('people', 'b')!.friendIds).toEqual([]);
    expect(await one(s, { op: 'delete', entity: 'policies', id: 'p1', at: AT })).toMatchObject({ ok: true });
    await s.close();
  });

  it('stamps move with the collections a group changes, cascades included', async () => {
    const s = await open();
    const stamps = () => ['policies', 'people', 'keys'].map((c) => s.stampOf([c]));
    await one(s, create('policies', 'p1', { name: 'P' }));
    expect(stamps()).toEqual([1, 0, 0]);
    await one(s, create('people', 'a', { name: 'A', policyId: 'p1' }));
    await one(s, create('keys', 'k1', { personId: 'a' }));
    expect(stamps()).toEqual([1, 1, 1]);
    // a failed command changes nothing
    expect((await one(s, create('keys', 'k2', { personId: 'nobody' }))).ok).toBe(false);
    expect(stamps()).toEqual([1, 1, 1]);
    // the delete of a person deletes its keys: both collections move
    await one(s, { op: 'delete', entity: 'people', id: 'a', at: AT });
    expect(stamps()).toEqual([1, 2, 2]);
    expect(s.stampOf(['policies', 'people', 'keys'])).toBe(5);
    s.invalidateAll();
    expect(stamps()).toEqual([2, 3, 3]);
    expect(s.stampOf([])).toBe(1);
    expect(() => s.stampOf(['nothing'])).toThrow(/unknown collection/);
    await s.close();
  });

  it('protects system entities unless the command is a system one', async () => {
    const s = await open();
    await one(s, {
      op: 'create',
      entity: 'policies',
      id: 'sys',
      data: { name: 'S', isSystem: true },
      at: AT,
      system: true,
    });
    expect(await one(s, { op: 'update', entity: 'policies', id: 'sys', set: { name: 'T' }, at: AT })).toMatchObject({
      ok: false,
      error: { code: 'SYSTEM_UPDATE', reason: 'cannot update system policy in a non-system context (id=sys)' },
    });
    expect(await one(s, { op: 'delete', entity: 'policies', id: 'sys', at: AT })).toMatchObject({
      ok: false,
      error: { code: 'SYSTEM_DELETE' },
    });
    expect(await one(s, { op: 'delete', entity: 'policies', id: 'sys', at: AT, system: true })).toMatchObject({
      ok: true,
    });
    expect(await one(s, create('policies', 'x', { name: 'X', isSystem: true }))).toMatchObject({
      ok: false,
      error: { code: 'INVALID' },
    });
    await s.close();
  });

  it('applies a batch all or nothing, and failed commands in a group leave no trace', async () => {
    const s = await open();
    const results = await s.applyGroup(
      [
        create('policies', 'p1', { name: 'P' }),
        { op: 'batch', ops: [create('policies', 'p2', { name: 'Q' }), create('policies', 'p3', { name: 'P' })] },
        create('policies', 'p4', { name: 'R' }),
      ],
      { sync: false },
    );
    expect(results.map((r) => r.ok)).toEqual([true, false, true]);
    expect(s.get('policies', 'p2')).toBeUndefined();
    expect(s.get('policies', 'p3')).toBeUndefined();
    expect([...s.collection('policies').scan()].map((r) => r.id)).toEqual(['p1', 'p4']);
    await s.close();
  });

  it('undoes a failed command over the earlier writes of its group, and stores each row a command wrote once', async () => {
    const dir = tempDir();
    let s = await open(dir);
    const rename = (id: string, name: string): Command => ({
      op: 'update',
      entity: 'policies',
      id,
      set: { name },
      at: AT,
    });
    const results = await s.applyGroup(
      [
        create('policies', 'p1', { name: 'P' }),
        // renames p1, then fails: p1 keeps its name from the first command, and its unique value
        {
          op: 'batch',
          ops: [rename('p1', 'Q'), create('policies', 'p2', { name: 'R' }), create('policies', 'p3', { name: 'Q' })],
        },
        create('policies', 'p4', { name: 'Q' }),
        create('policies', 'p5', { name: 'P' }),
        // written twice, and forty times (past the scan of the written rows): stored once, as last written
        { op: 'batch', ops: [create('policies', 'p6', { name: 'S' }), rename('p6', 'T')] },
        {
          op: 'batch',
          ops: [
            create('policies', 'p7', { name: 'U0' }),
            ...Array.from({ length: 40 }, (_, i) => rename('p7', `U${i + 1}`)),
          ],
        },
      ],
      { sync: true, index: 1 },
    );
    expect(results.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual(['ok', 'UNIQUE', 'ok', 'UNIQUE', 'ok', 'ok']);
    const names = (st: Store) => [...st.collection('policies').scan()].map((r) => `${r.id}:${r.name}`);
    const want = ['p1:P', 'p4:Q', 'p6:T', 'p7:U40'];
    expect(names(s)).toEqual(want);
    await s.close();
    s = await open(dir);
    expect(names(s)).toEqual(want);
    expect(s.lookup('policies', 'name', 'U40')).toEqual(['p7']);
    expect(s.lookup('policies', 'name', 'U39')).toEqual([]);
    await s.close();
  });

  it('a command that breaks an invariant is rejected alone; the rest of its group commits', async () => {
    const s = await open();
    const r = await s.applyGroup(
      [
        create('policies', 'p1', { name: 'P' }),
        create('policies', 'p2', { bogus: 1 }),
        create('policies', 'p3', { name: 'R' }),
      ],
      { sync: false },
    );
    expect(r.map((x) => x.ok)).toEqual([true, false, true]);
    expect(r[1]).toMatchObject({
      ok: false,
      error: { code: 'REJECTED', reason: 'invariant violated: policies has no field bogus' },
    });
    expect(s.get('policies', 'p2')).toBeUndefined();
    expect(s.get('policies', 'p3')).toBeDefined();
    // names every object inherits are no fields either, on a create and on an update
    const inherited = await s.applyGroup(
      [
        create('policies', 'p4', { name: 'S', constructor: 1 }),
        { op: 'update', entity: 'policies', id: 'p1', set: { toString: 'x' }, at: AT },
      ],
      { sync: false },
    );
    expect(inherited.map((x) => x.ok)).toEqual([false, false]);
    expect(inherited[0]).toMatchObject({ error: { reason: 'invariant violated: policies has no field constructor' } });
    expect(inherited[1]).toMatchObject({ error: { reason: 'invariant violated: policies has no field toString' } });
    expect(s.get('policies', 'p4')).toBeUndefined();
    expect(s.get('policies', 'p1')).not.toHaveProperty('toString', 'x');
    await s.close();
  });

  it('a row in the overlay that no command encoded fails the store before anything is written or published', async () => {
    const dir = tempDir();
    // a write behind the journal's back: in the group's overlay (so it would be published), never encoded
    const ghost = (ctx: any, _args: unknown, at: string) => {
      ctx.create('policies', 'p2', { name: 'Q' }, at);
      ctx.txn.writes.get('policies').set('ghost', { id: 'ghost', name: 'G', createdAt: at, updatedAt: at, tags: {} });
    };
    let s = await open(dir, { ghost });
    const err = await s
      .applyGroup([create('policies', 'p1', { name: 'P' }), { op: 'custom', name: 'ghost', args: {}, at: AT }], {
        sync: true,
        index: 1,
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreFailedError);
    expect(err).toMatchObject({
      stage: 'apply',
      reason: expect.stringMatching(/2 encoded rows .* for 3 rows written/),
    });
    expect(s.get('policies', 'ghost')).toBeUndefined();
    expect(s.get('policies', 'p1')).toBeUndefined();
    await s.close();
    s = await open(dir);
    expect(s.appliedIndex).toBe(0);
    expect(s.collection('policies').size).toBe(0);
    await s.close();
  });

  it('sees earlier writes of the same group (unique checks across commands)', async () => {
    const s = await open();
    const r = await s.applyGroup([create('policies', 'p1', { name: 'P' }), create('policies', 'p2', { name: 'P' })], {
      sync: false,
    });
    expect(r[1]).toMatchObject({ ok: false, error: { code: 'UNIQUE' } });
    await s.close();
  });

  it('a command this code does not know fails the group and the store, never only itself (a newer member proposed it)', async () => {
    for (const unknown of [
      { op: 'custom', name: 'fromANewerRelease', args: {}, at: AT },
      { op: 'rename', entity: 'policies', id: 'p1', at: AT },
    ] as unknown as Command[]) {
      const dir = tempDir();
      let s = await open(dir);
      const err = await s
        .applyGroup([create('policies', 'p1', { name: 'P' }), unknown], { sync: true, index: 1 })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreFailedError);
      expect(err).toMatchObject({ stage: 'apply', reason: expect.stringMatching(/^unknown command: /) });
      expect(s.get('policies', 'p1')).toBeUndefined();
      // refused from then on: the member stops rather than go on with a state the others do not have
      await expect(
        s.applyGroup([create('policies', 'p2', { name: 'Q' })], { sync: true, index: 2 }),
      ).rejects.toBeInstanceOf(StoreFailedError);
      await s.close();
      s = await open(dir);
      expect(s.appliedIndex).toBe(0);
      await s.close();
    }
  });

  it('runs custom commands deterministically through the same checks', async () => {
    const s = await open(tempDir(), {
      rename: (ctx: any, args: { id: string; name: string }, at: string) =>
        ctx.update('policies', args.id, { name: args.name }, at).name,
    });
    await one(s, create('policies', 'p1', { name: 'P' }));
    expect(await one(s, { op: 'custom', name: 'rename', args: { id: 'p1', name: 'Z' }, at: AT })).toEqual({
      ok: true,
      value: 'Z',
    });
    expect(await one(s, { op: 'custom', name: 'rename', args: { id: 'nope', name: 'Z' }, at: AT })).toMatchObject({
      ok: false,
    });
    await s.close();
  });

  it('never exposes a write before its batch is on disk, and tells listeners what changed', async () => {
    const s = await open();
    const seen: string[] = [];
    s.onPublish((changes) => seen.push(...changes.map((c) => `${c.entity}/${c.id}:${c.before ? 'u' : 'c'}`)));
    const p = s.applyGroup([create('policies', 'p1', { name: 'P' })], { sync: true });
    expect(s.get('policies', 'p1')).toBeUndefined(); // still writing
    await p;
    expect(s.get('policies', 'p1')).toBeDefined();
    expect(seen).toEqual(['policies/p1:c']);
    await s.close();
  });
});

describe('store: durability', () => {
  it('reloads rows, indexes and the applied index after reopening', async () => {
    const dir = tempDir();
    let s = await open(dir);
    await s.applyGroup([create('policies', 'p1', { name: 'P' })], { sync: true, index: 7 });
    await s.applyGroup([create('people', 'a', { name: 'A', policyId: 'p1', attrs: ['x'] })], { sync: true, index: 8 });
    await s.close();
    s = await open(dir);
    expect(s.appliedIndex).toBe(8);
    expect(s.get('people', 'a')!.name).toBe('A');
    expect(s.lookup('people', 'attrs', 'x')).toEqual(['a']);
    expect(await one(s, { op: 'delete', entity: 'policies', id: 'p1', at: AT })).toMatchObject({
      ok: false,
      error: { code: 'REFERENCED' },
    });
    await s.close();
  });

  it('refuses a data directory that holds an unknown entity type', async () => {
    const dir = tempDir();
    const s = await open(dir);
    await s.applyGroup([create('policies', 'p1', { name: 'P' })], { sync: true });
    await s.close();
    await expect(
      Store.open(
        dir,
        new Schema(
          defs
            .filter((d) => d.name === 'tokens' || d.name === 'keys' || d.name === 'people')
            .map((d) => (d.name === 'people' ? { ...d, fields: { name: { type: 'string' as const } } } : d)),
        ),
      ),
    ).rejects.toThrow(/unknown entity type 'policies'/);
  });
});

describe('store: row keys', () => {
  /** `n` entity types of no fields, named after `prefix` (letters only: entity names have no digits). */
  function manyTypes(prefix: string, n: number) {
    const letters = (i: number) => String.fromCharCode(97 + Math.floor(i / 26), 97 + (i % 26));
    return Array.from({ length: n }, (_, i) => ({ name: `${prefix}-${letters(i)}`, type: 'thing', fields: {} }));
  }

  it('are made per store, from its own schema: stores of many entity types in one process each write every type', async () => {
    // 2 × 600 entity types: past the former process-wide bound of 1024 key prefixes shared by every store
    for (const prefix of ['kinda', 'kindb']) {
      const types = manyTypes(prefix, 600);
      const dir = tempDir();
      let s = await Store.open(dir, new Schema(types));
      const results = await s.applyGroup(
        types.map((t) => ({ op: 'create', entity: t.name, id: 'x', data: {}, at: AT })),
        { sync: true, index: 1 },
      );
      expect(results.filter((r) => !r.ok)).toEqual([]);
      await s.close();
      s = await Store.open(dir, new Schema(types));
      expect(types.every((t) => s.get(t.name, 'x')?.id === 'x')).toBe(true);
      await s.close();
    }
  });
});

describe('local proposer', () => {
  it('group-commits concurrent proposals in order and numbers them', async () => {
    const s = await open();
    let batches = 0;
    s.onPublish(() => batches++);
    const p = new LocalProposer(s, { maxQueued: 1000, sync: true });
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => p.propose(create('policies', `p${i}`, { name: `n${i % 150}` }))),
    );
    expect(results.filter((r) => r.ok).length).toBe(150);
    expect(results.slice(150).every((r) => !r.ok)).toBe(true);
    expect(batches).toBeLessThan(20);
    expect(s.appliedIndex).toBe(200);
    await p.close();
    await s.close();
  });

  it('refuses proposals past its queue bound', async () => {
    const s = await open();
    const p = new LocalProposer(s, { maxQueued: 5, sync: true });
    const all = Array.from({ length: 20 }, (_, i) =>
      p.propose(create('policies', `p${i}`, { name: `n${i}` })).then(
        () => 'ok',
        (e) => e,
      ),
    );
    const out = await Promise.all(all);
    expect(out.filter((x) => x instanceof OverloadedError).length).toBeGreaterThan(0);
    expect(out.filter((x) => x === 'ok').length).toBeGreaterThanOrEqual(5);
    await p.close();
    await s.close();
  });
});

describe('sorted rows', () => {
  it('keeps rows in id order through random inserts, replacements and deletes (against a plain map)', () => {
    let seed = 42;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed;
    };
    const sorted = new SortedRows<{ id: string; v: number }>();
    const model = new Map<string, { id: string; v: number }>();
    for (let i = 0; i < 20_000; i++) {
      const id = `k${rnd() % 5000}`;
      if (rnd() % 3 === 0) {
        expect(sorted.delete(id)).toBe(model.delete(id));
      } else {
        const row = { id, v: i };
        expect(sorted.set(row)).toBe(!model.has(id));
        model.set(id, row);
      }
    }
    const expected = [...model.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
    // the very row objects, in order (a replacement must replace, not leave the older row behind)
    const all = sorted.toArray();
    expect(all.length).toBe(expected.length);
    expect(all.every((row, i) => row === expected[i])).toBe(true);
    expect(sorted.size).toBe(expected.length);
    expect([...sorted.from(1234)]).toEqual(expected.slice(1234));
    const reloaded = SortedRows.fromSorted(expected);
    expect(reloaded.toArray()).toEqual(expected);
    reloaded.set({ id: 'k0000', v: -1 });
    expect(reloaded.size).toBe(expected.length + (model.has('k0000') ? 0 : 1));
  });
});
