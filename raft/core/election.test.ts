/**
 * Leader election rules (Raft §5.2, §5.4.1, thesis §9.6 pre-vote, §6.2 check-quorum / leader lease),
 * following etcd's raft_test.go / raft_paper_test.go as a checklist.
 */
import { describe, expect, it } from 'vitest';
import type { Entry } from '../types.js';
import { encodeConfChange } from './codec.js';
import { confOf, entries, Solo, seeded, seedLog, TestNet } from './testkit.js';

const ABC = confOf(['a', 'b', 'c']);

describe('vote granting', () => {
  it('grants one vote per term, repeats it to the same candidate, and persists it before answering', () => {
    const n = new Solo('a', ABC);
    n.core.step({
      type: 'vote',
      from: 'b',
      to: 'a',
      term: 1,
      index: 0,
      logTerm: 0,
      entries: [],
      commit: 0,
      reject: false,
      rejectHint: 0,
    });
    const rd = n.core.ready();
    // The grant leaves in the same Ready as the durable vote (the driver persists before sending).
    expect(rd.hardState).toEqual({ term: 1, vote: 'b', commit: 0 });
    expect(rd.messages).toMatchObject([{ type: 'voteResp', to: 'b', term: 1, reject: false }]);
    n.log.setHardState(rd.hardState!);
    n.core.advance(rd);

    expect(n.step({ type: 'vote', from: 'c', term: 1 })).toMatchObject([{ type: 'voteResp', to: 'c', reject: true }]);
    expect(n.step({ type: 'vote', from: 'b', term: 1 })).toMatchObject([{ type: 'voteResp', to: 'b', reject: false }]);
    expect(n.log.getHardState().vote).toBe('b');
  });

  it('does not vote in a term where it already follows a leader', () => {
    const n = new Solo('a', ABC);
    n.step({ type: 'heartbeat', from: 'b', term: 2 });
    expect(n.step({ type: 'vote', from: 'c', term: 2 })).toMatchObject([{ type: 'voteResp', reject: true }]);
  });

  it('rejects candidates whose log is less up to date (§5.4.1)', () => {
    // Our log: 1@1 2@2.
    const setup = (log: import('../memory-log.js').MemoryLog) => seedLog(log, entries(1, [1, 2]), 2);
    const cases: [number, number, boolean][] = [
      // [candidate lastIndex, candidate lastTerm, granted]
      [5, 1, false], // lower last term, however long
      [1, 2, false], // same last term, shorter
      [2, 2, true], // same last term, same length
      [3, 2, true], // same last term, longer
      [1, 3, true], // higher last term, however short
    ];
    for (const [index, logTerm, granted] of cases) {
      const n = new Solo('a', ABC, {}, setup);
      const out = n.step({ type: 'vote', from: 'b', term: 3, index, logTerm });
      expect(out, `candidate (${index}, ${logTerm})`).toMatchObject([{ type: 'voteResp', reject: !granted }]);
    }
  });

  it('a candidate needs a majority: wins with 2 of 3, loses with 2 rejections of 3', () => {
    const won = new Solo('a', ABC);
    const votes = won.tick(10);
    expect(votes.filter((m) => m.type === 'vote').map((m) => m.to)).toEqual(['b', 'c']);
    expect(won.core.status().role).toBe('candidate');
    won.step({ type: 'voteResp', from: 'b', term: 1 });
    expect(won.core.status().role).toBe('leader');

    const lost = new Solo('a', ABC);
    lost.tick(10);
    lost.step({ type: 'voteResp', from: 'b', term: 1, reject: true });
    expect(lost.core.status().role).toBe('candidate');
    lost.step({ type: 'voteResp', from: 'c', term: 1, reject: true });
    expect(lost.core.status().role).toBe('follower');
  });

  it('rejecting a stale candidate does not reset the election timer (Figure 2)', () => {
    // c has the longer log; a (stale) campaigns with a higher term. c must not postpone its own election.
    const setup = (log: import('../memory-log.js').MemoryLog) => seedLog(log, entries(1, [1, 1]), 1, 1);
    const c = new Solo('c', ABC, {}, setup);
    c.tick(5);
    expect(c.step({ type: 'vote', from: 'a', term: 2, index: 1, logTerm: 1 })).toMatchObject([
      { type: 'voteResp', reject: true },
    ]);
    expect(c.core.status().term).toBe(2);
    const out = c.tick(5);
    expect(c.core.status()).toMatchObject({ role: 'candidate', term: 3 });
    expect(out.filter((m) => m.type === 'vote').length).toBe(2);
    // Granting a vote does reset it.
    const g = new Solo('b', ABC);
    g.tick(5);
    g.step({ type: 'vote', from: 'a', term: 2, index: 5, logTerm: 1 });
    g.tick(5);
    expect(g.core.status().role).toBe('follower');
  });

  it('a rejection carries the voter commit index; a candidate holding that entry commits up to it', () => {
    // The voter: log 1@1 2@1 3@2, commit 2. It rejects a candidate whose log is behind.
    const voterSetup = (log: import('../memory-log.js').MemoryLog) => seedLog(log, entries(1, [1, 1, 2]), 2, 2);
    const voter = new Solo('c', ABC, {}, voterSetup);
    const out = voter.step({ type: 'vote', from: 'a', term: 3, index: 2, logTerm: 1 });
    expect(out).toMatchObject([{ type: 'voteResp', reject: true, index: 2, logTerm: 1 }]);

    // A candidate with 1@1 2@1 and commit 0 learns that 2 is committed.
    const candSetup = (log: import('../memory-log.js').MemoryLog) => seedLog(log, entries(1, [1, 1]), 2, 0);
    const cand = new Solo('a', ABC, {}, candSetup);
    cand.tick(10);
    expect(cand.core.status()).toMatchObject({ role: 'candidate', commit: 0 });
    cand.step({ type: 'voteResp', from: 'c', term: 3, reject: true, index: 2, logTerm: 1 });
    expect(cand.core.status()).toMatchObject({ commit: 2, role: 'follower' });
    expect(cand.applied.map((e) => e.index)).toEqual([1, 2]);
    // A hint for an entry it does not hold (other term, or beyond its log) changes nothing.
    const other = new Solo('a', ABC, {}, candSetup);
    other.tick(10);
    other.step({ type: 'voteResp', from: 'c', term: 3, reject: true, index: 2, logTerm: 2 });
    other.step({ type: 'voteResp', from: 'b', term: 3, reject: true, index: 5, logTerm: 3 });
    expect(other.core.status().commit).toBe(0);
  });

  // Found by the simulator (seed 30396): a candidate learned through a hint that a conf entry removing it had
  // committed, applied it, and was then elected by the grants that followed, as a leader outside its own
  // configuration (an invariant error). A campaign that learns of new commits stands down until it has
  // applied them.
  it('a candidate that learns from a hint that its removal committed stands down instead of winning', () => {
    const removeA: Entry = {
      index: 2,
      term: 1,
      type: 'conf',
      data: encodeConfChange({ changes: [{ type: 'removeNode', node: 'a' }] }),
    };
    const setup = (log: import('../memory-log.js').MemoryLog) => seedLog(log, [...entries(1, [1]), removeA], 1, 1);
    const a = new Solo('a', confOf(['a', 'b', 'c', 'd']), {}, setup);
    a.tick(10);
    expect(a.core.status()).toMatchObject({ role: 'candidate', commit: 1 });
    a.step({ type: 'voteResp', from: 'd', term: 2, reject: true, index: 2, logTerm: 1 });
    expect(a.core.status()).toMatchObject({ role: 'follower', commit: 2, conf: { voters: ['b', 'c', 'd'] } });
    // Grants from b and c would be a majority of the new configuration.
    a.step({ type: 'voteResp', from: 'b', term: 2 });
    a.step({ type: 'voteResp', from: 'c', term: 2 });
    expect(a.core.status().role).toBe('follower');
    expect(a.tick(30).filter((m) => m.type === 'vote' || m.type === 'preVote')).toEqual([]);
  });

  it('ignores vote responses from an earlier term', () => {
    const n = new Solo('a', ABC);
    n.tick(10); // candidate in term 1
    n.tick(10); // times out, candidate in term 2
    expect(n.core.status().term).toBe(2);
    n.step({ type: 'voteResp', from: 'b', term: 1 });
    expect(n.core.status().role).toBe('candidate');
    n.step({ type: 'voteResp', from: 'b', term: 2 });
    expect(n.core.status().role).toBe('leader');
  });

  it('randomizes election timeouts in [electionTicks, 2*electionTicks)', () => {
    const seen = new Set<number>();
    for (let seed = 1; seed <= 200; seed++) {
      const n = new Solo('a', ABC, { random: { int: (k: number) => (seed * 7) % k } });
      let ticks = 0;
      while (n.core.status().role === 'follower' && ticks < 100) {
        n.core.tick();
        ticks++;
      }
      seen.add(ticks);
    }
    expect(Math.min(...seen)).toBe(10);
    expect(Math.max(...seen)).toBe(19);
  });
});

