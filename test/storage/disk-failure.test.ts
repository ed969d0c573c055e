/**
 * Fail-stop on a failed disk write (storage/store.ts, storage/local-proposer.ts): faults injected at the store's
 * database boundary. After a write fails, no later write is acknowledged, reads keep serving what was published,
 * and the owner is told once.
 */
import { describe, expect, it } from 'vitest';
import { LocalProposer } from '../../storage/local-proposer.js';
import { Schema } from '../../storage/schema.js';
import { Store } from '../../storage/store.js';
import { type Command, type EntityDef, StoreFailedError } from '../../storage/types.js';
import { enospc, FaultyDb } from '../support/store-dbs.js';
import { tempDirs } from '../support/temp-dir.js';

const defs: EntityDef[] = [{ name: 'things', type: 'thing', fields: { name: { type: 'string', unique: true } } }];
const AT = '2026-01-01T00:00:00.000Z';
const create = (id: string, name = id): Command => ({ op: 'create', entity: 'things', id, data: { name }, at: AT });

const tempDir = tempDirs('keel-diskfail-');

async function openFaulty(dir = tempDir()) {
  const db = new FaultyDb(dir);
  const store = await Store.open(db, new Schema(defs));
  const failures: StoreFailedError[] = [];
  store.onFailure((f) => failures.push(f));
  return { dir, db, store, failures };
}

describe('store: a failed disk write stops acknowledgements', () => {
  it('refuses every later write at once, keeps serving reads, reports the failure once', async () => {
    const { dir, db, store, failures } = await openFaulty();
    await store.applyGroup([create('a')], { sync: true, index: 1 });

    db.failWrites = enospc;
    const failed = await store.applyGroup([create('b')], { sync: true, index: 2 }).catch((e) => e);
    expect(failed).toBeInstanceOf(StoreFailedError);
    expect(failed).toMatchObject({ code: 'STORE_FAILED', stage: 'write' });
    expect(failed.reason).toContain('No space left on device');

    // the disk recovers (space freed): the store still refuses, without even trying
    db.failWrites = null;
    const writesBefore = db.writes;
    for (const cmd of [create('c'), create('d')]) {
      await expect(store.applyGroup([cmd], { sync: true, index: 3 })).rejects.toBe(failed);
    }
    await expect(store.putMeta('x', 1)).rejects.toBe(failed);
    expect(db.writes).toBe(writesBefore);
    expect(store.failed).toBe(failed);

    // reads of what was published still work; what failed or was refused is not visible
    expect(store.get('things', 'a')?.name).toBe('a');
    expect(store.lookup('things', 'name', 'a')).toEqual(['a']);
    expect(store.get('things', 'b')).toBeUndefined();
    expect(store.get('things', 'c')).toBeUndefined();
    expect(store.appliedIndex).toBe(1);

    await new Promise((r) => setImmediate(r));
    expect(failures).toEqual([failed]);

    // a restart recovers from the disk: the acknowledged write is there, the refused ones are not
    await store.close();
    const again = await Store.open(dir, new Schema(defs));
    expect(again.get('things', 'a')?.name).toBe('a');
    expect(again.get('things', 'c')).toBeUndefined();
    expect(again.appliedIndex).toBe(1);
    await again.close();
  });

  it('the proposer acknowledges nothing after the failed batch: in flight, queued, or proposed later', async () => {
    const { db, store } = await openFaulty();
    const proposer = new LocalProposer(store, { maxQueued: 100, sync: true });
    expect((await proposer.propose(create('a'))).ok).toBe(true);

    db.failWrites = enospc;
    // the first proposal starts a batch; the others queue behind it and would form the next batch
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => proposer.propose(create(`x${i}`))));
    expect(outcomes.every((o) => o.status === 'rejected' && o.reason instanceof StoreFailedError)).toBe(true);
    db.failWrites = null;
    await expect(proposer.propose(create('later'))).rejects.toBeInstanceOf(StoreFailedError);
    expect(store.get('things', 'a')).toBeDefined();
    expect(store.get('things', 'later')).toBeUndefined();
    await proposer.close();
    await store.close();
  });

  it('a broken invariant after the batch is on disk (publishing it) fails the store instead of being ignored', async () => {
    const { dir, store, failures } = await openFaulty();
    const proposer = new LocalProposer(store, { maxQueued: 100, sync: true });
    let breakPublish = true;
    store.onPublish(() => {
      if (breakPublish) throw new Error('invariant violated: a listener found memory inconsistent');
    });
    const first = await proposer.propose(create('a')).catch((e) => e);
    expect(first).toBeInstanceOf(StoreFailedError);
    expect(first.stage).toBe('publish');
    breakPublish = false;
    // before the fix the proposer carried on: this write was acknowledged on top of an inconsistent memory
    await expect(proposer.propose(create('b'))).rejects.toBe(first);
    await new Promise((r) => setImmediate(r));
    expect(failures).toEqual([first]);
    await proposer.close();
    await store.close();
    // the batch itself was durable: a restart rebuilds memory from disk
    const again = await Store.open(dir, new Schema(defs));
    expect(again.get('things', 'a')).toBeDefined();
    expect(again.get('things', 'b')).toBeUndefined();
    await again.close();
  });

  it('a broken invariant of the group (the applied index going back) fails the store, nothing written', async () => {
    const { db, store } = await openFaulty();
    await store.applyGroup([create('a')], { sync: true, index: 5 });
    const writes = db.writes;
    const err = await store.applyGroup([create('b')], { sync: true, index: 4 }).catch((e) => e);
    expect(err).toBeInstanceOf(StoreFailedError);
    expect(err).toMatchObject({ stage: 'apply' });
    expect(err.reason).toMatch(/applied index going back/);
    await expect(store.applyGroup([create('c')], { sync: true, index: 6 })).rejects.toBe(err);
    expect(db.writes).toBe(writes);
    expect(store.get('things', 'b')).toBeUndefined();
    await store.close();
  });
});
