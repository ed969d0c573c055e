/**
 * The leader counts its own entries toward a commit only once they are durable (advance() of the Ready that
 * carries them), so the driver may send its appends while its own write is in flight (core/early-send.ts).
 * An entry the leader has not persisted commits only when a majority of the voters, without the leader, holds it.
 */
import { describe, expect, it } from 'vitest';
import { MemoryLog } from '../memory-log.js';
import type { Ready } from '../types.js';
import { splitMessages } from './early-send.js';
import { RaftCore } from './raft.js';
import { confOf, coreOptions, entries, seedLog, TestNet } from './testkit.js';

const enc = (s: string) => new TextEncoder().encode(s);

/** The driver's step 1 for `rd`, without advancing. */
function persist(log: MemoryLog, rd: Ready): void {
  log.receiveSnapshot(rd.snapshotChunks);
  if (rd.snapshot) log.applySnapshot(rd.snapshot);
  if (rd.entries.length > 0) log.append(rd.entries);
  if (rd.hardState) log.setHardState(rd.hardState);
}

describe('the leader counts its own entries only once durable', () => {
  it('a single voter commits its entry only after advancing the Ready that persisted it', () => {
    const net = TestNet.create(['a'], {}, ['l']);
    net.elect('a');
    const a = net.core('a');
    const log = net.node('a').log;
    expect(a.status().role).toBe('leader');
    const before = a.status().commit;
    const { index } = a.propose(enc('x'));
    const rd = a.ready();
    expect(rd.entries.map((e) => e.index)).toEqual([index]);
    expect(rd.committed.some((e) => e.index === index)).toBe(false);
    // The learner gets the entry while the leader's write is in flight, with a commit below it.
    const { beforePersist, afterPersist } = splitMessages(rd, log.initialState().hardState.term);
    expect(afterPersist).toEqual([]);
    expect(beforePersist.some((m) => m.to === 'l' && m.entries.some((e) => e.index === index))).toBe(true);
    for (const m of beforePersist) expect(m.commit).toBeLessThan(index);
    // The learner's acknowledgement, time passing, more proposals: still not committed.
    for (const m of beforePersist) net.core('l').step(m);
    for (const ack of net.drain('l')) a.step(ack);
    a.tick();
    a.propose(enc('y'));
    a.tick();
    expect(a.status().commit).toBe(before);
    persist(log, rd);
    a.advance(rd);
    expect(a.status().commit).toBe(index);
    const next = a.ready();
    expect(next.committed.map((e) => e.index)).toContain(index);
    // 'y' was appended after the Ready was taken: not durable, not committed.
    expect(next.committed.some((e) => e.index === index + 1)).toBe(false);
  });

  it('in a 3-voter cluster, an entry the leader has not persisted commits only once both others hold it', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    const a = net.core('a');
    expect(a.status().role).toBe('leader');
    const before = a.status().commit;
    const { index } = a.propose(enc('x'));
    const rd = a.ready(); // the leader's write of `x` is in flight from here on
    const { beforePersist, afterPersist } = splitMessages(rd, net.node('a').log.initialState().hardState.term);
    expect(afterPersist).toEqual([]);
    const toB = beforePersist.filter((m) => m.to === 'b');
    const toC = beforePersist.filter((m) => m.to === 'c');
    expect(toB.some((m) => m.entries.some((e) => e.index === index))).toBe(true);
    // b persists and acknowledges: b alone is no majority without the leader's durable copy.
    for (const m of toB) net.core('b').step(m);
    for (const ack of net.drain('b')) if (ack.to === 'a') a.step(ack);
    expect(a.status().commit).toBe(before);
    // c too: b and c are a majority of the voters, so it commits though the leader's write is still in flight.
    for (const m of toC) net.core('c').step(m);
    for (const ack of net.drain('c')) if (ack.to === 'a') a.step(ack);
    expect(a.status().commit).toBe(index);
    persist(net.node('a').log, rd);
    a.advance(rd);
    expect(a.ready().committed.map((e) => e.index)).toContain(index);
  });

  it('in a 3-voter cluster, one follower plus the leader commit once the leader advances its write', () => {
    const net = TestNet.create(['a', 'b', 'c']);
    net.elect('a');
    const a = net.core('a');
    const before = a.status().commit;
    const { index } = a.propose(enc('x'));
    const rd = a.ready();
    for (const m of rd.messages) if (m.to === 'b') net.core('b').step(m);
    for (const ack of net.drain('b')) if (ack.to === 'a') a.step(ack);
    expect(a.status().commit).toBe(before);
    persist(net.node('a').log, rd);
    a.advance(rd);
    expect(a.status().commit).toBe(index);
  });

  it('a leader elected in this very Ready sends nothing before its term is durable', () => {
    const log = new MemoryLog({ conf: confOf(['a'], ['l']) });
    const core = new RaftCore(coreOptions('a', log));
    for (let i = 0; i < 30 && core.status().role !== 'leader'; i++) core.tick();
    expect(core.status().role).toBe('leader');
    const rd = core.ready();
    expect(rd.hardState?.term).toBeGreaterThan(log.initialState().hardState.term);
    const { beforePersist, afterPersist } = splitMessages(rd, log.initialState().hardState.term);
    expect(beforePersist).toEqual([]);
    expect(afterPersist.some((m) => m.type === 'append' && m.to === 'l')).toBe(true);
  });

  it('a re-elected single voter answers a read only once its own noop is durable and committed', () => {
    // Entry 3 was committed and applied before a crash, but the commit index was written lazily: the log says 2.
    const log = new MemoryLog({ conf: confOf(['a']) });
    seedLog(log, entries(1, [1, 1, 1]), 1, 2, 'a');
    const core = new RaftCore(coreOptions('a', log, { applied: 2 }));
    for (let i = 0; i < 30 && core.status().role !== 'leader'; i++) core.tick();
    expect(core.status().role).toBe('leader');
    const rd = core.ready(); // the new term, the vote and the noop at 4
    expect(rd.entries.map((e) => e.index)).toEqual([4]);
    persist(log, rd);
    // Answering now would say 2 (or 3): below the entry at 3 that was already applied.
    core.readIndex(enc('r'));
    expect(core.status().commit).toBe(2);
    core.advance(rd);
    expect(core.status().commit).toBe(4);
    const next = core.ready();
    expect(next.readStates).toEqual([{ index: 4, context: enc('r') }]);
  });
});