describe('terms', () => {
  it('adopts a higher term from any message and learns the leader from appends', () => {
    const n = new Solo('a', ABC);
    n.step({ type: 'append', from: 'b', term: 3 });
    expect(n.core.status()).toMatchObject({ term: 3, role: 'follower', leader: 'b' });
    n.step({ type: 'voteResp', from: 'c', term: 4 });
    expect(n.core.status()).toMatchObject({ term: 4, role: 'follower', leader: null });
  });

  it('a leader steps down when it sees a higher term', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    expect(net.core('a').status().role).toBe('leader');
    const term = net.core('a').status().term;
    net.core('a').step({
      type: 'appendResp',
      from: 'b',
      to: 'a',
      term: term + 2,
      logTerm: 0,
      index: 0,
      entries: [],
      commit: 0,
      reject: false,
      rejectHint: 0,
    });
    expect(net.core('a').status()).toMatchObject({ role: 'follower', term: term + 2 });
  });

  it('drops lower-term messages; with check-quorum answers a stale leader so it learns the new term', () => {
    const plain = new Solo('a', ABC);
    plain.step({ type: 'heartbeat', from: 'b', term: 5 });
    expect(plain.step({ type: 'append', from: 'c', term: 3 })).toEqual([]);

    const cq = new Solo('a', ABC, { checkQuorum: true });
    cq.step({ type: 'heartbeat', from: 'b', term: 5 });
    expect(cq.step({ type: 'append', from: 'c', term: 3 })).toMatchObject([{ type: 'appendResp', to: 'c', term: 5 }]);
    expect(cq.core.status().term).toBe(5);
  });
});

