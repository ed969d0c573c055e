/** RaftProposer and the leader's acceptance check, against a scripted Raft node (no network, no disk for Raft). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type Entry, MemoryDurableLog, MemoryNetwork, RaftError, RaftNode } from '../../raft/index.js';
import { decodeLogged, encodeLogged, encodeLoggedBytes } from '../../src/cluster/codec.js';
import type { ForwardResult } from '../../src/cluster/peer-api.js';
import { proposeOnLeader, RaftProposer, type RaftProposerOptions } from '../../src/cluster/raft-proposer.js';
import { StoreStateMachine } from '../../src/cluster/state-machine.js';
import { encodeCommand } from '../../storage/command-codec.js';
import { ProposalError } from '../../storage/proposer.js';
import { Schema } from '../../storage/schema.js';
import { Store } from '../../storage/store.js';
import { create, defs } from '../support/store-defs.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
async function store(): Promise<Store> {
  const d = mkdtempSync(join(tmpdir(), 'keel-prop-'));
  dirs.push(d);
  return Store.open(d, new Schema(defs));
}

/** A node whose propose() is scripted; `leaderId()` as given. */
/** The term this node sees, and what its read barrier does. */
const raftState = { term: 1, readIndex: async () => 0 };

/** A node whose propose() is scripted; `leaderId()` as given, the term and read barrier from raftState. */
function fakeNode(leader: () => string | null, propose: (data: Uint8Array) => Promise<unknown>): RaftNode {
  return {
    id: 'me',
    leaderId: leader,
    propose,
    term: () => raftState.term,
    readIndex: () => raftState.readIndex(),
  } as unknown as RaftNode;
}

/** A proposer on a node that is never the leader (its own propose() refuses), forwarding with `forward`. */
function follower(
  leader: () => string | null,
  sm: StoreStateMachine,
  forward: (to: string, term: number, data: Uint8Array) => Promise<ForwardResult>,
  opts: RaftProposerOptions = OPTS,
): RaftProposer {
  return new RaftProposer(
    fakeNode(leader, () => Promise.reject(new Error('not the leader here'))),
    sm,
    forward,
    undefined,
    opts,
  );
}

const OPTS = { leaderWait_ms: 300, applyTimeout_ms: 300, maxAttempts: 20 };

/** A leader whose offer() answers each item with `answer(i)` (null: appended, else the refusal). */
function offeringNode(answer: (i: number) => RaftError | null): RaftNode {
  return {
    id: 'me',
    leaderId: () => 'me',
    term: () => raftState.term,
    offer: async (items: Uint8Array[]) => items.map((_, i) => answer(i)),
  } as unknown as RaftNode;
}

describe('proposeOnLeader', () => {
  it('reports a refusal as definite, with its code, and an appended entry as accepted', async () => {
    const notLeader = offeringNode(() => new RaftError('not-leader', 'transferring', { leader: 'other' }));
    expect(await proposeOnLeader(notLeader, [new Uint8Array(1)], 1)).toEqual([
      { ok: false, code: 'not-leader', leader: 'other' },
    ]);
    const full = offeringNode(() => new RaftError('too-many-pending', 'full'));
    expect(await proposeOnLeader(full, [new Uint8Array(1)], 1)).toEqual([{ ok: false, code: 'overloaded' }]);
    const large = offeringNode(() => new RaftError('too-large', 'big'));
    expect(await proposeOnLeader(large, [new Uint8Array(1)], 1)).toEqual([{ ok: false, code: 'too-large' }]);
    const stopped = offeringNode(() => new RaftError('stopped', 'bye'));
    expect(await proposeOnLeader(stopped, [new Uint8Array(1)], 1)).toEqual([{ ok: false, code: 'stopped' }]);
    expect(
      await proposeOnLeader(
        offeringNode(() => null),
        [new Uint8Array(1)],
        1,
      ),
    ).toEqual([{ ok: true }]);
  });

  it('never takes a refusal it does not know for an accepted entry: an invariant failure', async () => {
    const odd = offeringNode(() => new RaftError('timeout', 'not an offer refusal'));
    await expect(proposeOnLeader(odd, [new Uint8Array(1)], 1)).rejects.toThrow(/invariant violated/);
    // the proposer's first attempt on the leader fails the write with it (no unhandled rejection)
    const s = await store();
    try {
      const forward = async (): Promise<ForwardResult> => ({ ok: false, code: 'stopped' });
      const p = new RaftProposer(odd, new StoreStateMachine(s), forward, undefined, OPTS);
      await expect(p.propose(create('policies', 'a', { name: 'A' }))).rejects.toThrow(/invariant violated/);
    } finally {
      await s.close();
    }
  });

  it('answers each command of a forward message on its own, in order', async () => {
    // the second proposal is refused (the leader's queue filled up), the others are accepted
    const node = offeringNode((i) => (i === 1 ? new RaftError('too-many-pending', 'full') : null));
    const items = [new Uint8Array([1]), new Uint8Array([2]), new Uint8Array([3])];
    expect(await proposeOnLeader(node, items, 1)).toEqual([
      { ok: true },
      { ok: false, code: 'overloaded' },
      { ok: true },
    ]);
  });
});

