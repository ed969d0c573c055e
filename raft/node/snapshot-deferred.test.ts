/**
 * Deferred snapshots (RaftNodeOptions.snapshotDeferred): the periodic snapshots record only the index the state
 * machine made durable (checkpoint) and compact the log, encoding nothing; a follower whose next entry was
 * compacted gets a snapshot with bytes taken for it on demand, and catches up to the same state. A restart refuses
 * a state machine behind the log's deferred snapshot.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RaftNode } from '../node.js';
import { MemoryDurableLog } from '../storage/memory-durable-log.js';
import { MemoryNetwork } from '../transport/memory.js';
import type { Entry, Message, NodeId, Snapshot, SnapshotMeta } from '../types.js';
import type { SnapshotChunks, StateMachine } from './state-machine.js';
import { waitFor } from './wait-testkit.js';

const IDS: NodeId[] = ['a', 'b', 'c'];
const TICK_MS = 10;
const ELECTION_TICKS = 10;
const EVERY = 10;
const KEEP = 2;

/** The applied payloads in order; durable up to the last checkpoint. Counts snapshots with bytes and checkpoints. */
class ListMachine implements StateMachine {
  values: number[] = [];
  applied = 0;
  durable = 0;
  snapshotsWithBytes = 0;
  /** The index of the last snapshot with bytes. */
  snapshotIndex = 0;
  checkpoints = 0;

  apply(entries: Entry[]): void {
    for (const e of entries) {
      if (e.type === 'normal' && e.data.byteLength > 0) this.values.push(e.data[0]!);
      this.applied = e.index;
    }
  }
  async checkpoint(): Promise<number> {
    this.checkpoints++;
    this.durable = this.applied;
    return this.durable;
  }
  async snapshot(): Promise<{ index: number; data: Uint8Array }> {
    this.snapshotsWithBytes++;
    this.snapshotIndex = this.applied;
    return { index: this.applied, data: new Uint8Array(Buffer.from(JSON.stringify(this.values))) };
  }
  async snapshotStream(): Promise<SnapshotChunks> {
    const { index, data } = await this.snapshot();
    return {
      index,
      chunks: (async function* () {
        yield data;
      })(),
    };
  }
  async restore(snap: Snapshot): Promise<void> {
    this.values = JSON.parse(Buffer.from(snap.data).toString()) as number[];
    this.applied = snap.meta.index;
  }
  async restoreStream(meta: SnapshotMeta, chunks: AsyncIterable<Uint8Array>): Promise<void> {
    const parts: Uint8Array[] = [];
    for await (const c of chunks) parts.push(c);
    await this.restore({ meta, data: Buffer.concat(parts) });
  }
}

