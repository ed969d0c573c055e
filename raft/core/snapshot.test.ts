/**
 * Snapshots (etcd's raft_snap_test.go as a checklist): compaction fallback on the leader, chunked
 * streaming with go-back-N recovery, installation on followers, and the corner cases around them.
 */
import { describe, expect, it } from 'vitest';
import type { Message, SnapshotChunk, SnapshotInfo } from '../types.js';
import { confOf, entries, msg, Solo, seedLog, TestNet, text } from './testkit.js';

const ABC = confOf(['a', 'b', 'c']);

function snapshotData(n: number): Uint8Array {
  const d = new Uint8Array(n);
  for (let i = 0; i < n; i++) d[i] = (i * 13 + 7) & 0xff;
  return d;
}

/** Cluster where c missed 20 entries and the leader compacted them into a snapshot of `size` bytes. */
function laggingFollower(size: number, chunk: number): { net: TestNet; snap: SnapshotInfo; data: Uint8Array } {
  const net = TestNet.create(['a', 'b', 'c'], { snapshotChunkBytes: chunk, maxInflightMsgs: 2 });
  net.elect('a');
  net.isolate('c');
  for (let i = 0; i < 20; i++) net.propose('a', `v${i}`);
  const a = net.node('a');
  const applied = a.core.status().applied;
  const data = snapshotData(size);
  const snap = a.log.createSnapshot(applied, a.core.status().conf, data);
  a.log.compact(applied);
  net.heal();
  return { net, snap, data };
}

describe('snapshot fallback and streaming', () => {
  it('streams a snapshot in bounded chunks to a follower whose entries were compacted', () => {
    const { net, snap, data } = laggingFollower(95, 10);
    net.tickAll(3);
    const chunks = net.delivered
      .filter((m) => m.type === 'snapshot' && m.to === 'c')
      .map((m) => m.snapshot as SnapshotChunk);
    expect(chunks.length).toBe(10);
    expect(chunks.every((c) => c.data.byteLength <= 10)).toBe(true);
    expect(chunks.map((c) => c.offset_bytes)).toEqual([0, 10, 20, 30, 40, 50, 60, 70, 80, 90]);
    expect(chunks.filter((c) => c.done).length).toBe(1);
    const c = net.node('c');
    expect(c.snapshotsInstalled).toBe(1);
    expect(c.log.snapshotData()).toEqual(data);
    expect(c.log.snapshot()?.size_bytes).toBe(95);
    expect(c.log.firstIndex()).toBe(snap.meta.index + 1);
    // After the snapshot the follower is caught up from the log and applies new entries.
    net.propose('a', 'after');
    net.tickAll();
    expect(c.applied.map(text).slice(-1)).toEqual(['after']);
    expect(c.core.status().commit).toBe(net.core('a').status().commit);
    expect(net.core('a').status().progress?.c?.state).toBe('replicate');
  });

  it('keeps at most maxInflightMsgs chunks in flight', () => {
    const { net } = laggingFollower(95, 10);
    net.tick('a');
    // Only deliver to c what the leader sends, one round at a time.
    let maxInFlight = 0;
    for (let round = 0; round < 50; round++) {
      const pending = net.takePending();
      if (pending.length === 0) break;
      maxInFlight = Math.max(maxInFlight, pending.filter((m) => m.type === 'snapshot').length);
      for (const m of pending) net.deliver(m);
    }
    expect(maxInFlight).toBe(2);
    expect(net.node('c').snapshotsInstalled).toBe(1);
  });

  it('recovers from lost chunks (the leader rewinds after heartbeats without progress)', () => {
    const { net } = laggingFollower(95, 10);
    net.dropTypes.add('snapshot');
    net.tickAll(5);
    expect(net.node('c').snapshotsInstalled).toBe(0);
    net.dropTypes.delete('snapshot');
    for (let i = 0; i < 30 && net.node('c').snapshotsInstalled === 0; i++) net.tickAll();
    expect(net.node('c').snapshotsInstalled).toBe(1);
    net.propose('a', 'after');
    expect(net.node('c').applied.map(text).slice(-1)).toEqual(['after']);
  });

  it('restarts the stream from scratch when the driver reports a failure', () => {
    const { net } = laggingFollower(95, 10);
    net.dropTypes.add('snapshot');
    net.tick('a');
    net.stabilize();
    expect(net.core('a').status().progress?.c?.state).toBe('snapshot');
    net.core('a').reportSnapshot('c', false);
    expect(net.core('a').status().progress?.c?.state).toBe('probe');
    net.heal();
    net.tickAll(3);
    expect(net.node('c').snapshotsInstalled).toBe(1);
  });
});

