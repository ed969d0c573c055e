/**
 * What is acknowledged is what is stored, and one bad command fails alone (storage/codec.ts, storage/store.ts,
 * storage/local-proposer.ts): values msgpackr would not read back as written (lone UTF-16 surrogates, colliding
 * keys, `__proto__`, nesting too deep to encode) fail their own command with UNSTORABLE, never the group, and the
 * data directory still opens afterwards.
 */
import { describe, expect, it } from 'vitest';
import type { EntityName } from '../../src/model/index.js';
import { buildSchema } from '../../src/model/index.js';
import { encodeChecked, MAX_STORED_DEPTH, packr, UnstorableError } from '../../storage/codec.js';
import { encodeCommand } from '../../storage/command-codec.js';
import { LocalProposer } from '../../storage/local-proposer.js';
import { Schema } from '../../storage/schema.js';
import { Store } from '../../storage/store.js';
import type { Command, CommandResult, EntityDef } from '../../storage/types.js';
import { tempDirs } from '../support/temp-dir.js';

const defs: EntityDef[] = [
  {
    name: 'things',
    type: 'thing',
    fields: { name: { type: 'string', unique: true }, appData: { type: 'object' } },
  },
];
const AT = '2026-01-01T00:00:00.000Z';
const create = (id: string, data: Record<string, unknown>): Command => ({
  op: 'create',
  entity: 'things',
  id,
  data,
  at: AT,
});

const tempDir = tempDirs('keel-faithful-');
const open = (dir: string) => Store.open(dir, new Schema(defs));

