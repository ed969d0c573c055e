/**
 * A snapshot that takes long (millions of rows) is written while the node goes on persisting, sending and applying:
 * the leader's heartbeats keep flowing, so no election happens however long it takes, and entries committed
 * meanwhile are applied (the state machine captured its state when the snapshot started); the snapshot is recorded
 * at the index it was captured at.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RaftNode } from '../node.js';
import { MemoryDurableLog } from '../storage/memory-durable-log.js';
import { MemoryNetwork } from '../transport/memory.js';
import type { Entry, NodeId, SnapshotMeta } from '../types.js';
import type { SnapshotChunks, StateMachine } from './state-machine.js';
import { waitFor } from './wait-testkit.js';

const IDS: NodeId[] = ['a', 'b', 'c'];
const TICK_MS = 10;
const ELECTION_TICKS = 10;

/** Counts applied entries; its snapshot stream stalls until `release()` (a long snapshot). */
class SlowSnapshotMachine implements StateMachine {
  applied = 0;
  /** Entries applied while a snapshot was being read. */
  appliedDuringSnapshot = 0;
  /** The applied index the last snapshot was captured at. */
  capturedAt = -1;
  snapshots = 0;
  reading = false;
  private gate: Promise<void> = new Promise(() => {});
  private open: () => void = () => {};

  hold(): void {
    this.gate = new Promise((r) => (this.open = r));
  }
  release(): void {
    this.open();
  }
  apply(entries: Entry[]): void {
    if (this.reading) this.appliedDuringSnapshot += entries.length;
    this.applied = entries[entries.length - 1]?.index ?? this.applied;
  }
  snapshot(): Promise<{ index: number; data: Uint8Array }> {
    throw new Error('streaming only');
  }
  async restore(): Promise<void> {
    throw new Error('streaming only');
  }
  async snapshotStream(): Promise<SnapshotChunks> {
    const index = this.applied;
    this.capturedAt = index;
    const self = this;
    async function* chunks(): AsyncGenerator<Uint8Array> {
      self.reading = true;
      try {
        yield new Uint8Array([1, 2, 3]);
        await self.gate;
        yield new Uint8Array([4]);
      } finally {
        self.reading = false;
        self.snapshots++;
      }
    }
    return { index, chunks: chunks() };
  }
  async restoreStream(meta: SnapshotMeta, chunks: AsyncIterable<Uint8Array>): Promise<void> {
    for await (const _ of chunks) {
      // the bytes carry nothing this machine needs
    }
    this.applied = meta.index;
  }
}

describe('a long snapshot', () => {
  const nodes: RaftNode[] = [];
  const machines = new Map<NodeId, SlowSnapshotMachine>();
  afterEach(async () => {
    for (const m of machines.values()) m.release();
    machines.clear();
    for (const n of nodes.splice(0)) await n.stop().catch(() => undefined);
  });

  it('does not silence the leader: no election while it is written; entries committed meanwhile apply after', async () => {
    const net = new MemoryNetwork();
    for (const id of IDS) {
      const sm = new SlowSnapshotMachine();
      sm.hold();
      machines.set(id, sm);
      nodes.push(
        await RaftNode.start({
          id,
          log: new MemoryDurableLog(),
          transport: net.join(id),
          stateMachine: sm,
          applied: 0,
          peers: Object.fromEntries(IDS.map((x) => [x, `mem:${x}`])),
          bootstrap: { voters: IDS },
          tick_ms: TICK_MS,
          electionTicks: ELECTION_TICKS,
          snapshotEvery_entries: 10,
          snapshotKeep_entries: 2,
        }),
      );
    }
    await waitFor(() => nodes.some((n) => n.isLeader()), 10_000, 'a leader');
    const leader = nodes.find((n) => n.isLeader())!;
    const sm = machines.get(leader.id)!;
    const term = leader.status().term;
    // Enough entries for every member to start a snapshot, which then stalls (bootstrap entries count too).
    const before = Array.from({ length: 10 }, (_, i) => leader.propose(new Uint8Array([i])));
    await waitFor(() => [...machines.values()].every((m) => m.reading), 10_000, 'every member reading a snapshot');
    // While the snapshots stall, the leader goes on committing and applying, and every member keeps its leader.
    const during = await leader.propose(new Uint8Array([99]));
    const stalled_ms = 6 * ELECTION_TICKS * TICK_MS;
    await new Promise((r) => setTimeout(r, stalled_ms));
    expect(leader.isLeader()).toBe(true);
    for (const n of nodes) expect(n.status().term).toBe(term);
    expect(during.index).toBeGreaterThan(10);
    expect(sm.applied).toBeGreaterThanOrEqual(during.index);
    expect(sm.appliedDuringSnapshot).toBeGreaterThan(0);
    expect(leader.status().snapshotIndex).toBe(0);
    for (const m of machines.values()) m.release();
    await Promise.all(before);
    await waitFor(() => leader.status().snapshotIndex > 0, 10_000, 'the snapshot');
    // recorded at the index it was captured at, not at the one applied when it was written
    expect(leader.status().snapshotIndex).toBe(sm.capturedAt);
    expect(sm.capturedAt).toBeGreaterThanOrEqual(10);
    expect(sm.capturedAt).toBeLessThan(during.index);
  });
});
