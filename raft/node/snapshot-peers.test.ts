import { afterEach, describe, expect, it } from 'vitest';
import { RaftNode } from '../node.js';
import { MemoryDurableLog } from '../storage/memory-durable-log.js';
import { MemoryNetwork, type MemoryTransport } from '../transport/memory.js';
import type { Entry, Snapshot } from '../types.js';
import { waitFor } from './wait-testkit.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

class Machine {
  applied = 0;
  restores = 0;
  entries: string[] = [];
  apply(batch: Entry[]): void {
    for (const e of batch) {
      this.applied = e.index;
      if (e.type === 'normal') this.entries.push(dec.decode(e.data));
    }
  }
  async snapshot(): Promise<{ index: number; data: Uint8Array }> {
    return { index: this.applied, data: enc.encode(JSON.stringify({ a: this.applied, e: this.entries })) };
  }
  async restore(s: Snapshot): Promise<void> {
    const o = JSON.parse(dec.decode(s.data)) as { a: number; e: string[] };
    this.applied = o.a;
    this.entries = o.e;
    this.restores++;
  }
}

interface Member {
  node: RaftNode;
  sm: Machine;
  log: MemoryDurableLog;
  t: MemoryTransport;
}

const FAST = { tick_ms: 10, electionTicks: 10, heartbeatTicks: 1, snapshotEvery_entries: 20, snapshotKeep_entries: 5 };

describe('a snapshot carries its members’ addresses, and sets the peers of the node that installs it', () => {
  const running: RaftNode[] = [];
  afterEach(async () => {
    for (const n of running.splice(0)) await n.stop().catch(() => {});
  });

  async function cluster(ids: string[]) {
    const net = new MemoryNetwork();
    const members = new Map<string, Member>();
    const addresses = Object.fromEntries(ids.map((id) => [id, `mem:${id}`]));
    const start = async (id: string, peers: Record<string, string>, bootstrap: boolean, log?: MemoryDurableLog) => {
      const sm = new Machine();
      const l = log ?? new MemoryDurableLog(1);
      const t = net.join(id);
      const node = await RaftNode.start({
        id,
        log: l,
        transport: t,
        stateMachine: sm,
        applied: 0,
        peers,
        ...(bootstrap ? { bootstrap: { voters: ids } } : {}),
        ...FAST,
      });
      running.push(node);
      const m = { node, sm, log: l, t };
      members.set(id, m);
      return m;
    };
    for (const id of ids) await start(id, addresses, true);
    const leader = () => [...members.values()].find((m) => m.node.isLeader())?.node;
    await waitFor(() => leader() !== undefined, 5_000, 'a leader');
    return { net, members, start, leader: () => leader()! };
  }

  it('a member that catches up by snapshot learns every member’s address and reaches them after a restart', async () => {
    const c = await cluster(['a', 'b', 'c']);
    // more entries than the leader keeps: the new member can only catch up by snapshot
    for (let i = 0; i < 80; i++) await c.leader().propose(enc.encode(`w${i}`));
    expect(c.leader().status().firstIndex).toBeGreaterThan(1);
    // a joiner as a cluster member starts one: it knows itself and the members it was told of (in memory only)
    const d = await c.start('d', { a: 'mem:a', b: 'mem:b', c: 'mem:c', d: 'mem:d' }, false);
    await c.leader().addLearner('d', 'mem:d');
    await waitFor(() => d.sm.applied >= c.leader().status().commit, 5_000, 'd to catch up');
    expect(d.sm.restores).toBeGreaterThan(0);
    expect(d.log.appliedConf().addresses).toEqual({ a: 'mem:a', b: 'mem:b', c: 'mem:c', d: 'mem:d' });

    // restarted with nothing but its own address (no --join any more): its log names its peers
    const durable = d.log.crashCopy();
    await d.node.kill();
    const t2 = c.net.join('d');
    const d2 = await RaftNode.start({
      id: 'd',
      log: durable,
      transport: t2,
      stateMachine: d.sm,
      applied: d.sm.applied,
      peers: { d: 'mem:d' },
      ...FAST,
    });
    running.push(d2);
    expect(
      t2
        .peers()
        .map((p) => p.id)
        .sort(),
    ).toEqual(['a', 'b', 'c']);
    await c.leader().propose(enc.encode('after the restart'));
    await waitFor(() => d.sm.entries.at(-1) === 'after the restart', 5_000, 'd to apply a new entry');
  });

  it('a member removed by entries a follower only gets by snapshot is no longer that follower’s peer', async () => {
    const ids = ['a', 'b', 'c', 'd'];
    const c = await cluster(ids);
    const leader = c.leader();
    const [f, r] = ids.filter((id) => id !== leader.id);
    // f is cut off while r is removed and the log moves past what the leader keeps
    c.net.isolate(f!, ids);
    await leader.removeNode(r!);
    for (let i = 0; i < 80; i++) await c.leader().propose(enc.encode(`w${i}`));
    const follower = c.members.get(f!)!;
    expect(follower.t.peers().map((p) => p.id)).toContain(r);
    c.net.heal();
    c.net.isolate(r!, ids);
    await waitFor(() => follower.sm.applied >= c.leader().status().commit, 5_000, `${f} to catch up`);
    expect(follower.sm.restores).toBeGreaterThan(0);
    // the transport refuses a connection from an id that is not one of its peers (the WebSocket handshake)
    expect(follower.t.peers().map((p) => p.id)).not.toContain(r);
    expect(Object.keys(follower.log.appliedConf().addresses)).not.toContain(r);
  });
});