describe('pre-vote', () => {
  it('a pre-candidate asks for votes for term+1 without changing its own term', () => {
    const n = new Solo('a', ABC, { preVote: true });
    const out = n.tick(10);
    expect(n.core.status()).toMatchObject({ role: 'preCandidate', term: 0 });
    expect(out.filter((m) => m.type === 'preVote').map((m) => m.term)).toEqual([1, 1]);
    // A voter answering a pre-vote does not change its term either.
    const v = new Solo('b', ABC, { preVote: true });
    expect(v.step({ type: 'preVote', from: 'a', term: 1 })).toMatchObject([
      { type: 'preVoteResp', term: 1, reject: false },
    ]);
    expect(v.core.status().term).toBe(0);
    expect(v.log.getHardState().vote).toBeNull();
    // With a pre-vote quorum the real election starts in term 1.
    n.step({ type: 'preVoteResp', from: 'b', term: 1 });
    expect(n.core.status()).toMatchObject({ role: 'candidate', term: 1 });
  });

  it('a partitioned node does not bump terms and does not disrupt the cluster when it returns', () => {
    const net = TestNet.create(['a', 'b', 'c'], { preVote: true, checkQuorum: true });
    net.elect('a');
    const term = net.core('a').status().term;
    net.isolate('c');
    for (let i = 0; i < 100; i++) net.tickAll();
    expect(net.core('c').status().term).toBe(term);
    net.heal();
    net.tickAll(5);
    expect(net.leader()).toBe('a');
    expect(net.core('a').status().term).toBe(term);
    expect(net.core('c').status()).toMatchObject({ leader: 'a', term });
  });

  it('without pre-vote the same partition forces a new election (contrast)', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    const term = net.core('a').status().term;
    net.isolate('c');
    for (let i = 0; i < 30; i++) net.tickAll();
    expect(net.core('c').status().term).toBeGreaterThan(term);
    net.heal();
    net.tickAll(30);
    expect(net.core('a').status().term).toBeGreaterThan(term);
  });
});

