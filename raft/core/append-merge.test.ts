/**
 * Appends queued for the same follower within one Ready travel as one message (RaftCore.mergeQueuedAppend):
 * proposals of several turns and the commit index they reach, one message per follower instead of one each.
 */
import { describe, expect, it } from 'vitest';
import type { Message, Ready } from '../types.js';
import { TestNet } from './testkit.js';

const enc = (s: string) => new TextEncoder().encode(s);

function persistAndAdvance(net: TestNet, id: string, rd: Ready): void {
  const log = net.node(id).log;
  if (rd.entries.length > 0) log.append(rd.entries);
  if (rd.hardState) log.setHardState(rd.hardState);
  net.core(id).advance(rd);
}

const appendsTo = (msgs: Message[], to: string) => msgs.filter((m) => m.type === 'append' && m.to === to);

describe('appends queued for one follower merge', () => {
  it('a commit reached while a newer proposal is queued rides on that proposal’s append', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    const a = net.core('a');
    const x = a.propose(enc('x')).index;
    const rd1 = a.ready(); // x's appends leave; the leader's write of x is in flight
    const y = a.propose(enc('y')).index; // queued: an append of y to b and to c
    // b and c acknowledge x: a majority without the leader, so x commits now and the commit goes out
    for (const m of rd1.messages) net.core(m.to).step(m);
    for (const id of ['b', 'c']) for (const ack of net.drain(id)) if (ack.to === 'a') a.step(ack);
    expect(a.status().commit).toBe(x);
    persistAndAdvance(net, 'a', rd1);
    const rd2 = a.ready();
    for (const id of ['b', 'c']) {
      const appends = appendsTo(rd2.messages, id);
      expect(appends).toHaveLength(1);
      expect(appends[0]!.entries.map((e) => e.index)).toEqual([y]);
      expect(appends[0]!.commit).toBe(x);
    }
    // the follower takes it as it would the two messages: y appended, x committed
    const toB = appendsTo(rd2.messages, 'b')[0]!;
    net.core('b').step(toB);
    expect(net.core('b').status().commit).toBe(x);
    expect(net.core('b').status().lastIndex).toBe(y);
  });

  it('proposals of several turns within one Ready go to each follower in one append', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    const a = net.core('a');
    const first = a.propose(enc('p1')).index;
    a.propose(enc('p2'));
    const last = a.propose(enc('p3')).index;
    const rd = a.ready();
    for (const id of ['b', 'c']) {
      const appends = appendsTo(rd.messages, id);
      expect(appends).toHaveLength(1);
      expect(appends[0]!.entries.map((e) => e.index)).toEqual([first, first + 1, last]);
    }
  });

  it('not beyond maxMsgBytes: the next append is a message of its own', () => {
    const net = TestNet.create(['a', 'b', 'c'], { maxMsgBytes: 600 });
    net.elect('a');
    const a = net.core('a');
    a.propose(new Uint8Array(300));
    a.propose(new Uint8Array(300));
    const rd = a.ready();
    for (const id of ['b', 'c']) {
      const appends = appendsTo(rd.messages, id);
      expect(appends.map((m) => m.entries.length)).toEqual([1, 1]);
      expect(appends[1]!.index).toBe(appends[0]!.index + 1);
    }
  });
});