describe('proposeOnLeader fenced on the term a forward was addressed to', () => {
  /** Entries applied, as text. */
  const applied: string[] = [];
  const machine = {
    apply: (entries: Entry[]) => {
      for (const e of entries) if (e.type === 'normal') applied.push(Buffer.from(e.data).toString());
    },
    snapshot: async () => ({ index: 0, data: new Uint8Array() }),
    restore: async () => {},
  };
  const FAST = { tick_ms: 10, electionTicks: 10, heartbeatTicks: 1 };

  /** A one-voter cluster on memory: node 'a', started on `log`, once it leads. */
  async function leadingNode(net: MemoryNetwork, log: MemoryDurableLog): Promise<RaftNode> {
    applied.length = 0;
    const node = await RaftNode.start({
      id: 'a',
      log,
      transport: net.join('a'),
      stateMachine: machine,
      applied: 0,
      peers: { a: 'mem:a' },
      bootstrap: { voters: ['a'] },
      ...FAST,
    });
    for (let i = 0; i < 500 && !node.isLeader(); i++) await new Promise((r) => setTimeout(r, 10));
    expect(node.isLeader()).toBe(true);
    return node;
  }

  it('refuses a forward addressed to term t that reaches the node leading again in t+2: nothing proposed', async () => {
    const net = new MemoryNetwork();
    let log = new MemoryDurableLog(1);
    let node = await leadingNode(net, log);
    try {
      const t = node.term();
      expect(await proposeOnLeader(node, [Buffer.from('first')], t)).toEqual([{ ok: true }]);
      // two elections later the same node leads again (a restart elects it in a new term)
      for (let i = 0; i < 2; i++) {
        await node.readIndex();
        const durable = log.crashCopy();
        await node.kill();
        log = durable;
        node = await leadingNode(net, log);
      }
      expect(node.term()).toBe(t + 2);
      await node.readIndex(); // everything committed is applied: 'first' only
      const frame = [Buffer.from('delayed frame')];
      expect(await proposeOnLeader(node, frame, t)).toEqual([{ ok: false, code: 'not-leader', leader: 'a' }]);
      expect(await proposeOnLeader(node, [Buffer.from('now')], t + 2)).toEqual([{ ok: true }]);
      await node.readIndex();
      expect(applied).toEqual(['first', 'now']);
    } finally {
      await node.stop();
    }
  });
});

