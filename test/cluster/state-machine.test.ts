/** The store as Raft's state machine: log entries are applied in order, each once, whatever Raft hands it again. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type ConfState, type Entry, LevelLog } from '../../raft/index.js';
import { restoreSnapshot, takeSnapshot } from '../../raft/node/snapshot-stream.js';
import { encodeLogged } from '../../src/cluster/codec.js';
import { StoreStateMachine } from '../../src/cluster/state-machine.js';
import { Schema } from '../../storage/schema.js';
import { Store } from '../../storage/store.js';
import type { Command } from '../../storage/types.js';
import { defs } from '../support/store-defs.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const AT = '2026-11-26T00:00:00.000Z';
const CONF: ConfState = { voters: ['a'], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
/** A log entry whose command renames policy `p1` to `name` (a second application would be visible). */
function entry(index: number, cmd: Command): Entry {
  return { index, term: 1, type: 'normal', data: encodeLogged({ rid: `r${index}`, cmd }) } as Entry;
}
const createP = (index: number): Entry =>
  entry(index, { op: 'create', entity: 'policies', id: `p${index}`, data: { name: `P${index}` }, at: AT });

/** A store in a fresh directory (removed after the test) and the state machine over it. */
async function openMachine(): Promise<{ dir: string; store: Store; sm: StoreStateMachine }> {
  const dir = mkdtempSync(join(tmpdir(), 'keel-sm-'));
  dirs.push(dir);
  const store = await Store.open(dir, new Schema(defs));
  return { dir, store, sm: new StoreStateMachine(store) };
}

describe('StoreStateMachine', () => {
  it('skips entries at or below the applied index (replay after a restart applies nothing twice)', async () => {
    const { dir, store, sm } = await openMachine();
    await sm.apply([createP(1), createP(2), createP(3)]);
    expect(store.appliedIndex).toBe(3);
    const waiting = sm.wait('r3');
    // Raft hands entries 2..4 again (a replay overlapping what the store already holds): only 4 is new
    await sm.apply([createP(2), createP(3), createP(4)]);
    expect(store.appliedIndex).toBe(4);
    expect(store.collection('policies').size).toBe(4);
    // a re-delivered entry neither fails (a second create of p2 would be ALREADY_EXISTS) nor resolves waiters
    let settled = false;
    void waiting!.promise.then(() => {
      settled = true;
    });
    await new Promise((r) => setTimeout(r, 10));
    expect(settled).toBe(false);
    waiting!.cancel();
    await store.close();
    // reopened: the same state, the same applied index
    const again = await Store.open(dir, new Schema(defs));
    expect(again.appliedIndex).toBe(4);
    expect(again.collection('policies').size).toBe(4);
    await again.close();
  });

  it('checkpoint: everything applied when called is on disk, and the index returned is that one, not a later one', async () => {
    const { dir, store, sm } = await openMachine();
    await sm.apply([createP(1), createP(2), createP(3)]);
    const pending = sm.checkpoint();
    // applied while the checkpoint's flush is under way: may be written by it, but Raft has not seen it applied
    const later = sm.apply([createP(4), createP(5)]);
    expect(await pending).toBe(3);
    expect(store.durableIndex).toBeGreaterThanOrEqual(3);
    await later;
    await store.close();
    const again = await Store.open(dir, new Schema(defs));
    expect(again.appliedIndex).toBeGreaterThanOrEqual(3);
    expect(again.collection('policies').get('p3')).toBeDefined();
    await again.close();
  });

  it('streams the state as of the snapshot index while later entries are applied (background snapshots)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-sm-'));
    const dir2 = mkdtempSync(join(tmpdir(), 'keel-sm-'));
    dirs.push(dir, dir2);
    const store = await Store.open(dir, new Schema(defs));
    const sm = new StoreStateMachine(store);
    await sm.apply(Array.from({ length: 2500 }, (_, i) => createP(i + 1)));
    const streaming = sm.snapshotStream(); // the state is captured now; the store is flushed before it resolves
    // Raft's loop goes on while the store is flushed and the chunks are read: a rename and new rows applied
    // meanwhile must not leak into the snapshot, nor into the index it is labelled with
    await sm.apply([entry(2501, { op: 'update', entity: 'policies', id: 'p1', set: { name: 'renamed' }, at: AT })]);
    const stream = await streaming;
    expect(stream.index).toBe(2500);
    expect(store.durableIndex).toBeGreaterThanOrEqual(2500); // flushed: Raft may compact up to it
    const read = (async () => {
      const parts: Uint8Array[] = [];
      for await (const c of stream.chunks) parts.push(c);
      return Buffer.concat(parts);
    })();
    await sm.apply([createP(2502)]);
    const data = await read;
    const other = await Store.open(dir2, new Schema(defs));
    expect(await other.restore(data)).toBe(2500);
    expect(other.collection('policies').size).toBe(2500);
    expect(other.get('policies', 'p1')?.name).toBe('P1');
    await other.close();
    await store.close();
  });
});

