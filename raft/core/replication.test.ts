/**
 * Log replication rules (Raft §5.3, §5.4.2, Figures 7 and 8), flow control and bounds, persistence and
 * restart, and the Ready contract.
 */
import { describe, expect, it } from 'vitest';
import { MemoryLog } from '../memory-log.js';
import { type CoreOptions, type Entry, type Message, ProposalDroppedError } from '../types.js';
import { RaftCore } from './raft.js';
import { confOf, coreOptions, entries, Solo, seedLog, TestNet, text } from './testkit.js';

const ABC = confOf(['a', 'b', 'c']);
const enc = (s: string) => new TextEncoder().encode(s);

function termsOf(log: MemoryLog): number[] {
  const out: number[] = [];
  for (let i = log.firstIndex(); i <= log.lastIndex(); i++) out.push(log.term(i));
  return out;
}

describe('follower append handling', () => {
  it('truncates a conflicting uncommitted suffix and appends the leader entries', () => {
    const n = new Solo('b', ABC, {}, (log) => seedLog(log, entries(1, [1, 1, 2, 2]), 2, 1));
    const out = n.step({
      type: 'append',
      from: 'a',
      term: 3,
      index: 2,
      logTerm: 1,
      entries: entries(3, [3]),
      commit: 2,
    });
    expect(out).toMatchObject([{ type: 'appendResp', index: 3, reject: false }]);
    expect(termsOf(n.log)).toEqual([1, 1, 3]);
    expect(n.core.status().commit).toBe(2);
  });

  it('keeps matching entries when a stale, shorter append arrives (no truncation)', () => {
    const n = new Solo('b', ABC, {}, (log) => seedLog(log, entries(1, [1, 1, 1, 1]), 1, 1));
    n.step({ type: 'append', from: 'a', term: 1, index: 1, logTerm: 1, entries: entries(2, [1]), commit: 1 });
    expect(n.log.lastIndex()).toBe(4);
  });

  it('rejects a mismatching append with a hint that skips its whole higher-term tail', () => {
    // Follower: 1@1 2@1 3@1 then 50 entries of term 3 (from a deposed leader).
    const n = new Solo('b', ABC, {}, (log) => seedLog(log, entries(1, [1, 1, 1, ...Array(50).fill(3)]), 3, 3));
    const out = n.step({ type: 'append', from: 'a', term: 5, index: 53, logTerm: 4, commit: 3 });
    // Largest index <= 53 with term <= 4 in the follower's log is 53 (term 3).
    expect(out).toMatchObject([{ type: 'appendResp', reject: true, index: 53, rejectHint: 53, rejectTerm: 3 }]);
    const out2 = n.step({ type: 'append', from: 'a', term: 5, index: 53, logTerm: 2, commit: 3 });
    // Now the leader says term 2 at 53: skip back to the last entry with term <= 2, index 3.
    expect(out2).toMatchObject([{ type: 'appendResp', reject: true, rejectHint: 3, rejectTerm: 1 }]);
  });

  it('answers appends below its commit index with its commit index', () => {
    const n = new Solo('b', ABC, {}, (log) => seedLog(log, entries(1, [1, 1, 1]), 1, 3));
    expect(n.step({ type: 'append', from: 'a', term: 1, index: 1, logTerm: 1 })).toMatchObject([
      { type: 'appendResp', index: 3, reject: false },
    ]);
  });
});