describe('check-quorum and leader lease', () => {
  it('a leader steps down after an election timeout without hearing from a quorum', () => {
    const net = TestNet.create(['a', 'b', 'c'], { checkQuorum: true });
    net.elect('a');
    net.isolate('a');
    net.tick('a', 9);
    expect(net.core('a').status().role).toBe('leader');
    net.tick('a', 11);
    expect(net.core('a').status().role).toBe('follower');
  });

  it('a leader with a quorum of active followers stays leader', () => {
    const net = TestNet.create(['a', 'b', 'c'], { checkQuorum: true });
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 50; i++) {
      net.tick('a');
      net.stabilize();
    }
    expect(net.core('a').status().role).toBe('leader');
  });

  it('followers with a live leader ignore vote requests of a higher term (lease)', () => {
    // Longest randomized timeout (19 ticks), so b's own election does not start when its lease (10) ends.
    const net = TestNet.create(['a', 'b', 'c'], { checkQuorum: true, random: { int: (k: number) => k - 1 } });
    net.elect('a');
    const term = net.core('b').status().term;
    const b = net.core('b');
    const vote = {
      type: 'vote' as const,
      from: 'c',
      to: 'b',
      term: term + 1,
      index: 100,
      logTerm: 100,
      entries: [],
      commit: 0,
      reject: false,
      rejectHint: 0,
    };
    b.step(vote);
    expect(b.status().term).toBe(term);
    expect(net.drain('b')).toEqual([]);
    // Once the leader has been silent for an election timeout the lease is over: the request it ignored is
    // answered then (not at the tick before), and a new one alike.
    for (let i = 0; i < 9; i++) b.tick();
    expect(net.drain('b')).toEqual([]);
    b.tick();
    expect(b.status()).toMatchObject({ term: term + 1 });
    expect(net.drain('b')).toMatchObject([{ type: 'voteResp', to: 'c', reject: false }]);
    b.step(vote);
    expect(net.drain('b')).toMatchObject([{ type: 'voteResp', to: 'c', reject: false }]);
  });
});