/** Passes `chunks` on, recording the largest. */
function measured(chunks: AsyncIterable<Uint8Array>, seen: { max_bytes: number; total_bytes: number }) {
  return (async function* () {
    for await (const c of chunks) {
      seen.max_bytes = Math.max(seen.max_bytes, c.byteLength);
      seen.total_bytes += c.byteLength;
      yield c;
    }
  })();
}

describe('StoreStateMachine snapshots through the Raft log', () => {
  it('100 000 rows go into the log record by record and come back record by record, after a restart too', async () => {
    const ROWS = 100_000;
    const MiB = 1 << 20;
    const dir = mkdtempSync(join(tmpdir(), 'keel-sm-snap-'));
    dirs.push(dir);
    const store = await Store.open(join(dir, 'a'), new Schema(defs));
    const sm = new StoreStateMachine(store);
    // Filled without a sync per group (only the snapshot path is under test here).
    const GROUP = 4096;
    for (let i = 1; i <= ROWS; i += GROUP) {
      const last = Math.min(i + GROUP, ROWS + 1) - 1;
      const cmds: Command[] = [];
      for (let k = i; k <= last; k++) {
        cmds.push({ op: 'create', entity: 'policies', id: `p${k}`, data: { name: `P${k}` }, at: AT });
      }
      await store.applyGroup(cmds, { index: last, sync: false });
    }
    expect(store.collection('policies').size).toBe(ROWS);
    // A Raft log whose last entry is the store's applied index (the log before it was compacted away).
    let log = await LevelLog.open(join(dir, 'raft'));
    const base = { index: ROWS - 1, term: 1, conf: CONF };
    await log.receiveSnapshot([{ meta: base, offset_bytes: 0, data: new Uint8Array(0), done: true }]);
    await log.persist({
      snapshot: { meta: base, size_bytes: 0 },
      entries: [{ index: ROWS, term: 1, type: 'noop', data: new Uint8Array(0) }],
      hardState: { term: 1, vote: null, commit: ROWS },
    });
    // What RaftNode does every snapshotEvery_entries: the store's frames go to the log as they are produced.
    const produced = { max_bytes: 0, total_bytes: 0 };
    const taken = await takeSnapshot(sm);
    expect(taken.index).toBe(ROWS);
    expect(taken.data).not.toBeInstanceOf(Uint8Array);
    const info = await log.createSnapshot(ROWS, CONF, measured(taken.data as AsyncIterable<Uint8Array>, produced));
    expect(info.size_bytes).toBe(produced.total_bytes);
    expect(info.size_bytes).toBeGreaterThan(2 * MiB);
    expect(produced.max_bytes).toBeLessThan(MiB);
    await store.close();
    await log.close();

    // A member restarted with an empty store restores from its log's snapshot, one record at a time.
    log = await LevelLog.open(join(dir, 'raft'));
    const fresh = await Store.open(join(dir, 'b'), new Schema(defs));
    const restored = { max_bytes: 0, total_bytes: 0 };
    await restoreSnapshot(new StoreStateMachine(fresh), info.meta, measured(log.snapshotChunks(), restored));
    expect(restored.total_bytes).toBe(info.size_bytes);
    expect(restored.max_bytes).toBeLessThanOrEqual(MiB);
    expect(fresh.appliedIndex).toBe(ROWS);
    expect(fresh.collection('policies').size).toBe(ROWS);
    expect(fresh.collection('policies').get('p12345')).toMatchObject({ name: 'P12345' });
    await fresh.close();
    await log.close();
  }, 120_000);
});