function nestedArrays(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}
function nestedObjects(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

function unstorable(r: CommandResult | undefined, field: string): void {
  expect(r).toMatchObject({ ok: false, error: { code: 'UNSTORABLE', entity: 'things', field } });
}

describe('codecs: what reads back as written, and what does not', () => {
  const value = { s: 'é ✓ 😀', n: -1.5, b: true, z: null, u: undefined, a: [1, [2]], bytes: new Uint8Array([1, 2]) };
  const readBack = { ...value, bytes: Buffer.from([1, 2]) };

  it('rows: encodeChecked returns bytes that decode to the data', () => {
    expect(packr.unpack(encodeChecked(value))).toEqual(readBack);
  });

  it('commands: encodeCommand returns the bytes and their decoded copy, decoded once, on first use', () => {
    const cmd = create('x', value);
    const encoded = encodeCommand(cmd);
    expect(encoded.ok).toBe(true);
    if (!encoded.ok) return;
    expect(packr.unpack(encoded.bytes)).toEqual({ ...cmd, data: readBack });
    const decoded = encoded.cmd;
    expect(decoded).toEqual({ ...cmd, data: readBack });
    expect(decoded).not.toBe(cmd); // the copy a follower would decode, not the caller's object
    expect(encoded.cmd).toBe(decoded);
  });

  // the path names object keys of the outermost two levels only for values nested too deeply: a command's data
  // sits one level further in (`data.tags`), so its result names the field only
  it.each([
    ['a lone high surrogate', { name: 'a\ud800b' }, 'name', 'name'],
    ['a lone low surrogate', { name: '\udfff' }, 'name', 'name'],
    ['keys that collapse into one', { tags: { 'k\ud800': 1, 'k\udfff': 2 } }, 'tags.k\ud800', 'tags.k\ud800'],
    ['a surrogate deep inside', { tags: { x: [1, { y: ['ok', 'bad\ud801'] }] } }, 'tags.x.1.y.1', 'tags.x.1.y.1'],
    [
      'a __proto__ key (renamed by msgpackr)',
      { tags: JSON.parse('{"__proto__":{"x":1}}') },
      'tags.__proto__',
      'tags.__proto__',
    ],
    ['arrays nested too deeply to encode', { tags: { deep: nestedArrays(1_500) } }, 'tags.deep', 'tags'],
    [
      'objects nested one level deeper than the bound',
      { tags: { deep: nestedObjects(MAX_STORED_DEPTH - 1) } },
      'tags.deep',
      'tags',
    ],
  ])('refuses %s, naming where (a row: UnstorableError; a command: its UNSTORABLE result)', (_, value, path, field) => {
    let err: unknown;
    try {
      encodeChecked(value);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UnstorableError);
    expect((err as UnstorableError).path).toBe(path);
    const encoded = encodeCommand(create('x', value));
    expect(encoded.ok).toBe(false);
    if (!encoded.ok) unstorable(encoded.result, field);
  });
});

describe('codec: the nesting bound', () => {
  it('is explicit, so the outcome depends on the value alone (not on where msgpackr overflows)', () => {
    // {tags: {deep: <n levels>}}: the value itself is two levels, the bound counts every level
    expect(() => encodeChecked({ tags: { deep: nestedObjects(MAX_STORED_DEPTH - 2) } })).not.toThrow();
    expect(() => encodeChecked({ tags: { deep: nestedArrays(MAX_STORED_DEPTH - 1) } })).toThrow(UnstorableError);
    // far beyond any stack: still a clean UnstorableError, never a RangeError
    expect(() => encodeChecked({ deep: nestedArrays(200_000) })).toThrow(UnstorableError);
  });
});

describe('store: only what reads back as written is stored', () => {
  it('rejects rows with lone surrogates alone; the others of the group apply; the directory reopens', async () => {
    const dir = tempDir();
    let store = await open(dir);
    const results = await store.applyGroup(
      [
        create('a', { name: 'plain' }),
        create('b', { name: '\ud800' }),
        create('c', { name: '\ud801' }), // same as b once mangled: before the fix, the next start failed
        create('d', { name: 'tagged', tags: { 'k\ud800': 1, 'k\udfff': 2 } }),
        create('e', { name: 'a\ud800b' }),
        create('\ud800', { name: 'bad id' }),
        create('f', { name: 'after', tags: { k: 'v' } }),
      ],
      { sync: true, index: 1 },
    );
    expect(results[0]!.ok).toBe(true);
    unstorable(results[1], 'name');
    expect(results[1]).toMatchObject({ error: { reason: expect.stringMatching(/lone surrogate/) } });
    unstorable(results[2], 'name');
    unstorable(results[3], 'tags.k\ud800');
    unstorable(results[4], 'name');
    unstorable(results[5], 'id');
    expect(results[6]!.ok).toBe(true);
    // an update that would store a lone surrogate leaves the row as it was
    const upd = await store.applyGroup(
      [{ op: 'update', entity: 'things', id: 'a', set: { name: 'x\udc00' }, at: AT }],
      {
        sync: true,
        index: 2,
      },
    );
    unstorable(upd[0], 'name');
    expect(store.get('things', 'a')!.name).toBe('plain');
    await store.close();

    store = await open(dir);
    expect(store.collection('things').size).toBe(2);
    expect(store.get('things', 'a')!.name).toBe('plain');
    expect(store.get('things', 'f')!.tags).toEqual({ k: 'v' });
    await store.close();
  });
});

describe('one bad command fails alone', () => {
  it.each([
    ['store (rows)', false, 'tags.x'],
    ['proposer (commands)', true, 'tags'],
  ])(
    '%s: 40 concurrent creates and a deeply nested one in the same group: only the deep one fails',
    async (_, viaProposer, deepTag) => {
      const dir = tempDir();
      let store = await open(dir);
      const cmds = Array.from({ length: 40 }, (_, i) => create(`t${i}`, { name: `n${i}`, tags: { i } }));
      cmds.splice(17, 0, create('deep', { name: 'deep', appData: nestedArrays(1_500) }));
      cmds.push(create('deep-objects', { name: 'deep-objects', tags: { x: nestedObjects(1_500) } }));
      let results: CommandResult[];
      if (viaProposer) {
        const proposer = new LocalProposer(store, { maxQueued: 1_000, sync: true });
        results = await Promise.all(cmds.map((c) => proposer.propose(c)));
        await proposer.close();
      } else {
        results = await store.applyGroup(cmds, { sync: true, index: 1 });
      }
      unstorable(results[17], 'appData');
      expect(results[17]).toMatchObject({ error: { reason: expect.stringMatching(/nested deeper than 256 levels/) } });
      unstorable(results[41], deepTag);
      const okCount = results.filter((r) => r.ok).length;
      expect(okCount).toBe(40);
      expect(store.get('things', 'deep')).toBeUndefined();
      await store.close();
      store = await open(dir);
      expect(store.collection('things').size).toBe(40);
      expect(store.get('things', 't39')!.tags).toEqual({ i: 39 });
      await store.close();
    },
  );

  it('the proposer applies the decoded copy: what a follower would apply is what this node applies', async () => {
    const store = await open(tempDir());
    const proposer = new LocalProposer(store, { maxQueued: 10, sync: false });
    const data = { name: 'copy', tags: { list: [1, 2] } };
    expect((await proposer.propose(create('x', data))).ok).toBe(true);
    const row = store.get('things', 'x')!;
    expect(row.tags).toEqual({ list: [1, 2] });
    expect(row.tags).not.toBe(data.tags); // decoded, not the caller's object
    unstorable(
      await proposer.propose(create('y', { name: 'k', tags: { 'k\ud800': 1, 'k\udfff': 2 } })),
      'tags.k\ud800',
    );
    await proposer.close();
    await store.close();
  });

  it("Keel's schema: surrogate identity names and authenticator usernames cannot make the directory unstartable", async () => {
    const dir = tempDir();
    const cmd = (entity: EntityName, id: string, data: Record<string, unknown>): Command<EntityName> => ({
      op: 'create',
      entity,
      id,
      data,
      at: AT,
    });
    let store = await Store.open(dir, buildSchema());
    const results = await store.applyGroup(
      [
        cmd('identities', 'i0', { name: 'plain' }),
        cmd('identities', 'i1', { name: '\ud800' }),
        cmd('identities', 'i2', { name: '\ud801' }),
        cmd('authenticators', 'a1', { identityId: 'i0', method: 'updb', username: 'u\ud800' }),
        cmd('authenticators', 'a2', { identityId: 'i0', method: 'updb', username: 'u\ud801' }),
      ],
      { sync: true, index: 1 },
    );
    expect(results.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual([
      'ok',
      'UNSTORABLE',
      'UNSTORABLE',
      'UNSTORABLE',
      'UNSTORABLE',
    ]);
    await store.close();
    store = await Store.open(dir, buildSchema()); // before the fix: "unique index identities.name violated"
    expect(store.get('identities', 'i0')!.name).toBe('plain');
    expect(store.collection('identities').size).toBe(1);
    expect(store.collection('authenticators').size).toBe(0);
    await store.close();
  });
});