describe('deferred snapshots', () => {
  const nodes: RaftNode[] = [];
  afterEach(async () => {
    for (const n of nodes.splice(0)) await n.stop().catch(() => undefined);
  });

  async function start(
    net: MemoryNetwork,
    id: NodeId,
    log: MemoryDurableLog,
    sm: ListMachine,
    fresh: boolean,
    stagger = false,
  ) {
    const n = await RaftNode.start({
      id,
      log,
      transport: net.join(id),
      stateMachine: sm,
      applied: sm.durable,
      peers: Object.fromEntries(IDS.map((x) => [x, `mem:${x}`])),
      ...(fresh ? { bootstrap: { voters: IDS } } : {}),
      tick_ms: TICK_MS,
      electionTicks: ELECTION_TICKS,
      snapshotEvery_entries: EVERY,
      snapshotKeep_entries: KEEP,
      snapshotDeferred: true,
      snapshotStagger: stagger,
    });
    nodes.push(n);
    return n;
  }

  it('record only the checkpointed index and compact; a lagging follower gets bytes on demand and converges', async () => {
    const net = new MemoryNetwork();
    const logs = new Map(IDS.map((id) => [id, new MemoryDurableLog()]));
    const sms = new Map(IDS.map((id) => [id, new ListMachine()]));
    for (const id of IDS) await start(net, id, logs.get(id)!, sms.get(id)!, true);
    await waitFor(() => nodes.some((n) => n.isLeader()), 10_000, 'a leader');
    const leader = nodes.find((n) => n.isLeader())!;
    for (let i = 0; i < 5 * EVERY; i++) await leader.propose(new Uint8Array([i]));
    await waitFor(() => IDS.every((id) => sms.get(id)!.values.length === 5 * EVERY), 10_000, 'every member applied');
    await waitFor(
      () => IDS.every((id) => (logs.get(id)!.snapshot()?.meta.index ?? 0) >= 4 * EVERY),
      10_000,
      'snapshots',
    );
    for (const id of IDS) {
      const snap = logs.get(id)!.snapshot()!;
      expect(snap.deferred).toBe(true);
      expect(snap.size_bytes).toBe(0);
      expect(snap.meta.index).toBeLessThanOrEqual(sms.get(id)!.durable);
      expect(logs.get(id)!.firstIndex()).toBeGreaterThan(3 * EVERY); // compacted
      expect(sms.get(id)!.snapshotsWithBytes).toBe(0); // nothing encoded
      expect(sms.get(id)!.checkpoints).toBeGreaterThanOrEqual(4);
    }

    // A follower cut off misses more than the log keeps: it can only catch up by a snapshot with bytes.
    const lagging = IDS.find((id) => id !== leader.id)!;
    net.isolate(lagging, IDS);
    const missedFrom = sms.get(lagging)!.applied;
    for (let i = 0; i < 5 * EVERY; i++) await leader.propose(new Uint8Array([100 + i]));
    const leaderLog = logs.get(leader.id)!;
    await waitFor(() => leaderLog.firstIndex() > missedFrom + 1, 10_000, 'the leader compacted past the follower');
    expect(leaderLog.snapshot()!.deferred).toBe(true);
    net.heal();
    const leaderSm = sms.get(leader.id)!;
    await waitFor(() => sms.get(lagging)!.values.length === 10 * EVERY, 5_000, 'the follower caught up');
    expect(sms.get(lagging)!.values).toEqual(leaderSm.values);
    // taken for it on demand, once, by the leader; installed by the follower as a snapshot with bytes
    expect(leaderSm.snapshotsWithBytes).toBe(1);
    expect(sms.get(lagging)!.snapshotsWithBytes).toBe(0);
    for (const id of IDS) if (id !== leader.id && id !== lagging) expect(sms.get(id)!.snapshotsWithBytes).toBe(0);
  });

  it('under steady writes, the snapshot with bytes taken for a follower is not replaced by a deferred one before it is streamed', async () => {
    const net = new MemoryNetwork();
    const logs = new Map(IDS.map((id) => [id, new MemoryDurableLog()]));
    const sms = new Map(IDS.map((id) => [id, new ListMachine()]));
    for (const id of IDS) await start(net, id, logs.get(id)!, sms.get(id)!, true, true);
    await waitFor(() => nodes.some((n) => n.isLeader()), 10_000, 'a leader');
    const leader = nodes.find((n) => n.isLeader())!;
    const lagging = IDS.find((id) => id !== leader.id)!;
    // The follower's answers arrive late, and the snapshot's chunks to it are held back (below): the stream to it
    // stays open while writes go on.
    const held: Message[] = [];
    let holding = true;
    net.filter = (m) => {
      if (holding && m.to === lagging && m.type === 'snapshot') {
        held.push(m);
        return 'drop';
      }
      return m.from === lagging && m.type.endsWith('Resp') ? 40 : 'deliver';
    };
    net.isolate(lagging, IDS);
    for (let i = 0; i < 5 * EVERY; i++) await leader.propose(new Uint8Array([i & 0xff]));
    await waitFor(() => logs.get(leader.id)!.firstIndex() > sms.get(lagging)!.applied + 1, 10_000, 'compacted');
    // Writes go on while the follower catches up: deferred snapshots fall due every EVERY entries meanwhile.
    let writing = true;
    const writers = Array.from({ length: 4 }, async () => {
      for (let i = 0; writing && i < 1_000; i++) await leader.propose(new Uint8Array([i & 0xff]));
    });
    net.heal();
    const leaderSm = sms.get(leader.id)!;
    // Deterministically, not by the writers' luck: the stream has started (its first chunk was sent), and the
    // leader applies more than EVERY entries past the snapshot taken for it before the stream may finish,
    // so a deferred snapshot falls due while it streams.
    await waitFor(() => held.length > 0, 5_000, 'the stream started');
    expect(leaderSm.snapshotsWithBytes).toBe(1);
    const dueBy = leaderSm.snapshotIndex + EVERY + 2;
    await waitFor(() => leaderSm.applied >= dueBy, 5_000, 'a deferred snapshot due during the stream');
    holding = false;
    net.deliver(held[0]!); // the leader resends any chunk after it, as it does after a loss
    await waitFor(() => sms.get(lagging)!.values.length >= 6 * EVERY, 5_000, 'the follower caught up under writes');
    writing = false;
    await Promise.all(writers);
    await waitFor(() => sms.get(lagging)!.values.length === leaderSm.values.length, 5_000, 'the follower converged');
    expect(sms.get(lagging)!.values).toEqual(leaderSm.values);
    // one pass over the state for the follower, not one per deferred snapshot falling due during its stream
    expect(leaderSm.snapshotsWithBytes).toBe(1);
  });

  it('a restart refuses a state machine behind the log deferred snapshot; one at or past it starts', async () => {
    const net = new MemoryNetwork();
    const log = new MemoryDurableLog();
    const sm = new ListMachine();
    const n = await RaftNode.start({
      id: 'a',
      log,
      transport: net.join('a'),
      stateMachine: sm,
      applied: 0,
      bootstrap: { voters: ['a'] },
      tick_ms: TICK_MS,
      electionTicks: ELECTION_TICKS,
      snapshotEvery_entries: EVERY,
      snapshotKeep_entries: KEEP,
      snapshotDeferred: true,
    });
    nodes.push(n);
    await waitFor(() => n.isLeader(), 10_000, 'leader');
    for (let i = 0; i < 2 * EVERY; i++) await n.propose(new Uint8Array([i]));
    await waitFor(() => (log.snapshot()?.meta.index ?? 0) >= EVERY, 10_000, 'a deferred snapshot');
    await n.stop();
    nodes.splice(0);
    const at = log.snapshot()!.meta.index;
    expect(log.snapshot()!.deferred).toBe(true);
    const opts = (applied: number, machine: StateMachine) => ({
      id: 'a',
      log: log.crashCopy(),
      transport: new MemoryNetwork().join('a'),
      stateMachine: machine,
      applied,
      tick_ms: TICK_MS,
      snapshotDeferred: true,
    });
    await expect(RaftNode.start(opts(at - 1, new ListMachine()))).rejects.toThrow(/behind the log's deferred snapshot/);
    const without: StateMachine = { apply() {}, snapshot: sm.snapshot.bind(sm), restore: sm.restore.bind(sm) };
    await expect(RaftNode.start(opts(at, without))).rejects.toThrow(/checkpoint/);
    const back = await RaftNode.start(opts(at, sm));
    nodes.push(back);
    await waitFor(() => back.isLeader(), 10_000, 'leader after restart');
  });
});
