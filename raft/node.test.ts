import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RaftError, RaftNode, type RaftNodeOptions, type StateMachine } from './node.js';
import type { DurableLog, PersistBatch } from './storage/durable-log.js';
import { LevelLog } from './storage/level-log.js';
import { MemoryDurableLog } from './storage/memory-durable-log.js';
import { MemoryNetwork } from './transport/memory.js';
import { WebSocketTransport } from './transport/websocket.js';
import type { Entry, NodeId, Snapshot } from './types.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Records every applied normal entry; checks the driver hands out each index exactly once, in order. */
class TestMachine implements StateMachine {
  entries: Array<{ index: number; term: number; data: string }> = [];
  applied = 0;
  restores = 0;

  apply(batch: Entry[]): void {
    for (const e of batch) {
      if (e.index !== this.applied + 1) throw new Error(`apply out of order: ${e.index} after ${this.applied}`);
      this.applied = e.index;
      if (e.type === 'normal') this.entries.push({ index: e.index, term: e.term, data: dec.decode(e.data) });
    }
  }

  async snapshot(): Promise<{ index: number; data: Uint8Array }> {
    return { index: this.applied, data: enc.encode(JSON.stringify({ applied: this.applied, entries: this.entries })) };
  }

  async restore(snap: Snapshot): Promise<void> {
    const s = JSON.parse(dec.decode(snap.data)) as { applied: number; entries: TestMachine['entries'] };
    if (s.applied !== snap.meta.index) throw new Error('snapshot index mismatch');
    this.applied = s.applied;
    this.entries = s.entries;
    this.restores++;
  }
}

class CountingLog extends MemoryDurableLog {
  persists = 0;
  persistedEntries = 0;
  override persist(batch: PersistBatch): Promise<void> {
    this.persists++;
    this.persistedEntries += batch.entries.length;
    return super.persist(batch);
  }
}

