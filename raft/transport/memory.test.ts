import { describe, expect, it } from 'vitest';
import type { Message, NodeId } from '../types.js';
import { MemoryNetwork } from './memory.js';

function msg(from: NodeId, to: NodeId, index: number): Message {
  return {
    type: 'heartbeat',
    from,
    to,
    term: 1,
    logTerm: 0,
    index,
    entries: [],
    commit: 0,
    reject: false,
    rejectHint: 0,
    context: new Uint8Array([index]),
  };
}

const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('MemoryNetwork', () => {
  it('delivers copies asynchronously, drops, delays and partitions on demand', async () => {
    const net = new MemoryNetwork();
    const a = net.join('a');
    const b = net.join('b');
    a.addPeer('b', 'mem:b');
    b.addPeer('a', 'mem:a');
    const got: Message[] = [];
    b.onMessage((m) => got.push(m));
    const sent = msg('a', 'b', 1);
    a.send([sent]);
    expect(got).toHaveLength(0);
    await tick();
    expect(got).toHaveLength(1);
    expect(got[0]).not.toBe(sent);
    expect([...got[0]!.context!]).toEqual([1]);

    net.filter = (m) => (m.index === 2 ? 'drop' : m.index === 3 ? 30 : 'deliver');
    a.send([msg('a', 'b', 2), msg('a', 'b', 3), msg('a', 'b', 4)]);
    await tick(5);
    expect(got.map((m) => m.index)).toEqual([1, 4]);
    await tick(40);
    expect(got.map((m) => m.index)).toEqual([1, 4, 3]);

    net.filter = null;
    net.partition('a', 'b');
    a.send([msg('a', 'b', 5)]);
    await tick(5);
    expect(got).toHaveLength(3);
    net.heal();
    a.send([msg('a', 'b', 6)]);
    await tick(5);
    expect(got.map((m) => m.index)).toEqual([1, 4, 3, 6]);
  });

  it('reports unknown or absent peers as unreachable and ignores strangers', async () => {
    const net = new MemoryNetwork({ maxInflightPerNode: 2 });
    const a = net.join('a');
    const b = net.join('b');
    const unreachable: NodeId[] = [];
    a.onUnreachable((peer) => unreachable.push(peer));
    a.send([msg('a', 'b', 1)]);
    expect(unreachable).toEqual(['b']); // not added as a peer
    a.addPeer('b', 'mem:b');
    a.addPeer('c', 'mem:c');
    a.send([msg('a', 'c', 1)]);
    expect(unreachable).toEqual(['b', 'c']); // c never joined
    const got: Message[] = [];
    b.onMessage((m) => got.push(m));
    a.send([msg('a', 'b', 1), msg('a', 'b', 2), msg('a', 'b', 3)]);
    expect(unreachable).toEqual(['b', 'c', 'b']); // third exceeds the in-flight bound
    await tick();
    expect(got).toHaveLength(0); // b does not know a
    expect(a.peers().find((p) => p.id === 'b')?.sent_msgs).toBe(2);
  });
});