describe('follower side of snapshots', () => {
  const meta = { index: 10, term: 2, conf: ABC };
  const chunk = (offset: number, data: number[], done: boolean): Partial<Message> => ({
    type: 'snapshot',
    from: 'a',
    term: 2,
    snapshot: { meta, offset_bytes: offset, data: new Uint8Array(data), done },
  });

  it('assembles chunks in order, acknowledging bytes, and installs on the last one', () => {
    const n = new Solo('b', ABC);
    expect(n.step(chunk(0, [1, 2], false) as Message)).toMatchObject([
      { type: 'snapshotResp', rejectHint: 2, reject: false },
    ]);
    expect(n.step(chunk(2, [3, 4], false) as Message)).toMatchObject([{ type: 'snapshotResp', rejectHint: 4 }]);
    const out = n.step(chunk(4, [5], true) as Message);
    expect(out).toMatchObject([{ type: 'appendResp', index: 10, reject: false }]);
    expect(n.log.snapshotData()).toEqual(new Uint8Array([1, 2, 3, 4, 5]));
    expect(n.core.status()).toMatchObject({ commit: 10, applied: 10, lastIndex: 10 });
  });

  it('asks to resend from its offset on a gap, and acknowledges duplicates', () => {
    const n = new Solo('b', ABC);
    expect(n.step(chunk(2, [3, 4], false) as Message)).toMatchObject([
      { type: 'snapshotResp', reject: true, rejectHint: 0 },
    ]);
    n.step(chunk(0, [1, 2], false) as Message);
    expect(n.step(chunk(4, [5], true) as Message)).toMatchObject([
      { type: 'snapshotResp', reject: true, rejectHint: 2 },
    ]);
    expect(n.step(chunk(0, [1, 2], false) as Message)).toMatchObject([
      { type: 'snapshotResp', reject: false, rejectHint: 2 },
    ]);
    expect(n.log.snapshot()).toBeNull();
  });

  it('ignores a snapshot that is not newer than its commit index', () => {
    const n = new Solo('b', ABC, {}, (log) => seedLog(log, entries(1, Array(12).fill(2)), 2, 12));
    expect(n.step(chunk(0, [1], true) as Message)).toMatchObject([{ type: 'appendResp', index: 12 }]);
    expect(n.log.snapshot()).toBeNull();
    expect(n.log.lastIndex()).toBe(12);
  });

  it('only fast-forwards the commit index when its log already has the snapshot entry', () => {
    const n = new Solo('b', ABC, {}, (log) => seedLog(log, entries(1, Array(12).fill(2)), 2, 3));
    expect(n.step(chunk(0, [1], true) as Message)).toMatchObject([{ type: 'appendResp', index: 10 }]);
    expect(n.log.snapshot()).toBeNull();
    expect(n.core.status()).toMatchObject({ commit: 10, lastIndex: 12 });
  });

  it('defers installing a snapshot that completes while a Ready is outstanding', () => {
    const n = new Solo('b', ABC, {}, (log) => seedLog(log, entries(1, [1, 1]), 1, 0));
    n.core.step(msg({ type: 'heartbeat', from: 'a', to: 'b', term: 2, commit: 2 }));
    const rd = n.core.ready();
    expect(rd.committed.map((e) => e.index)).toEqual([1, 2]);
    n.core.step(msg({ ...(chunk(0, [9], true) as Message), to: 'b' }));
    // Not yet installed: entries 1..2 of the outstanding Ready are applied first.
    expect(n.core.status().lastIndex).toBe(2);
    n.log.setHardState(rd.hardState!);
    n.core.advance(rd);
    expect(n.core.status()).toMatchObject({ lastIndex: 10, commit: 10 });
    const rd2 = n.core.ready();
    expect(rd2.snapshot?.meta.index).toBe(10);
    expect(rd2.messages).toMatchObject([{ type: 'appendResp', index: 10 }]);
  });

  it('a restarted node recovers from its snapshot plus the log after it', () => {
    const { net, snap } = laggingFollower(30, 64);
    net.tickAll(3);
    net.propose('a', 'after');
    net.tickAll();
    const c = net.restart('c', { applied: snap.meta.index });
    expect(c.status()).toMatchObject({ applied: snap.meta.index, commit: net.core('a').status().commit });
    net.node('c').applied.length = 0;
    net.drain('c');
    expect(net.node('c').applied.map(text)).toEqual(['after']);
  });

  it('refuses to start with an applied index below the snapshot', () => {
    const { net } = laggingFollower(30, 64);
    net.tickAll(3);
    expect(() => net.restart('c', { applied: 0 })).toThrow(/below the snapshot index/);
  });
});