describe('acknowledging commit notices', () => {
  it('leaves unanswered a commit notice that would repeat its last acknowledgement, answers every other append', () => {
    const n = new Solo('b', ABC, {}, (log) => seedLog(log, entries(1, [1, 1]), 1, 0));
    // entries 3 and 4: acknowledged
    const ack = n.step({
      type: 'append',
      from: 'a',
      term: 1,
      index: 2,
      logTerm: 1,
      entries: entries(3, [1, 1]),
      commit: 2,
    });
    expect(ack).toMatchObject([{ type: 'appendResp', to: 'a', index: 4, reject: false }]);
    // the commit notice for them: nothing new to tell the leader
    expect(n.step({ type: 'append', from: 'a', term: 1, index: 4, logTerm: 1, commit: 4 })).toEqual([]);
    expect(n.core.status().commit).toBe(4);
    // an empty append that moves no commit index (a probe after a heartbeat): answered, even though it repeats
    expect(n.step({ type: 'append', from: 'a', term: 1, index: 4, logTerm: 1, commit: 4 })).toMatchObject([
      { type: 'appendResp', to: 'a', index: 4, reject: false },
    ]);
    // new entries: answered
    expect(
      n.step({ type: 'append', from: 'a', term: 1, index: 4, logTerm: 1, entries: entries(5, [1]), commit: 4 }),
    ).toMatchObject([{ type: 'appendResp', index: 5 }]);
  });

  it('answers a commit notice whose index it has not acknowledged to this leader in this term', () => {
    const n = new Solo('b', ABC, {}, (log) => seedLog(log, entries(1, [1, 1, 1]), 1, 1));
    // acknowledged 3 to a in term 1
    n.step({ type: 'append', from: 'a', term: 1, index: 3, logTerm: 1, commit: 1 });
    // term 2, leader c: its first commit notice is news to c
    expect(n.step({ type: 'append', from: 'c', term: 2, index: 3, logTerm: 1, commit: 2 })).toMatchObject([
      { type: 'appendResp', to: 'c', index: 3, reject: false },
    ]);
    // a different index than the last acknowledgement (a shorter append, below what it holds): answered
    expect(n.step({ type: 'append', from: 'c', term: 2, index: 2, logTerm: 1, commit: 3 })).toMatchObject([
      { type: 'appendResp', to: 'c', index: 2, reject: false },
    ]);
  });

  it('a cluster sends one acknowledgement per follower per batch, and a lost one is learnt again from a heartbeat', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    const before = net.delivered.length;
    net.propose('a', 'x');
    const acks = net.delivered.slice(before).filter((m) => m.type === 'appendResp');
    // the append of x is acknowledged once by each follower; the commit notice that follows is not
    expect(acks.map((m) => m.from).sort()).toEqual(['b', 'c']);
    const index = net.core('a').status().lastIndex;
    for (const id of ['a', 'b', 'c']) expect(net.core(id).status().commit).toBe(index);

    // b's acknowledgement of y is lost; c's makes y committed, and b's commit notice goes unanswered
    net.blocked.add('b>a');
    net.propose('a', 'y');
    net.heal();
    const y = net.core('a').status().lastIndex;
    expect(net.core('a').status().progress?.b?.match).toBe(y - 1);
    // a heartbeat's answer makes the leader probe b again: an empty append that moves no commit, answered
    net.tickAll(3);
    expect(net.core('a').status().progress?.b?.match).toBe(y);
  });
});

describe('fast backtracking (Figure 7)', () => {
  it('repairs a follower with a long divergent tail in two rejections, not fifty', () => {
    // Leader log: 1,1,1 then 50 x term 4 (it will be leader of term 5). Follower: 1,1,1 then 50 x term 3.
    const leaderLog = new MemoryLog({ conf: ABC });
    seedLog(leaderLog, entries(1, [1, 1, 1, ...Array(50).fill(4)]), 4, 3);
    const followerLog = new MemoryLog({ conf: ABC });
    seedLog(followerLog, entries(1, [1, 1, 1, ...Array(50).fill(3)]), 4, 3);
    const upToDate = new MemoryLog({ conf: ABC });
    seedLog(upToDate, entries(1, [1, 1, 1, ...Array(50).fill(4)]), 4, 3);
    const net = new TestNet();
    net.add('a', leaderLog);
    net.add('b', followerLog);
    net.add('c', upToDate);
    net.elect('a');
    expect(net.leader()).toBe('a');
    const rejections = net.delivered.filter((m) => m.type === 'appendResp' && m.from === 'b' && m.reject);
    expect(rejections.length).toBeLessThanOrEqual(2);
    expect(termsOf(net.node('b').log)).toEqual(termsOf(net.node('a').log));
  });
});

