/** Store.snapshot()/restore(): consistent as of the applied index, framed in bounded chunks, crash-safe restore. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { StoreStateMachine } from '../../src/cluster/state-machine.js';
import { packr } from '../../storage/codec.js';
import { Schema } from '../../storage/schema.js';
import { SNAPSHOT_CHUNK_ROWS, Store } from '../../storage/store.js';
import type { Command } from '../../storage/types.js';
import { create, defs } from '../support/store-defs.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDir() {
  const d = mkdtempSync(join(tmpdir(), 'keel-snap-'));
  dirs.push(d);
  return d;
}
const open = (dir = tempDir()) => Store.open(dir, new Schema(defs));

/** Splits a snapshot buffer into its frames' decoded values. */
function frames(data: Uint8Array): unknown[] {
  const buf = Buffer.from(data);
  const out: unknown[] = [];
  for (let at = 0; at < buf.length; ) {
    const len = buf.readUInt32BE(at);
    out.push(packr.unpack(buf.subarray(at + 4, at + 4 + len)));
    at += 4 + len;
  }
  return out;
}

async function filled(rows: number): Promise<Store> {
  const s = await open();
  await s.applyGroup([create('policies', 'p1', { name: 'P1' }), create('policies', 'p2', { name: 'P2' })], {
    index: 1,
    sync: false,
  });
  const cmds: Command[] = [];
  for (let i = 0; i < rows; i++) {
    cmds.push(
      create('people', `u${String(i).padStart(5, '0')}`, { name: `n${i}`, policyId: 'p1', attrs: [`a${i % 3}`] }),
    );
  }
  for (let i = 0; i < cmds.length; i += 4000)
    await s.applyGroup(cmds.slice(i, i + 4000), { index: 2 + i, sync: false });
  return s;
}

describe('store snapshot', () => {
  it('is framed in chunks of at most SNAPSHOT_CHUNK_ROWS rows, as of the applied index', async () => {
    const s = await filled(2500);
    const { index, data } = await s.snapshot();
    expect(index).toBe(s.appliedIndex);
    const f = frames(data);
    expect(f[0]).toMatchObject({ format: 'keel-store-snapshot', version: 1, index });
    expect(f.at(-1)).toEqual({ end: 2502 });
    const chunks = f.slice(1, -1) as [string, unknown[]][];
    expect(chunks.every(([, rows]) => rows.length <= SNAPSHOT_CHUNK_ROWS)).toBe(true);
    expect(chunks.filter(([e]) => e === 'people').length).toBe(3);
    await s.close();
  });

  it('restores into a store holding other rows: same rows, indexes and applied index; listeners see removals', async () => {
    const src = await filled(1500);
    const { index, data } = await src.snapshot();
    const dst = await open();
    await dst.applyGroup([create('policies', 'old', { name: 'Old' }), create('policies', 'p1', { name: 'P1' })], {
      index: 7,
      sync: false,
    });
    const removed: string[] = [];
    dst.onPublish((changes) => removed.push(...changes.filter((c) => !c.after).map((c) => c.id)));
    const stamp = dst.stampOf(['keys']);
    expect(await dst.restore(data)).toBe(index);
    // every cached rendering is stale, whatever collections it read
    expect(dst.stampOf(['keys'])).toBeGreaterThan(stamp);
    expect(removed).toEqual(['old']);
    expect(dst.appliedIndex).toBe(index);
    expect(dst.collection('people').size).toBe(1500);
    expect(dst.get('policies', 'old')).toBeUndefined();
    expect(dst.lookup('people', 'name', 'n42')).toEqual(['u00042']);
    expect(dst.lookup('people', 'attrs', 'a1').length).toBe(500);
    // a unique index still holds after the restore
    const [dup] = await dst.applyGroup([create('people', 'z', { name: 'n1', policyId: 'p1' })], {
      index: index + 1,
      sync: false,
    });
    expect(dup).toMatchObject({ ok: false, error: { code: 'UNIQUE' } });
    // and it is durable: a reopened store loads the same state
    const dir = dirs[1]!;
    await dst.close();
    const again = await open(dir);
    expect(again.appliedIndex).toBe(index + 1);
    expect(again.collection('people').size).toBe(1500);
    expect(again.get('policies', 'old')).toBeUndefined();
    await again.close();
    await src.close();
  });

  it('a restore cut short leaves a store that reopens empty at index 0 (so Raft restores again)', async () => {
    const src = await filled(1200);
    const { data } = await src.snapshot();
    const dir = tempDir();
    const dst = await open(dir);
    await dst.applyGroup([create('policies', 'old', { name: 'Old' })], { index: 3, sync: false });
    // the last frame (the end marker) is missing: the restore fails after it has started writing
    const f = frames(data);
    const lastLen = packr.pack(f.at(-1)).length + 4;
    await expect(dst.restore(data.subarray(0, data.byteLength - lastLen))).rejects.toThrow(/end frame/);
    await dst.close();
    const reopened = await open(dir);
    expect(reopened.appliedIndex).toBe(0);
    expect(reopened.collection('policies').size).toBe(0);
    await reopened.restore(data);
    expect(reopened.collection('people').size).toBe(1200);
    await reopened.close();
    await src.close();
  });

  it('refuses data that is not a snapshot, without touching the store', async () => {
    const s = await filled(10);
    const body = packr.pack({ hello: 1 });
    const framed = Buffer.concat([Buffer.from([0, 0, 0, body.length]), body]);
    await expect(s.restore(framed)).rejects.toThrow(/not a Keel store snapshot/);
    await expect(s.restore(body)).rejects.toThrow(/frame/);
    expect(s.collection('people').size).toBe(10);
    await s.close();
  });
});

describe('store snapshot, streamed', () => {
  it('restores from chunks of any size (frames split across chunks), as the Raft state machine streams it', async () => {
    const src = await filled(2100);
    const sm = new StoreStateMachine(src);
    const stream = await sm.snapshotStream();
    const parts: Uint8Array[] = [];
    for await (const c of stream.chunks) parts.push(c);
    expect(parts.length).toBe(2 + 3 + 1); // header, policies, three chunks of people, end
    const whole = Buffer.concat(parts);
    async function* pieces(size: number): AsyncGenerator<Uint8Array> {
      for (let at = 0; at < whole.length; at += size) yield whole.subarray(at, at + size);
    }
    for (const size of [7, 4096]) {
      const dst = await open();
      await new StoreStateMachine(dst).restoreStream(
        {
          index: stream.index,
          term: 1,
          conf: { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false },
        },
        pieces(size),
      );
      expect(dst.appliedIndex).toBe(stream.index);
      expect(dst.collection('people').size).toBe(2100);
      expect(dst.lookup('people', 'name', 'n2099')).toEqual(['u02099']);
      await dst.close();
    }
    // a stream cut inside a frame is refused
    const dst = await open();
    async function* cut(): AsyncGenerator<Uint8Array> {
      yield whole.subarray(0, whole.length - 3);
    }
    await expect(dst.restoreStream(cut())).rejects.toThrow(/truncated/);
    await dst.close();
    await src.close();
  });
});
