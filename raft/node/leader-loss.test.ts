/**
 * A follower whose transport has lost its connection to the leader (kill -9 of the leader's process closes its
 * sockets at once) stops waiting for it: a new leader is elected within a few ticks, well before the election
 * timeout would have elapsed. A leader that is alive keeps its followers.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RaftNode } from '../node.js';
import { MemoryDurableLog } from '../storage/memory-durable-log.js';
import { MemoryNetwork } from '../transport/memory.js';
import type { PeerStats, Transport } from '../transport/transport.js';
import type { Entry, NodeId } from '../types.js';
import type { StateMachine } from './state-machine.js';
import { waitFor } from './wait-testkit.js';

const IDS: NodeId[] = ['a', 'b', 'c'];
const TICK_MS = 10;
/** A long election timeout (1–2 s), so an election within a few ticks can only come from the leader loss. */
const ELECTION_TICKS = 100;

class Counter implements StateMachine {
  applied = 0;
  apply(entries: Entry[]): void {
    this.applied = entries[entries.length - 1]?.index ?? this.applied;
  }
  async snapshot(): Promise<{ index: number; data: Uint8Array }> {
    return { index: this.applied, data: new Uint8Array(0) };
  }
  async restore(): Promise<void> {}
}

/** The memory transport, reporting the connection to each member of `down` as lost (as a socket would). */
function withDown(t: Transport, down: Set<NodeId>): Transport {
  return new Proxy(t, {
    get(target, prop, receiver) {
      if (prop === 'peers') {
        return (): PeerStats[] => target.peers().map((p) => (down.has(p.id) ? { ...p, state: 'waiting' as const } : p));
      }
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

describe('a follower that lost its connection to the leader', () => {
  const nodes = new Map<NodeId, RaftNode>();
  afterEach(async () => {
    for (const n of nodes.values()) await n.stop().catch(() => undefined);
    nodes.clear();
  });

  async function cluster(down: Set<NodeId>): Promise<RaftNode> {
    const net = new MemoryNetwork();
    for (const id of IDS) {
      const node = await RaftNode.start({
        id,
        log: new MemoryDurableLog(),
        transport: withDown(net.join(id), down),
        stateMachine: new Counter(),
        applied: 0,
        peers: Object.fromEntries(IDS.map((x) => [x, `mem:${x}`])),
        bootstrap: { voters: IDS },
        tick_ms: TICK_MS,
        electionTicks: ELECTION_TICKS,
      });
      nodes.set(id, node);
    }
    await waitFor(() => [...nodes.values()].some((n) => n.isLeader()), 10_000, 'a first leader');
    const leader = [...nodes.values()].find((n) => n.isLeader())!;
    await leader.propose(new Uint8Array([1]));
    return leader;
  }

  it('elects a new leader within a few ticks, long before an election timeout', async () => {
    const down = new Set<NodeId>();
    const leader = await cluster(down);
    const survivors = [...nodes.values()].filter((n) => n !== leader);
    const before = survivors[0]!.status().term;
    await leader.kill();
    nodes.delete(leader.id);
    down.add(leader.id);
    // Counted in ticks, not milliseconds: a clock of the nodes' own period, run by the same loaded event loop, so a
    // slow machine stretches both alike (a wall-clock bound of 0.8 s could fail under load).
    let ticks = 0;
    const ticker = setInterval(() => ticks++, TICK_MS);
    try {
      await waitFor(() => survivors.some((n) => n.isLeader()), 10_000, 'a new leader');
    } finally {
      clearInterval(ticker);
    }
    // Detection (2 ticks) + at most 4 ticks of delay + the election: some 10 ticks, against ≥ 100 without it.
    expect(ticks).toBeLessThan(ELECTION_TICKS * 0.8);
    const next = survivors.find((n) => n.isLeader())!;
    expect(next.status().term).toBe(before + 1);
    await next.propose(new Uint8Array([2]));
  });

  it('keeps a live leader: no election while its connections are open', async () => {
    const leader = await cluster(new Set());
    const term = leader.status().term;
    await new Promise((r) => setTimeout(r, 30 * TICK_MS));
    expect(leader.isLeader()).toBe(true);
    expect(leader.status().term).toBe(term);
  });
});