describe('commit rule (Figure 8)', () => {
  /** s1 (term 4 leader-to-be) and s2 hold 2@2; s3, s4 hold only 1@1; s5 holds 2@3. */
  function figure8(factory?: (o: CoreOptions) => RaftCore): TestNet {
    const conf = confOf(['s1', 's2', 's3', 's4', 's5']);
    const net = new TestNet();
    const logs: Record<string, number[]> = { s1: [1, 2], s2: [1, 2], s3: [1], s4: [1], s5: [1, 3] };
    for (const [id, terms] of Object.entries(logs)) {
      const log = new MemoryLog({ conf });
      seedLog(log, entries(1, terms), 3, 1);
      // One entry per append message, so old entries can reach followers ahead of the leader's noop.
      net.add(id, log, { maxMsgBytes: 1 }, factory);
    }
    return net;
  }

  /** Delivers everything except messages `hold` selects; returns the held ones. */
  function stabilizeExcept(net: TestNet, hold: (m: Message) => boolean): Message[] {
    const held: Message[] = [];
    for (let i = 0; i < 10_000; i++) {
      const batch = net.takePending();
      if (batch.length === 0) break;
      for (const m of batch) {
        if (hold(m)) held.push(m);
        else net.deliver(m);
      }
    }
    return held;
  }
  /** Hold back appends that would land the leader's term-4 noop (mismatching probes still go through). */
  const landsTerm4 = (net: TestNet) => (m: Message) => {
    if (m.type !== 'append' || !m.entries.some((e) => e.term === 4)) return false;
    const log = net.node(m.to).log;
    return m.index <= log.lastIndex() && log.term(m.index) === m.logTerm;
  };

  it('does not commit an entry of an earlier term by counting replicas', () => {
    const net = figure8();
    net.isolate('s5');
    net.campaign('s1');
    // The leader's own (term 4) noop is held back; 2@2 reaches s3 and s4.
    const held = stabilizeExcept(net, landsTerm4(net));
    const s1 = net.core('s1').status();
    expect(s1).toMatchObject({ role: 'leader', term: 4 });
    // 2@2 is now on s1, s2, s3 and s4, a majority, but only an entry of term 4 may be committed by counting.
    expect(net.node('s3').log.term(2)).toBe(2);
    expect(net.node('s4').log.term(2)).toBe(2);
    expect(s1.commit).toBe(1);
    // Once the term-4 noop reaches a majority, it commits, and 2@2 with it.
    for (const m of held) net.deliver(m);
    net.stabilize();
    expect(net.core('s1').status().commit).toBe(3);
  });

  it('a broken core that counts earlier-term entries commits 2@2 early (the bug the rule prevents)', async () => {
    const { PreviousTermCommitCore } = await import('../sim/broken-cores.js');
    const net = figure8((o) => new PreviousTermCommitCore(o));
    net.isolate('s5');
    net.campaign('s1');
    stabilizeExcept(net, landsTerm4(net));
    expect(net.core('s1').status()).toMatchObject({ role: 'leader', term: 4, commit: 2 });
    // s5 (last term 3) can now win votes from s3 and s4 (last term 2) and would overwrite index 2.
  });
});