describe('RaftProposer', () => {
  it('resolves with the result recorded when the entry is applied here (forwarded from a follower)', async () => {
    const s = await store();
    const sm = new StoreStateMachine(s);
    let index = 0;
    const forward = async (_leader: string, _term: number, data: Uint8Array): Promise<ForwardResult> => {
      // the "leader" commits it; it arrives here through apply, like replication would deliver it
      setTimeout(() => void sm.apply([{ index: ++index, term: 1, type: 'normal', data }]), 5);
      return { ok: true };
    };
    const p = follower(() => 'leader', sm, forward, OPTS);
    expect(await p.propose(create('policies', 'a', { name: 'A' }))).toEqual({ ok: true, value: 'a' });
    const dup = await p.propose(create('policies', 'b', { name: 'A' }));
    expect(dup).toMatchObject({ ok: false, error: { code: 'UNIQUE' } });
    expect(s.appliedIndex).toBe(2);
    await s.close();
  });

  /**
   * The leader 'old' dies with a forward: `oldAnswer` is what the forward to it does (fails, or never answers);
   * 20 ms later this node follows 'new' in term 2, which applies what it is sent. The proposal must succeed,
   * having sent the command to 'old' and then to 'new' (after a read barrier showed it was not committed).
   */
  async function leaderDiesWithForward(oldAnswer: () => Promise<ForwardResult>): Promise<void> {
    const s = await store();
    const sm = new StoreStateMachine(s);
    const sent: string[] = [];
    let leader = 'old';
    const forward = async (to: string, term: number, data: Uint8Array): Promise<ForwardResult> => {
      sent.push(`${to}@${term}`);
      if (to === 'old') {
        setTimeout(() => {
          leader = 'new';
          raftState.term = 2;
        }, 20);
        return oldAnswer();
      }
      setTimeout(() => void sm.apply([{ index: 1, term: 2, type: 'normal', data }]), 5);
      return { ok: true };
    };
    raftState.term = 1;
    let reads = 0;
    raftState.readIndex = async () => {
      reads++;
      return 0;
    };
    try {
      const p = follower(() => leader, sm, forward, { ...OPTS, applyTimeout_ms: 2_000 });
      expect(await p.propose(create('policies', 'a', { name: 'A' }))).toEqual({ ok: true, value: 'a' });
      // each forward addressed to its leader's term (the one the leader was seen in)
      expect(sent).toEqual(['old@1', 'new@2']);
      expect(reads).toBe(1);
      expect(s.collection('policies').size).toBe(1);
    } finally {
      raftState.term = 1;
      raftState.readIndex = async () => 0;
      await s.close();
    }
  }

  it('sends again a forward without an answer once a later leader shows the entry was not committed', () =>
    leaderDiesWithForward(async () => {
      throw new Error('connection closed');
    }));

  it('stops waiting for a forward once another leader is followed (a dead leader may never answer)', () =>
    // no answer, no error: the socket has not noticed the death
    leaderDiesWithForward(() => new Promise(() => {})));

  /** A forward that fails as `fail` does, never answered: the proposal is sent once and ends unknown-outcome. */
  async function forwardWithoutAnswer(fail: () => Promise<ForwardResult>): Promise<void> {
    const s = await store();
    const sm = new StoreStateMachine(s);
    let forwards = 0;
    const forward = (): Promise<ForwardResult> => {
      forwards++;
      return fail();
    };
    const p = follower(() => 'leader', sm, forward, OPTS);
    const err = await p.propose(create('policies', 'a', { name: 'A' })).catch((e) => e);
    expect(err).toBeInstanceOf(ProposalError);
    expect(err.code).toBe('unknown-outcome');
    expect(forwards).toBe(1);
    expect(sm.waiting).toBe(0);
    await s.close();
  }

  it('never re-sends a forward whose outcome is unknown while no later leader says otherwise', () =>
    forwardWithoutAnswer(async () => {
      throw new Error('connection closed');
    }));

  it('a forwarder that throws at once counts as a forward without an answer (no unhandled rejection)', () =>
    forwardWithoutAnswer(() => {
      throw new Error('no socket');
    }));

  it('sends again after a definite refusal (not the leader any more), to the new leader', async () => {
    const s = await store();
    const sm = new StoreStateMachine(s);
    let leader = 'old';
    const sent: string[] = [];
    const forward = async (to: string, _term: number, data: Uint8Array): Promise<ForwardResult> => {
      sent.push(to);
      if (to === 'old') {
        leader = 'new';
        return { ok: false, code: 'not-leader', leader: 'new' };
      }
      setTimeout(() => void sm.apply([{ index: 1, term: 2, type: 'normal', data }]), 5);
      return { ok: true };
    };
    const p = follower(() => leader, sm, forward, OPTS);
    expect(await p.propose(create('policies', 'a', { name: 'A' }))).toEqual({ ok: true, value: 'a' });
    expect(sent).toEqual(['old', 'new']);
    await s.close();
  });

  it('answers no-leader when no leader appears in time; overloaded when the leader refuses for load', async () => {
    const s = await store();
    const sm = new StoreStateMachine(s);
    const none = follower(
      () => null,
      sm,
      async () => ({ ok: true }),
      OPTS,
    );
    await expect(none.propose(create('policies', 'a', { name: 'A' }))).rejects.toMatchObject({ code: 'no-leader' });
    const busy = follower(
      () => 'l',
      sm,
      async () => ({ ok: false, code: 'overloaded' }),
    );
    await expect(busy.propose(create('policies', 'a', { name: 'A' }))).rejects.toMatchObject({ code: 'overloaded' });
    await s.close();
  });

  it('on the leader: offers the entry to Raft and resolves with its result once applied here; a refusal is definite', async () => {
    const s = await store();
    const sm = new StoreStateMachine(s);
    const net = new MemoryNetwork();
    const node = await RaftNode.start({
      id: 'a',
      log: new MemoryDurableLog(1),
      transport: net.join('a'),
      stateMachine: sm,
      applied: 0,
      peers: { a: 'mem:a' },
      bootstrap: { voters: ['a'] },
      tick_ms: 10,
      electionTicks: 10,
      heartbeatTicks: 1,
      maxMsgBytes: 4096,
    });
    try {
      for (let i = 0; i < 500 && !node.isLeader(); i++) await new Promise((r) => setTimeout(r, 10));
      const forward = async (): Promise<ForwardResult> => {
        throw new Error('the leader never forwards');
      };
      const p = new RaftProposer(node, sm, forward, undefined, OPTS);
      expect(await p.propose(create('policies', 'a', { name: 'A' }))).toEqual({ ok: true, value: 'a' });
      const dup = await p.propose(create('policies', 'b', { name: 'A' }));
      expect(dup).toMatchObject({ ok: false, error: { code: 'UNIQUE' } });
      // above Raft's entry bound: the leader refuses it, nothing proposed
      const big = p.propose(create('policies', 'c', { name: 'x'.repeat(5000) }));
      await expect(big).rejects.toMatchObject({ code: 'overloaded' });
      expect(sm.waiting).toBe(0);
      expect(s.collection('policies').size).toBe(1);
    } finally {
      await node.stop();
      await s.close();
    }
  });

  it('entries at or below the applied index are skipped on replay; undecodable entries only advance the index', async () => {
    const s = await store();
    const skipped: number[] = [];
    const sm = new StoreStateMachine(s, (i) => skipped.push(i));
    const a = encodeLogged({ rid: 'r1', cmd: create('policies', 'a', { name: 'a' }) });
    expect(decodeLogged(a)?.cmd).toMatchObject({ op: 'create', id: 'a' });
    // the proposer's form (the command's bytes from encodeCommand, not packed again) is the same entry
    const encoded = encodeCommand(create('policies', 'a', { name: 'a' }));
    expect(encoded.ok && Buffer.from(encodeLoggedBytes('r1', encoded.bytes)).equals(Buffer.from(a))).toBe(true);
    // request ids of every header length: fixstr (up to 31 bytes, written by hand), longer ones, multi-byte text
    for (const rid of ['n1:mf0k2x1a:1', 'x'.repeat(31), 'x'.repeat(32), 'é'.repeat(15), 'é'.repeat(16)]) {
      const cmd = create('policies', 'a', { name: 'a' });
      const bytes = encodeCommand(cmd);
      const logged = Buffer.from(encodeLoggedBytes(rid, bytes.ok ? bytes.bytes : new Uint8Array()));
      expect(logged.equals(Buffer.from(encodeLogged({ rid, cmd })))).toBe(true);
      expect(decodeLogged(logged)?.rid).toBe(rid);
    }
    await sm.apply([{ index: 1, term: 1, type: 'normal', data: a }]);
    await sm.apply([
      { index: 1, term: 1, type: 'normal', data: a },
      { index: 2, term: 1, type: 'normal', data: new Uint8Array([0xc1]) },
      { index: 3, term: 1, type: 'noop', data: new Uint8Array() },
    ]);
    expect(s.appliedIndex).toBe(3);
    expect(skipped).toEqual([2]);
    expect(s.collection('policies').size).toBe(1);
    await s.close();
  });

  it('decoding an entry leaves its bytes as they were (they stay in the Raft log until compaction)', () => {
    const data = encodeLogged({ rid: 'r1', cmd: create('policies', 'a', { name: 'a' }) });
    const keys = Reflect.ownKeys(data);
    expect(decodeLogged(data)?.cmd).toMatchObject({ op: 'create', id: 'a' });
    // nothing kept on the entry's buffer (msgpackr would cache a DataView on the buffer it decodes: 120 B per entry)
    expect(Reflect.ownKeys(data)).toEqual(keys);
  });
});
