/**
 * The production LogDb (levelLogDb in log-db.ts): a batch is one atomic LevelDB write whose operations apply in
 * order, a batch refused part-way writes nothing, and `sync` reaches LevelDB, so that every persist of the log is
 * fsynced. (It writes through a chained batch rather than abstract-level's array form, for speed; the power-loss
 * tests inject another LogDb, so these are the properties checked on the real one.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Entry } from '../types.js';
import { recordBatchWrites } from './batch-recorder.js';
import { LevelLog } from './level-log.js';
import { levelLogDb } from './log-db.js';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'keel-log-db-'));
  dirs.push(d);
  return d;
};
let recorder: ReturnType<typeof recordBatchWrites> | null = null;
afterEach(() => {
  recorder?.restore();
  recorder = null;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const buf = (s: string) => Buffer.from(s);
const text = (v: Buffer | undefined) => v?.toString();
const ent = (index: number, term: number): Entry => ({ index, term, type: 'normal', data: buf(`e${index}`) });

describe('levelLogDb', () => {
  it('applies a batch in order (a later operation on a key wins) and keeps it across a reopen', async () => {
    const dir = tempDir();
    const db = levelLogDb(dir, { compression: true });
    await db.open();
    await db.put(buf('gone'), buf('x'), { sync: true });
    await db.batch(
      [
        { type: 'put', key: buf('a'), value: buf('1') },
        { type: 'del', key: buf('a') },
        { type: 'put', key: buf('b'), value: buf('1') },
        { type: 'put', key: buf('b'), value: buf('2') },
        { type: 'del', key: buf('gone') },
      ],
      { sync: true },
    );
    await db.close();
    const again = levelLogDb(dir, { compression: true });
    await again.open();
    expect((await again.getMany([buf('a'), buf('b'), buf('gone')])).map(text)).toEqual([undefined, '2', undefined]);
    await again.close();
  });

  it('a batch with an invalid operation is refused whole', async () => {
    const db = levelLogDb(tempDir(), { compression: false });
    await db.open();
    const bad = { type: 'put', key: null, value: buf('x') } as unknown as { type: 'put'; key: Buffer; value: Buffer };
    await expect(db.batch([{ type: 'put', key: buf('a'), value: buf('1') }, bad], { sync: true })).rejects.toThrow();
    expect((await db.getMany([buf('a')])).map(text)).toEqual([undefined]);
    await db.batch([{ type: 'put', key: buf('a'), value: buf('2') }], { sync: true });
    expect((await db.getMany([buf('a')])).map(text)).toEqual(['2']);
    await db.close();
  });

  it('hands the sync option to LevelDB, and the log persists every append synced', async () => {
    recorder = recordBatchWrites();
    const { seen } = recorder;
    const db = levelLogDb(tempDir(), { compression: true });
    await db.open();
    await db.batch([{ type: 'put', key: buf('a'), value: buf('1') }], { sync: true });
    await db.batch([{ type: 'put', key: buf('b'), value: buf('1') }], { sync: false });
    expect(seen).toEqual([{ sync: true }, { sync: false }]);
    await db.close();

    seen.length = 0;
    const log = await LevelLog.open(tempDir());
    await log.persist({
      snapshot: null,
      entries: [ent(1, 1), ent(2, 1)],
      hardState: { term: 1, vote: 'a', commit: 0 },
    });
    await log.persist({ snapshot: null, entries: [ent(3, 1)], hardState: null });
    await log.close();
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(seen.every((o) => (o as { sync?: boolean }).sync === true)).toBe(true);
  });
});
