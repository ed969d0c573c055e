/**
 * The production StoreDb (storage/store-db.ts): a batch is one atomic LevelDB write whose operations apply in order,
 * and a batch refused part-way writes nothing. (It writes through a chained batch rather than abstract-level's
 * array form, for speed; these are the properties the store relies on either way.)
 */
import { afterEach, describe, expect, it } from 'vitest';
import { recordBatchWrites } from '../../raft/storage/batch-recorder.js';
import { levelStoreDb, type StoreDbOp } from '../../storage/store-db.js';
import { tempDirs } from '../support/temp-dir.js';

const tempDir = tempDirs('keel-store-db-');
const bytes = (s: string) => new Uint8Array(Buffer.from(s));
const text = (v: Uint8Array | undefined) => (v === undefined ? undefined : Buffer.from(v).toString());

let recorder: ReturnType<typeof recordBatchWrites> | null = null;
afterEach(() => {
  recorder?.restore();
  recorder = null;
});

describe('levelStoreDb', () => {
  it('applies a batch in order (a later operation on a key wins) and keeps it across a reopen', async () => {
    const dir = tempDir();
    const db = levelStoreDb(dir);
    await db.open();
    await db.put('gone', bytes('x'), { sync: true });
    await db.batch(
      [
        { type: 'put', key: 'a', value: bytes('1') },
        { type: 'del', key: 'a' },
        { type: 'put', key: 'b', value: bytes('1') },
        { type: 'put', key: 'b', value: bytes('2') },
        { type: 'del', key: 'gone' },
        { type: 'del', key: 'c' },
        { type: 'put', key: 'c', value: bytes('3') },
      ],
      { sync: true },
    );
    await db.close();
    const again = levelStoreDb(dir);
    await again.open();
    expect(text(await again.get('a'))).toBeUndefined();
    expect(text(await again.get('b'))).toBe('2');
    expect(text(await again.get('c'))).toBe('3');
    expect(text(await again.get('gone'))).toBeUndefined();
    await again.close();
  });

  it('hands the sync option to LevelDB: a synced batch is fsynced, an unsynced one is not', async () => {
    recorder = recordBatchWrites();
    const { seen } = recorder;
    const db = levelStoreDb(tempDir());
    await db.open();
    await db.batch([{ type: 'put', key: 'a', value: bytes('1') }], { sync: true });
    await db.batch([{ type: 'put', key: 'b', value: bytes('1') }], { sync: false });
    expect(seen).toEqual([{ sync: true }, { sync: false }]);
    await db.close();
  });

  it('a batch with an invalid operation is refused whole, and the database stays usable', async () => {
    const db = levelStoreDb(tempDir());
    await db.open();
    const bad = [
      { type: 'put', key: 'a', value: bytes('1') },
      { type: 'put', key: 'b', value: null },
    ] as unknown as StoreDbOp[];
    await expect(db.batch(bad, { sync: true })).rejects.toThrow();
    expect(await db.get('a')).toBeUndefined();
    await db.batch([{ type: 'put', key: 'a', value: bytes('ok') }], { sync: false });
    expect(text(await db.get('a'))).toBe('ok');
    const keys: string[] = [];
    for await (const [key] of db.iterator({ gte: '', lt: '\uffff' })) keys.push(key);
    expect(keys).toEqual(['a']);
    await db.close();
  });
});
