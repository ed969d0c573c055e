/**
 * RaftCore.takeEarly: while a Ready's write runs, the committed entries the log holds durably and the replication
 * messages that may leave early are handed out once, never again by a later Ready.
 */
import { describe, expect, it } from 'vitest';
import type { Ready } from '../types.js';
import { TestNet } from './testkit.js';

const enc = (s: string) => new TextEncoder().encode(s);

function persist(net: TestNet, id: string, rd: Ready): void {
  const log = net.node(id).log;
  if (rd.entries.length > 0) log.append(rd.entries);
  if (rd.hardState) log.setHardState(rd.hardState);
}

describe('takeEarly', () => {
  it('hands out an entry committed during the next write once, with the commit for the followers', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    const a = net.core('a');
    const durableTerm = a.status().term;
    const x = a.propose(enc('x')).index;
    const rd1 = a.ready();
    persist(net, 'a', rd1);
    a.advance(rd1); // x durable on the leader, not committed yet
    a.propose(enc('y'));
    const rd2 = a.ready(); // y's write starts
    expect(rd2.committed).toEqual([]);
    expect(a.takeEarly(durableTerm, false)).toEqual({ messages: [], committed: [] });
    // b acknowledges x during y's write: the leader and b hold it, so it commits
    for (const m of rd1.messages) if (m.to === 'b') net.core('b').step(m);
    for (const ack of net.drain('b')) if (ack.to === 'a') a.step(ack);
    expect(a.status().commit).toBe(x);
    const early = a.takeEarly(durableTerm, true);
    expect(early.committed.map((e) => e.index)).toEqual([x]);
    expect(early.messages.filter((m) => m.type === 'append').map((m) => [m.to, m.commit])).toEqual([
      ['b', x],
      ['c', x],
    ]);
    a.appliedTo(x);
    expect(a.takeEarly(durableTerm, true)).toEqual({ messages: [], committed: [] });
    persist(net, 'a', rd2);
    a.advance(rd2);
    // the next Ready does not hand x out again
    expect(a.ready().committed.some((e) => e.index === x)).toBe(false);
  });

  it('never hands out an entry this log does not hold durably yet (a quorum of the others committed it)', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    const a = net.core('a');
    const durableTerm = a.status().term;
    const conf = a.proposeConfChange({ changes: [{ type: 'addLearner', node: 'd' }] }).index;
    const rd = a.ready(); // the change's write in flight: not durable on the leader
    for (const m of rd.messages) if (m.to !== 'a') net.core(m.to).step(m);
    for (const id of ['b', 'c']) for (const ack of net.drain(id)) if (ack.to === 'a') a.step(ack);
    expect(a.status().commit).toBe(conf); // b and c hold it: committed
    expect(a.takeEarly(durableTerm, false).committed).toEqual([]); // not durable here
    persist(net, 'a', rd);
    a.advance(rd);
    const next = a.ready(); // handed out by the next Ready, once durable
    expect(next.committed.map((e) => e.index)).toContain(conf);
  });
});