describe('a leader known to be gone (leaderUnreachable)', () => {
  const opts = { preVote: true, checkQuorum: true, random: { int: (k: number) => k - 1 } };

  it('its followers campaign within a few ticks, the lower-ranked one first, and elect it', () => {
    const net = TestNet.create(['a', 'b', 'c'], opts);
    net.elect('a');
    const term = net.core('b').status().term;
    net.isolate('a');
    // Both learn at once (a's connections closed). b ranks 0 among {b, c}: 1 + 0 + jitter 1 = 2 ticks; c: 5.
    net.core('b').leaderUnreachable();
    net.core('c').leaderUnreachable();
    expect(net.core('b').status().leader).toBeNull();
    net.tick('b');
    net.tick('c');
    net.stabilize();
    expect(net.core('b').status().role).toBe('follower');
    net.tick('b');
    net.tick('c');
    net.stabilize();
    expect(net.core('b').status()).toMatchObject({ role: 'leader', term: term + 1 });
    expect(net.core('c').status()).toMatchObject({ role: 'follower', leader: 'b', term: term + 1 });
  });

  it('without it the followers wait out their election timeout (contrast)', () => {
    const net = TestNet.create(['a', 'b', 'c'], opts);
    net.elect('a');
    net.isolate('a');
    for (let i = 0; i < 10; i++) {
      net.tick('b');
      net.tick('c');
      net.stabilize();
    }
    expect(net.leader()).toBe('a');
    expect(net.core('b').status().leader).toBe('a');
  });

  it('a pre-vote ignored under the lease is answered once the voter learns the leader is gone', () => {
    // b holds an entry c lacks. b learns first and pre-votes while c still holds a's lease (ignored); then c
    // learns and pre-votes, which b refuses (c's log is shorter). Without an answer to b's pre-vote both would
    // wait out a whole randomized election timeout (19 ticks here): the rare ~700 ms failover.
    const net = TestNet.create(['a', 'b', 'c'], opts);
    net.elect('a');
    const term = net.core('a').status().term;
    net.blocked.add('a>c');
    net.propose('a', 'only on a and b');
    net.isolate('a');
    net.core('b').leaderUnreachable();
    net.tick('b', 2);
    expect(net.core('b').status().role).toBe('preCandidate');
    net.stabilize();
    expect(net.core('c').status().leader).toBe('a'); // in a's lease: b's pre-vote got no answer
    net.core('c').leaderUnreachable();
    net.stabilize();
    let ticks = 0;
    for (; ticks < 40 && net.core('b').status().role !== 'leader'; ticks++) {
      net.tick('b');
      net.tick('c');
      net.stabilize();
    }
    expect(ticks).toBeLessThanOrEqual(1);
    expect(net.core('b').status()).toMatchObject({ role: 'leader', term: term + 1 });
    expect(net.core('c').status()).toMatchObject({ role: 'follower', leader: 'b', term: term + 1 });
  });

  it('whoever learns first and whichever log is longer, the survivors elect a leader within a few ticks', () => {
    // 200 random failovers: the survivors learn of the leader's death up to a tick apart (their tick phases
    // differ), and either may hold entries the other lacks. 12 of them took a whole randomized election timeout
    // (14-24 ticks) before: a pre-vote ignored under the lease and never answered (6), or two campaigns in the
    // same tick splitting the vote (5: ranks were 2 ticks apart); with only one of the two fixes, 5 or 6 still did.
    const worst = { ticks: 0, seed: 0 };
    for (let seed = 1; seed <= 200; seed++) {
      const rng = seeded(seed);
      const net = TestNet.create(['a', 'b', 'c'], { preVote: true, checkQuorum: true, random: seeded(seed * 7) });
      net.elect('a');
      const term = net.core('a').status().term;
      const behind = ['b', 'c', null][rng.int(3)];
      if (behind !== null) net.blocked.add(`a>${behind}`);
      net.propose('a', 'x');
      net.isolate('a');
      const learnsAt = { b: rng.int(2), c: rng.int(2) };
      let ticks = 0;
      const elected = () => ['b', 'c'].some((id) => net.core(id).status().role === 'leader');
      for (; ticks < 40 && !elected(); ticks++) {
        for (const id of rng.int(2) === 0 ? ['b', 'c'] : ['c', 'b']) {
          if (learnsAt[id as 'b' | 'c'] === ticks) net.core(id).leaderUnreachable();
          net.tick(id);
        }
        net.stabilize();
      }
      expect(elected(), `seed ${seed}`).toBe(true);
      expect(net.core('b').status().term).toBeGreaterThan(term);
      if (ticks > worst.ticks) Object.assign(worst, { ticks, seed });
    }
    // learning takes up to a tick, the campaign 1 + 3 × rank + 0..1 more: never an election timeout (10 ticks)
    expect(worst.ticks, `seed ${worst.seed}`).toBeLessThanOrEqual(6);
  });

  it('a vote request ignored under the lease is dropped when the leader is heard again', () => {
    const net = TestNet.create(['a', 'b', 'c'], opts);
    net.elect('a');
    // c alone wrongly believes a gone (rank 1 among b, c: 5 ticks) and pre-votes
    net.core('c').leaderUnreachable();
    net.tick('c', 5);
    const preVote = net.takePending().find((m) => m.type === 'preVote' && m.to === 'b')!;
    expect(preVote).toBeDefined();
    const answers = () => net.takePending().filter((m) => m.from === 'b' && m.type === 'preVoteResp');
    net.deliver(preVote);
    expect(answers()).toEqual([]); // ignored under a's lease
    net.tick('a'); // a's heartbeat: the lease holds again, the ignored request is dropped
    net.stabilize();
    net.core('b').leaderUnreachable();
    expect(answers()).toEqual([]);
    // contrast: without a heartbeat in between, the ignored request is answered once b learns a is gone
    net.tick('a');
    net.stabilize();
    net.deliver(preVote);
    expect(answers()).toEqual([]);
    net.core('b').leaderUnreachable();
    expect(answers()).toMatchObject([{ to: 'c', reject: false }]);
  });

  it('one follower wrongly told cannot disrupt a leader the others still hear from', () => {
    const net = TestNet.create(['a', 'b', 'c'], opts);
    net.elect('a');
    const term = net.core('a').status().term;
    net.core('c').leaderUnreachable();
    for (let i = 0; i < 6; i++) {
      net.tick('c');
      net.stabilize();
    }
    // c's pre-vote found no quorum (b's lease, a leads): no term moved; a's next heartbeat makes c follow again.
    expect(net.core('c').status().term).toBe(term);
    net.tick('a');
    net.stabilize();
    expect(net.core('a').status()).toMatchObject({ role: 'leader', term });
    expect(net.core('c').status()).toMatchObject({ leader: 'a', term });
  });
});

describe('election safety under contention', () => {
  it('never elects two leaders in one term across many random elections', () => {
    for (let seed = 1; seed <= 30; seed++) {
      let x = seed;
      const random = { int: (k: number) => (x = (x * 1103515245 + 12345) % 2147483648) % k };
      const net = TestNet.create(['a', 'b', 'c', 'd', 'e'], { random });
      const leaders = new Map<number, string>();
      for (let round = 0; round < 60; round++) {
        if (round % 10 === 3) net.isolate(['a', 'b', 'c', 'd', 'e'][round % 5] as string);
        if (round % 10 === 7) net.heal();
        net.tickAll();
        for (const [id, n] of net.nodes) {
          const s = n.core.status();
          if (s.role !== 'leader') continue;
          const prior = leaders.get(s.term);
          expect(prior === undefined || prior === id, `term ${s.term}: ${prior} and ${id}`).toBe(true);
          leaders.set(s.term, id);
        }
      }
      expect(leaders.size).toBeGreaterThan(0);
    }
  });
});