async function waitFor(cond: () => boolean, timeout_ms = 5000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Member {
  node: RaftNode;
  log: DurableLog;
  sm: TestMachine;
}

const FAST = { tick_ms: 10, electionTicks: 10, heartbeatTicks: 1 } satisfies Partial<RaftNodeOptions>;

class MemCluster {
  readonly net = new MemoryNetwork();
  readonly members = new Map<NodeId, Member>();
  readonly ids: NodeId[];

  constructor(
    ids: NodeId[],
    private readonly extra: Partial<RaftNodeOptions> = {},
  ) {
    this.ids = [...ids];
  }

  peers(): Record<NodeId, string> {
    return Object.fromEntries(this.ids.map((id) => [id, `mem:${id}`]));
  }

  async start(
    id: NodeId,
    opts: { log?: DurableLog; sm?: TestMachine; bootstrap?: boolean; extra?: Partial<RaftNodeOptions> } = {},
  ): Promise<Member> {
    const log = opts.log ?? new MemoryDurableLog(1);
    const sm = opts.sm ?? new TestMachine();
    const node = await RaftNode.start({
      id,
      log,
      transport: this.net.join(id),
      stateMachine: sm,
      applied: sm.applied,
      peers: this.peers(),
      ...(opts.bootstrap === false ? {} : { bootstrap: { voters: this.ids.filter((v) => v !== 'd') } }),
      ...FAST,
      ...this.extra,
      ...opts.extra,
    });
    const m = { node, log, sm };
    this.members.set(id, m);
    return m;
  }

  get(id: NodeId): Member {
    const m = this.members.get(id);
    if (m === undefined) throw new Error(`no member ${id}`);
    return m;
  }

  leader(): RaftNode | null {
    let best: RaftNode | null = null;
    for (const m of this.members.values()) {
      if (m.node.isLeader() && (best === null || m.node.status().term > best.status().term)) best = m.node;
    }
    return best;
  }

  async waitLeader(timeout_ms = 5000): Promise<RaftNode> {
    await waitFor(() => this.leader() !== null, timeout_ms, 'a leader');
    return this.leader()!;
  }

  /** Crash: the node vanishes; returns a log holding only what it had made durable. */
  async crash(id: NodeId): Promise<MemoryDurableLog> {
    const m = this.get(id);
    const durable = (m.log as MemoryDurableLog).crashCopy();
    await m.node.kill();
    this.members.delete(id);
    return durable;
  }

  async stopAll(): Promise<void> {
    for (const m of this.members.values()) await m.node.stop();
    this.members.clear();
  }
}

/** Proposes on whichever node leads until `count` proposals were acknowledged; returns the acknowledged ones. */
async function proposeMany(
  cluster: { leader(): RaftNode | null },
  prefix: string,
  count: number,
  concurrency: number,
  deadline_ms = 10_000,
): Promise<Map<number, { term: number; data: string }>> {
  const acked = new Map<number, { term: number; data: string }>();
  let next = 0;
  const end = Date.now() + deadline_ms;
  const worker = async (): Promise<void> => {
    while (acked.size < count && Date.now() < end) {
      const leader = cluster.leader();
      if (leader === null) {
        await sleep(5);
        continue;
      }
      const data = `${prefix}-${next++}`;
      try {
        const r = await leader.propose(enc.encode(data));
        acked.set(r.index, { term: r.term, data });
      } catch {
        await sleep(2);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  if (acked.size < count) throw new Error(`only ${acked.size} of ${count} proposals acknowledged`);
  return acked;
}

function expectAllApplied(members: Iterable<Member>, acked: Map<number, { term: number; data: string }>): void {
  for (const m of members) {
    const byIndex = new Map(m.sm.entries.map((e) => [e.index, e]));
    for (const [index, want] of acked) {
      const got = byIndex.get(index);
      expect(got, `${m.node.id} lost acknowledged entry ${index}`).toEqual({ index, term: want.term, data: want.data });
    }
  }
}

function expectSameHistory(members: Member[]): void {
  const first = members[0]!.sm.entries;
  for (const m of members.slice(1)) expect(m.sm.entries).toEqual(first);
  const datas = first.map((e) => e.data);
  expect(new Set(datas).size, 'an entry was applied twice').toBe(datas.length);
}

async function converge(members: Member[], timeout_ms = 8000): Promise<void> {
  await waitFor(
    () => {
      const applied = members.map((m) => m.sm.applied);
      const leader = members.find((m) => m.node.isLeader());
      return leader !== undefined && applied.every((a) => a === leader.node.status().commit && a > 0);
    },
    timeout_ms,
    'all members to apply the same index',
  );
}

let cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanup.reverse()) await fn();
  cleanup = [];
});

describe('RaftNode over the in-memory transport', () => {
  it('elects a leader, replicates, and answers linearizable reads on every member', async () => {
    const c = new MemCluster(['a', 'b', 'c']);
    cleanup.push(() => c.stopAll());
    for (const id of c.ids) await c.start(id);
    const leader = await c.waitLeader();
    const follower = [...c.members.values()].find((m) => m.node !== leader)!;
    await expect(follower.node.propose(enc.encode('x'))).rejects.toMatchObject({ code: 'not-leader' });

    const r = await leader.propose(enc.encode('hello'));
    expect(r.index).toBeGreaterThan(0);
    const readAt = await follower.node.readIndex();
    expect(readAt).toBeGreaterThanOrEqual(r.index);
    expect(follower.sm.entries.map((e) => e.data)).toContain('hello');
    await converge([...c.members.values()]);
    expectSameHistory([...c.members.values()]);
    const st = leader.status();
    expect(st.role).toBe('leader');
    expect(st.conf.voters.sort()).toEqual(['a', 'b', 'c']);
  });

  it('group-commits concurrent proposals into few synced writes', async () => {
    const c = new MemCluster(['a', 'b', 'c']);
    cleanup.push(() => c.stopAll());
    const logs = new Map(c.ids.map((id) => [id, new CountingLog(2)]));
    for (const id of c.ids) await c.start(id, { log: logs.get(id)! });
    const leader = await c.waitLeader();
    const log = logs.get(leader.id)!;
    const before = { persists: log.persists, entries: log.persistedEntries };
    const results = await Promise.all(Array.from({ length: 300 }, (_, i) => leader.propose(enc.encode(`g${i}`))));
    const indexes = results.map((r) => r.index);
    expect(new Set(indexes).size).toBe(300);
    expect(log.persistedEntries - before.entries).toBeGreaterThanOrEqual(300);
    // 300 proposals issued together must share synced writes (far fewer than one per proposal).
    expect(log.persists - before.persists).toBeLessThan(30);
  });

  it('bounds pending proposals and rejects them when the node stops', async () => {
    const c = new MemCluster(['a', 'b', 'c'], { maxPendingProposals: 10 });
    cleanup.push(() => c.stopAll());
    for (const id of c.ids) await c.start(id);
    const leader = await c.waitLeader();
    const pending = Array.from({ length: 10 }, (_, i) => leader.propose(enc.encode(`p${i}`)));
    await expect(leader.propose(enc.encode('over'))).rejects.toMatchObject({ code: 'too-many-pending' });
    await Promise.all(pending);
    // Cut the leader off: its proposals cannot commit; stopping rejects them.
    c.net.isolate(leader.id, c.ids);
    const stuck = leader.propose(enc.encode('stuck'));
    const id = leader.id;
    await c.get(id).node.stop();
    c.members.delete(id);
    const err = await stuck.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(RaftError);
    expect(['stopped', 'leadership-lost']).toContain((err as RaftError).code);
  });

  it('rejects proposals of a leader cut off from its quorum, and reads without a leader time out', async () => {
    const c = new MemCluster(['a', 'b', 'c'], { readTimeout_ms: 150 });
    cleanup.push(() => c.stopAll());
    for (const id of c.ids) await c.start(id);
    const leader = await c.waitLeader();
    await leader.propose(enc.encode('ok'));
    c.net.isolate(leader.id, c.ids);
    const cut = leader.propose(enc.encode('cut-off'));
    // Check-quorum makes the isolated leader step down; its uncommitted proposal's fate is unknown to it.
    await expect(cut).rejects.toMatchObject({ code: 'leadership-lost' });
    expect(leader.isLeader()).toBe(false);
    await expect(leader.readIndex()).rejects.toMatchObject({ code: 'timeout' });
    // The majority side elected another leader meanwhile and keeps working.
    const other = c.ids.find((id) => id !== leader.id)!;
    await waitFor(() => c.leader() !== null && c.leader()!.id !== leader.id, 3000, 'a new leader');
    await c.leader()!.propose(enc.encode('after'));
    expect(await c.get(other).node.readIndex()).toBeGreaterThan(0);
    c.net.heal();
    await converge([...c.members.values()]);
    // The cut-off entry was overwritten by the new leader's log: nobody applied it.
    for (const m of c.members.values()) expect(m.sm.entries.map((e) => e.data)).not.toContain('cut-off');
  });

  it('transfers leadership, and stop() hands leadership over before leaving', async () => {
    const c = new MemCluster(['a', 'b', 'c']);
    cleanup.push(() => c.stopAll());
    for (const id of c.ids) await c.start(id);
    const leader = await c.waitLeader();
    await leader.propose(enc.encode('before'));
    const target = c.ids.find((id) => id !== leader.id)!;
    const changes: Array<NodeId | null> = [];
    c.get(target).node.onLeaderChange((l) => changes.push(l));
    await leader.transferLeadership(target);
    await waitFor(() => c.get(target).node.isLeader(), 3000, 'target to lead');
    expect(changes).toContain(target);
    await c.get(target).node.propose(enc.encode('after'));

    const t0 = Date.now();
    await c.get(target).node.stop({ transferLeadership: true });
    c.members.delete(target);
    await c.waitLeader();
    // A handed-over leadership is faster than waiting out an election timeout after a silent leader.
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  it('heals a partitioned follower without disturbing the leader', async () => {
    const c = new MemCluster(['a', 'b', 'c']);
    cleanup.push(() => c.stopAll());
    for (const id of c.ids) await c.start(id);
    const leader = await c.waitLeader();
    const term = leader.status().term;
    const lonely = c.ids.find((id) => id !== leader.id)!;
    c.net.isolate(lonely, c.ids);
    const acked = await proposeMany(c, 'part', 40, 4);
    await sleep(400); // several election timeouts for the isolated follower
    expect(c.get(lonely).sm.applied).toBeLessThan(leader.status().commit);
    c.net.heal();
    await converge([...c.members.values()]);
    expectAllApplied(c.members.values(), acked);
    // Pre-vote: the returning follower did not force a new term on the cluster.
    expect(leader.isLeader()).toBe(true);
    expect(leader.status().term).toBe(term);
  });

  for (const leaderSendsBeforePersist of [false, true]) {
    const mode = leaderSendsBeforePersist ? ', leader sending before persisting' : '';
    it(`never loses an acknowledged entry across crashes at arbitrary points (incl. mid-persist)${mode}`, async () => {
      const c = new MemCluster(['a', 'b', 'c'], {
        snapshotEvery_entries: 25,
        snapshotKeep_entries: 5,
        leaderSendsBeforePersist,
      });
      cleanup.push(() => c.stopAll());
      // Network latency of 0–2 ms, so crashes also land while messages are in flight (and lose them).
      let jitter = 0;
      c.net.filter = () => jitter++ % 3;
      for (const id of c.ids) await c.start(id);
      await c.waitLeader();
      const acked = new Map<number, { term: number; data: string }>();
      let stop = false;
      let seq = 0;
      const load = (async () => {
        const workers = Array.from({ length: 8 }, async () => {
          while (!stop) {
            const leader = c.leader();
            if (leader === null) {
              await sleep(3);
              continue;
            }
            const data = `crash-${seq++}`;
            try {
              const r = await leader.propose(enc.encode(data));
              acked.set(r.index, { term: r.term, data });
            } catch {
              await sleep(1);
            }
          }
        });
        await Promise.all(workers);
      })();
      let rnd = 12345;
      const next = (n: number): number => {
        rnd = (rnd * 1103515245 + 12345) % 2 ** 31;
        return rnd % n;
      };
      const rounds = 12;
      for (let round = 0; round < rounds; round++) {
        await sleep(20 + next(60));
        // Alternate between the leader and a random member; the crash lands wherever the node happens to be.
        const leader = c.leader();
        const victim = round % 2 === 0 && leader !== null ? leader.id : c.ids[next(3)]!;
        if (!c.members.has(victim)) continue;
        const durable = await c.crash(victim);
        await sleep(next(50));
        // Restart with a fresh state machine: it is rebuilt from the log's snapshot and entries.
        await c.start(victim, { log: durable });
      }
      await c.waitLeader();
      const before = acked.size;
      // Progress after the last restart, and enough acknowledged entries overall, however slow the machine is.
      await waitFor(() => acked.size > Math.max(before + 20, 100), 15_000, 'progress after the last restart');
      stop = true;
      await load;
      const members = [...c.members.values()];
      await converge(members);
      expect(acked.size).toBeGreaterThan(100); // guaranteed by the wait above; guards the test's own premise
      expectAllApplied(members, acked);
      expectSameHistory(members);
      expect(members.some((m) => m.sm.restores > 0 || (m.log.snapshot()?.meta.index ?? 0) > 0)).toBe(true);
    }, 30_000);
  }

  it('a new member that replays the whole log from index 1 learns the initial membership from it', async () => {
    // No compaction: the joiner gets every entry, starting with the bootstrap conf entries.
    const c = new MemCluster(['a', 'b', 'c', 'd'], { snapshotEvery_entries: 0 });
    cleanup.push(() => c.stopAll());
    for (const id of ['a', 'b', 'c']) await c.start(id);
    await c.waitLeader();
    const acked = await proposeMany(c, 'pre', 30, 4);
    const leader = c.leader()!;
    expect(leader.status().firstIndex).toBe(1);
    const d = await c.start('d', { bootstrap: false });
    await leader.addLearner('d', 'mem:d');
    await waitFor(() => d.sm.applied >= leader.status().commit, 5000, 'learner catch-up by replay');
    expect(d.sm.restores).toBe(0);
    expect(d.node.status().conf.voters.sort()).toEqual(['a', 'b', 'c']);
    expect(d.node.status().conf.learners).toEqual(['d']);
    // the bootstrap entries carried the initial voters' addresses
    expect(d.log.appliedConf().addresses).toMatchObject({ a: 'mem:a', b: 'mem:b', c: 'mem:c', d: 'mem:d' });
    await leader.promote('d');
    const more = await proposeMany(c, 'post', 10, 2);
    await converge([...c.members.values()]);
    expectAllApplied(c.members.values(), new Map([...acked, ...more]));
  }, 20_000);

  it('catches up a new learner by snapshot, then promotes it to voter', async () => {
    const c = new MemCluster(['a', 'b', 'c', 'd'], { snapshotEvery_entries: 20, snapshotKeep_entries: 5 });
    cleanup.push(() => c.stopAll());
    for (const id of ['a', 'b', 'c']) await c.start(id);
    await c.waitLeader();
    const acked = await proposeMany(c, 'pre', 80, 8);
    const leader = c.leader()!;
    expect(leader.status().firstIndex).toBeGreaterThan(1); // compacted: d cannot be served from the log
    const d = await c.start('d', { bootstrap: false });
    await leader.addLearner('d', 'mem:d');
    await waitFor(() => d.sm.applied >= leader.status().commit, 5000, 'learner catch-up');
    expect(d.sm.restores).toBe(1);
    expect(leader.status().conf.learners).toEqual(['d']);
    await leader.promote('d');
    expect(leader.status().conf.voters.sort()).toEqual(['a', 'b', 'c', 'd']);
    const more = await proposeMany(c, 'post', 10, 2);
    await converge([...c.members.values()]);
    expectAllApplied(c.members.values(), new Map([...acked, ...more]));
    // The new member's address travelled in the conf change: every member knows it now.
    for (const id of ['a', 'b', 'c']) expect(c.get(id).log.appliedConf().addresses.d).toBe('mem:d');
    // And removal works too.
    await c.leader()!.removeNode('d');
    expect(c.leader()!.status().conf.voters.sort()).toEqual(['a', 'b', 'c']);
  }, 20_000);
});

describe('RaftNode with LevelDB logs copied mid-write', () => {
  it('loses no acknowledged entry when a node restarts from a disk image taken at an arbitrary instant', async () => {
    const base = mkdtempSync(join(tmpdir(), 'keel-raft-crash-'));
    const c = new MemCluster(['a', 'b', 'c'], { snapshotEvery_entries: 30, snapshotKeep_entries: 5 });
    let jitter = 0;
    c.net.filter = () => jitter++ % 3;
    const closing: Promise<void>[] = [];
    cleanup.push(async () => {
      await c.stopAll();
      await Promise.all(closing);
      rmSync(base, { recursive: true, force: true });
    });
    for (const id of c.ids) await c.start(id, { log: await LevelLog.open(join(base, `${id}-0`)) });
    await c.waitLeader();
    const acked = new Map<number, { term: number; data: string }>();
    let stop = false;
    let seq = 0;
    const load = Promise.all(
      Array.from({ length: 6 }, async () => {
        while (!stop) {
          const leader = c.leader();
          if (leader === null) {
            await sleep(3);
            continue;
          }
          const data = `disk-${seq++}`;
          try {
            const r = await leader.propose(enc.encode(data));
            acked.set(r.index, { term: r.term, data });
          } catch {
            await sleep(1);
          }
        }
      }),
    );
    for (let round = 1; round <= 8; round++) {
      await sleep(25 + ((round * 37) % 50));
      const leader = c.leader();
      const victim = round % 2 === 1 && leader !== null ? leader.id : c.ids[round % 3]!;
      const m = c.members.get(victim);
      if (m === undefined) continue;
      // The disk image at this instant: LevelDB may be in the middle of writing (or fsyncing) a batch. The
      // copy holds every write that completed before it, and possibly a torn tail that recovery drops.
      const image = join(base, `${victim}-${round}`);
      cpSync((m.log as LevelLog).path, image, { recursive: true });
      void m.node.kill();
      c.members.delete(victim);
      closing.push(m.node.idle().then(() => m.log.close()));
      await sleep((round * 13) % 30);
      await c.start(victim, { log: await LevelLog.open(image) });
    }
    await c.waitLeader();
    const before = acked.size;
    await waitFor(() => acked.size > Math.max(before + 10, 50), 15_000, 'progress after the last restart');
    stop = true;
    await load;
    const members = [...c.members.values()];
    await converge(members);
    expect(acked.size).toBeGreaterThan(50);
    expectAllApplied(members, acked);
    expectSameHistory(members);
  }, 30_000);
});

describe('RaftNode over WebSockets with LevelDB logs', () => {
  it('replicates, survives restarts, catches up a learner by snapshot and hands it leadership', async () => {
    const base = mkdtempSync(join(tmpdir(), 'keel-raft-node-'));
    const ids = ['a', 'b', 'c'];
    const all4 = [...ids, 'd'];
    const members = new Map<NodeId, Member & { transport: WebSocketTransport }>();
    const ports = new Map<NodeId, number>();
    const addresses: Record<NodeId, string> = {};
    // Reserve ports by listening once; restarts reuse them.
    const probes = all4.map((id) => new WebSocketTransport({ id, clusterId: 't', ping_ms: 0 }));
    for (const [i, t] of probes.entries()) {
      const addr = await t.listen(0);
      ports.set(all4[i]!, Number(addr.split(':')[1]));
      if (i < ids.length) addresses[all4[i]!] = addr;
      await t.close();
    }
    const start = async (id: NodeId, joining = false): Promise<void> => {
      const log = await LevelLog.open(join(base, id));
      const transport = new WebSocketTransport({
        id,
        clusterId: 'test-cluster',
        backoff: { min_ms: 10, max_ms: 100 },
        ping_ms: 1000,
      });
      await transport.listen(ports.get(id)!);
      const sm = new TestMachine();
      const node = await RaftNode.start({
        id,
        log,
        transport,
        stateMachine: sm,
        applied: 0,
        peers: joining ? { ...addresses, [id]: `127.0.0.1:${ports.get(id)}` } : addresses,
        ...(joining ? {} : { bootstrap: { voters: ids } }),
        tick_ms: 20,
        electionTicks: 10,
        snapshotEvery_entries: 40,
        snapshotKeep_entries: 10,
      });
      members.set(id, { node, log, sm, transport });
    };
    const crash = async (id: NodeId): Promise<void> => {
      const m = members.get(id)!;
      members.delete(id);
      await m.node.kill();
      await m.node.idle();
      await m.log.close();
    };
    const cluster = {
      leader: (): RaftNode | null => [...members.values()].find((m) => m.node.isLeader())?.node ?? null,
    };
    cleanup.push(async () => {
      for (const m of members.values()) await m.node.stop();
      rmSync(base, { recursive: true, force: true });
    });

    for (const id of ids) await start(id);
    await waitFor(() => cluster.leader() !== null, 8000, 'a leader');
    const acked = await proposeMany(cluster, 'ws1', 60, 8);

    const follower = ids.find((id) => id !== cluster.leader()!.id)!;
    await crash(follower);
    const more = await proposeMany(cluster, 'ws2', 60, 8);
    await start(follower);

    const oldLeader = cluster.leader()!.id;
    const load = proposeMany(cluster, 'ws3', 80, 8, 20_000);
    await sleep(30);
    await crash(oldLeader); // mid-load: some proposals are in flight, some mid-persist
    await waitFor(() => cluster.leader() !== null, 8000, 'a new leader');
    const evenMore = await load;
    await start(oldLeader);
    const all = new Map([...acked, ...more, ...evenMore]);
    let list = [...members.values()];
    await converge(list, 10_000);
    expectAllApplied(list, all);
    expectSameHistory(list);

    // A new member: it learns the others' addresses from its configuration, they learn its address from the
    // conf change; the log is compacted, so it is caught up by a snapshot streamed over the WebSocket.
    await start('d', true);
    const leader = cluster.leader()!;
    expect(leader.status().firstIndex).toBeGreaterThan(1);
    await leader.addLearner('d', `127.0.0.1:${ports.get('d')}`);
    const d = members.get('d')!;
    await waitFor(() => d.sm.applied >= leader.status().commit, 8000, 'the learner to catch up');
    expect(d.sm.restores).toBeGreaterThanOrEqual(1);
    await leader.promote('d');
    // d must know it is a voter before it can take over (a learner ignores timeoutNow).
    await waitFor(() => d.node.status().conf.voters.includes('d'), 3000, 'd to apply its promotion');
    await leader.transferLeadership('d', 3000);
    await waitFor(() => d.node.isLeader(), 5000, 'd to lead');
    const last = await proposeMany(cluster, 'ws4', 20, 4);
    list = [...members.values()];
    await converge(list, 10_000);
    expectAllApplied(list, new Map([...all, ...last]));
    expectSameHistory(list);
    await waitFor(
      () => list.every((m) => m.transport.peers().every((p) => p.state === 'connected')),
      3000,
      'every peer connection to be re-established',
    );
    for (const m of list)
      expect(
        m.transport
          .peers()
          .map((p) => p.id)
          .sort(),
      ).toEqual(all4.filter((x) => x !== m.node.id));
  }, 40_000);
});