describe('flow control and bounds', () => {
  it('pipelines at most maxInflightMsgs appends to a follower in replicate state', () => {
    const net = TestNet.create(['a', 'b'], { maxInflightMsgs: 2, maxMsgBytes: 1 });
    net.elect('a');
    for (let i = 0; i < 5; i++) net.core('a').propose(enc(`p${i}`));
    const sent = net.takePending().filter((m) => m.type === 'append' && m.to === 'b' && m.entries.length > 0);
    expect(sent.length).toBe(2);
    // One acknowledgement frees one slot.
    const ack = {
      ...sent[0]!,
      type: 'appendResp' as const,
      from: 'b',
      to: 'a',
      index: sent[0]!.entries[0]!.index,
      entries: [],
    };
    net.core('a').step(ack);
    const more = net.takePending().filter((m) => m.type === 'append' && m.to === 'b' && m.entries.length > 0);
    expect(more.length).toBe(1);
  });

  it('probes a follower one message at a time until it matches', () => {
    const net = TestNet.create(['a', 'b'], { maxMsgBytes: 1 });
    net.elect('a');
    net.core('a').reportUnreachable('b'); // back to probe
    expect(net.core('a').status().progress?.b?.state).toBe('probe');
    for (let i = 0; i < 3; i++) net.core('a').propose(enc(`p${i}`));
    const sent = net.takePending().filter((m) => m.type === 'append' && m.to === 'b');
    expect(sent.length).toBe(1);
  });

  it('drops proposals beyond maxUncommittedBytes and accepts them again once applied', () => {
    const net = TestNet.create(['a', 'b', 'c'], { maxUncommittedBytes: 10 });
    net.elect('a');
    net.isolate('a');
    const a = net.core('a');
    a.propose(enc('123456'));
    expect(() => a.propose(enc('123456'))).toThrow(ProposalDroppedError);
    // An empty proposal is always accepted.
    a.propose(new Uint8Array(0));
    net.heal();
    net.tickAll(3);
    expect(a.status().applied).toBe(a.status().lastIndex);
    expect(() => a.propose(enc('123456'))).not.toThrow();
  });

  it('proposeMany appends a batch and sends it in one append per follower, which commits and applies it', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    net.stabilize();
    const a = net.core('a');
    const last = a.status().lastIndex;
    const at = a.proposeMany(['m0', 'm1', 'm2', 'm3'].map(enc));
    expect(at.map((x) => x.index)).toEqual([last + 1, last + 2, last + 3, last + 4]);
    const appends = net.takePending().filter((m) => m.type === 'append');
    expect(appends.map((m) => [m.to, m.entries?.length])).toEqual([
      ['b', 4],
      ['c', 4],
    ]);
    for (const m of appends) net.deliver(m);
    net.stabilize();
    for (const id of ['a', 'b', 'c']) {
      expect(
        net
          .node(id)
          .applied.filter((e) => e.type === 'normal')
          .map(text),
      ).toEqual(['m0', 'm1', 'm2', 'm3']);
    }
  });

  it('proposeMany stops at the first entry beyond maxUncommittedBytes, and refuses on a follower', () => {
    const net = TestNet.create(['a', 'b', 'c'], { maxUncommittedBytes: 10 });
    net.elect('a');
    net.isolate('a');
    const a = net.core('a');
    const at = a.proposeMany(['123456', '123456', ''].map(enc));
    expect(at.length).toBe(1); // the second exceeds the bound: it and everything after it are left out
    expect(a.status().lastIndex).toBe(at[0]!.index);
    expect(() => net.core('b').proposeMany([enc('x')])).toThrow(ProposalDroppedError);
  });

  it('rejects proposals on followers, naming the leader so the application can forward', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    try {
      net.core('b').propose(enc('x'));
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ProposalDroppedError);
      expect((err as ProposalDroppedError).leader).toBe('a');
    }
  });
});

describe('replication end to end', () => {
  it('a new leader appends a noop, and entries commit and apply in order on every node', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    for (let i = 0; i < 5; i++) net.propose('a', `v${i}`);
    net.tickAll();
    for (const id of ['a', 'b', 'c']) {
      const applied = net.node(id).applied.filter((e) => e.type !== 'conf');
      expect(applied[0]?.type).toBe('noop');
      expect(applied.slice(1).map(text)).toEqual(['v0', 'v1', 'v2', 'v3', 'v4']);
    }
  });

  it('a lagging follower catches up after a partition heals', () => {
    const net = TestNet.create(['a', 'b', 'c'], { maxMsgBytes: 64, maxInflightMsgs: 4 });
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 40; i++) net.propose('a', `v${i}`);
    net.heal();
    net.tickAll(3);
    expect(net.node('c').applied.map(text)).toEqual(net.node('a').applied.map(text));
  });
});

