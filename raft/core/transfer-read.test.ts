/**
 * Leader transfer (thesis §3.10) and linearizable ReadIndex reads (thesis §6.4).
 */
import { describe, expect, it } from 'vitest';
import { type Message, ProposalDroppedError } from '../types.js';
import { TestNet } from './testkit.js';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

describe('leader transfer', () => {
  it('hands leadership to an up-to-date voter with timeoutNow', () => {
    const net = TestNet.create(['a', 'b', 'c'], { preVote: true, checkQuorum: true });
    net.elect('a');
    const term = net.core('a').status().term;
    net.core('a').transferLeadership('b');
    net.stabilize();
    expect(net.core('b').status()).toMatchObject({ role: 'leader', term: term + 1 });
    expect(net.core('a').status()).toMatchObject({ role: 'follower', leader: 'b' });
    // The transfer campaign bypassed the voters' leader lease (check-quorum) and pre-vote.
    expect(net.delivered.some((m) => m.type === 'timeoutNow' && m.to === 'b')).toBe(true);
    expect(net.delivered.some((m) => m.type === 'preVote' && m.from === 'b')).toBe(false);
  });

  it('catches a lagging target up before sending timeoutNow', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 10; i++) net.propose('a', `v${i}`);
    net.heal();
    net.core('a').transferLeadership('c');
    // Proposals are dropped while the transfer is in progress.
    expect(() => net.core('a').propose(enc('during'))).toThrow(ProposalDroppedError);
    net.stabilize();
    const timeoutNow = net.delivered.findIndex((m) => m.type === 'timeoutNow');
    const lastAppendToC = net.delivered.findLastIndex(
      (m) => m.type === 'append' && m.to === 'c' && m.entries.length > 0,
    );
    expect(timeoutNow).toBeGreaterThan(lastAppendToC);
    expect(net.leader()).toBe('c');
    expect(net.core('c').status().lastIndex).toBeGreaterThanOrEqual(12);
  });

  it('is aborted after an election timeout when the target does not take over', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('b');
    net.core('a').transferLeadership('b');
    expect(() => net.core('a').propose(enc('x'))).toThrow(/transfer/);
    net.tick('a', 10);
    expect(net.core('a').status().role).toBe('leader');
    expect(() => net.core('a').propose(enc('x'))).not.toThrow();
  });

  it('is forwarded from a follower to the leader, and refuses learners', () => {
    const net = TestNet.create(['a', 'b', 'c'], {}, ['l']);
    net.elect('a');
    net.core('c').transferLeadership('b');
    net.stabilize();
    expect(net.leader()).toBe('b');
    expect(() => net.core('b').transferLeadership('l')).toThrow(/not a voter/);
  });
});

describe('ReadIndex', () => {
  it('a leader answers after a heartbeat round confirms it is still the leader', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    net.propose('a', 'x');
    const commit = net.core('a').status().commit;
    net.core('a').readIndex(enc('r1'));
    net.drainAll();
    expect(net.node('a').readStates).toEqual([]);
    net.stabilize();
    expect(net.node('a').readStates.map((r) => [r.index, dec(r.context)])).toEqual([[commit, 'r1']]);
  });

  it('a leader cut off from its quorum never answers', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('a');
    net.core('a').readIndex(enc('r1'));
    net.tickAll(5);
    expect(net.node('a').readStates).toEqual([]);
  });

  it('a follower forwards the request and gets the read index from the leader', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    net.propose('a', 'x');
    net.core('b').readIndex(enc('rb'));
    net.stabilize();
    expect(net.node('b').readStates.map((r) => [r.index, dec(r.context)])).toEqual([
      [net.core('a').status().commit, 'rb'],
    ]);
  });

  it('a new leader defers reads until it has committed an entry of its own term', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    for (let i = 0; i < 3; i++) net.propose('a', `v${i}`);
    const committedBefore = net.core('a').status().commit;
    // b becomes leader, but its noop is not acknowledged yet.
    net.dropTypes.add('appendResp');
    net.elect('b');
    expect(net.core('b').status().role).toBe('leader');
    net.core('b').readIndex(enc('early'));
    net.stabilize();
    expect(net.node('b').readStates).toEqual([]);
    net.dropTypes.delete('appendResp');
    net.tickAll(2);
    const rs = net.node('b').readStates;
    expect(rs.map((r) => dec(r.context))).toEqual(['early']);
    // The answer covers everything committed by the previous leader, and the new noop.
    expect(rs[0]!.index).toBeGreaterThan(committedBefore);
  });

  it('bounds pending read requests', () => {
    const net = TestNet.create(['a', 'b', 'c'], { maxPendingReadIndex: 2 });
    net.elect('a');
    net.isolate('a');
    net.core('a').readIndex(enc('1'));
    net.core('a').readIndex(enc('2'));
    expect(() => net.core('a').readIndex(enc('3'))).toThrow(/too many pending read-index/);
  });

  it('without a known leader a follower refuses the request', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    expect(() => net.core('b').readIndex(enc('x'))).toThrow(ProposalDroppedError);
  });

  it('a single-voter leader answers at once', () => {
    const net = TestNet.create(['a']);
    net.elect('a');
    net.core('a').readIndex(enc('solo'));
    net.drainAll();
    expect(net.node('a').readStates.map((r) => dec(r.context))).toEqual(['solo']);
  });

  it('acknowledgements from a stale heartbeat round do not release newer reads', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    net.core('a').readIndex(enc('r1'));
    const firstRound = net.takePending().filter((m) => m.type === 'heartbeat');
    net.core('a').readIndex(enc('r2'));
    net.takePending();
    // Answer only the first round: r1 is released, r2 (queued later) is not.
    for (const hb of firstRound) net.deliver(hb);
    const responses: Message[] = net.takePending().filter((m) => m.type === 'heartbeatResp');
    for (const r of responses) net.deliver(r);
    net.drain('a');
    expect(net.node('a').readStates.map((r) => dec(r.context))).toEqual(['r1']);
  });
});