describe('persistence and restart', () => {
  it('restarts from the persisted term, vote, log and commit index, and replays committed entries', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    for (let i = 0; i < 3; i++) net.propose('a', `v${i}`);
    net.tickAll();
    const before = net.core('b').status();
    const hs = net.node('b').log.getHardState();
    const restarted = net.restart('b');
    const after = restarted.status();
    expect(after).toMatchObject({
      term: before.term,
      commit: before.commit,
      lastIndex: before.lastIndex,
      role: 'follower',
    });
    expect(net.node('b').log.getHardState()).toEqual(hs);
    // The state machine restarts empty (applied 0) and gets every committed entry again.
    net.node('b').applied.length = 0;
    net.drain('b');
    expect(net.node('b').applied.map(text).slice(-3)).toEqual(['v0', 'v1', 'v2']);
    // It keeps its vote: no second vote in the same term.
    restarted.step({
      type: 'vote',
      from: 'c',
      to: 'b',
      term: before.term,
      index: 100,
      logTerm: 100,
      entries: [],
      commit: 0,
      reject: false,
      rejectHint: 0,
    });
    expect(net.drain('b').find((m) => m.type === 'voteResp')?.reject).toBe(hs.vote !== 'c');
  });

  it('a restarted leader loses leadership but the cluster continues', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    net.propose('a', 'x');
    net.restart('a');
    net.elect('b');
    net.propose('b', 'y');
    net.tickAll(2);
    expect(net.node('a').applied.map(text).slice(-1)).toEqual(['y']);
  });

  it('refuses to start when the persisted commit index is beyond the log (lost writes)', () => {
    const log = new MemoryLog({ conf: ABC });
    seedLog(log, entries(1, [1, 1]), 1, 2);
    (log as unknown as { ents: Entry[] }).ents.length = 2; // simulate a truncated log file
    expect(() => new RaftCore(coreOptions('a', log))).toThrow(/commit 2 beyond last index 1/);
  });
});

describe('Ready contract', () => {
  it('hands out one Ready at a time; step() may run between ready() and advance()', () => {
    const n = new Solo('a', ABC);
    n.core.tick();
    n.core.step({
      type: 'append',
      from: 'b',
      to: 'a',
      term: 1,
      logTerm: 0,
      index: 0,
      entries: entries(1, [1]),
      commit: 0,
      reject: false,
      rejectHint: 0,
    });
    expect(n.core.hasReady()).toBe(true);
    const rd = n.core.ready();
    expect(rd.entries.map((e) => e.index)).toEqual([1]);
    expect(n.core.hasReady()).toBe(false);
    expect(() => n.core.ready()).toThrow(/before advance/);
    // Another append arrives while the first Ready is being persisted.
    n.core.step({
      type: 'append',
      from: 'b',
      to: 'a',
      term: 1,
      logTerm: 1,
      index: 1,
      entries: entries(2, [1]),
      commit: 2,
      reject: false,
      rejectHint: 0,
    });
    n.log.append(rd.entries);
    n.log.setHardState(rd.hardState!);
    n.core.advance(rd);
    const rd2 = n.core.ready();
    // Only the new entry is handed out again; both are committed once persisted.
    expect(rd2.entries.map((e) => e.index)).toEqual([2]);
    expect(rd2.committed.map((e) => e.index)).toEqual([1, 2]);
    expect(rd2.hardState?.commit).toBe(2);
  });

  it('bounds committed entries per Ready by maxCommittedBytesPerReady', () => {
    // Each entry counts 3 payload bytes + 16 overhead: a 20-byte budget hands out one per Ready.
    const n = new Solo('a', ABC, { maxCommittedBytesPerReady: 20 }, (log) =>
      seedLog(log, entries(1, [1, 1, 1, 1]), 1, 4),
    );
    const sizes: number[] = [];
    for (let i = 0; i < 10 && n.core.hasReady(); i++) {
      const rd = n.core.ready();
      sizes.push(rd.committed.length);
      n.core.advance(rd);
    }
    expect(sizes.filter((k) => k > 0)).toEqual([1, 1, 1, 1]);
  });
});
