/**
 * untilReady (src/cluster/ready.ts): a starting member is ready once it knows a leader and a read index is applied;
 * a read index that timed out or met a change of leader is asked again while time remains, anything else ends it.
 */
import { describe, expect, it } from 'vitest';
import { RaftError, type RaftErrorCode } from '../../raft/index.js';
import { MAX_READY_ATTEMPTS, type ReadySource, untilReady } from '../../src/cluster/ready.js';

/** A source whose read indexes fail with `codes` in turn (a code, or an Error thrown as it is), then succeed. */
function source(failures: Array<RaftErrorCode | Error>, removal: Error | null = null) {
  const calls = { leader: 0, read: 0, retries: [] as RaftErrorCode[] };
  const s: ReadySource = {
    waitForLeader: async () => {
      calls.leader++;
      return 'n1';
    },
    readIndex: async () => {
      const f = failures[calls.read++];
      if (f === undefined) return 7;
      throw typeof f === 'string' ? new RaftError(f, `read refused: ${f}`) : f;
    },
    removal: () => removal,
    onRetry: (code) => calls.retries.push(code),
  };
  return { s, calls };
}

describe('untilReady', () => {
  it('asks again after a timed-out read and a change of leader, each time after a leader is known', async () => {
    const { s, calls } = source(['timeout', 'leadership-lost', 'not-leader']);
    await untilReady(s, 5_000);
    expect(calls.read).toBe(4);
    expect(calls.leader).toBe(4);
    expect(calls.retries).toEqual(['timeout', 'leadership-lost', 'not-leader']);
  });

  it('ends at once on any other error', async () => {
    const fatal = source(['fatal']);
    await expect(untilReady(fatal.s, 5_000)).rejects.toThrow(/read refused: fatal/);
    expect(fatal.calls.read).toBe(1);
    const other = source([new Error('disk gone')]);
    await expect(untilReady(other.s, 5_000)).rejects.toThrow('disk gone');
    expect(other.calls.read).toBe(1);
  });

  it('throws a removal learnt meanwhile in place of the read error', async () => {
    const removed = new Error('node n3 was removed from the cluster');
    const { s, calls } = source(['timeout'], removed);
    await expect(untilReady(s, 5_000)).rejects.toBe(removed);
    expect(calls.read).toBe(1);
  });

  it('is bounded: by the attempts, and by the time given', async () => {
    const many = source(Array.from({ length: 100 }, () => 'timeout' as const));
    await expect(untilReady(many.s, 60_000)).rejects.toThrow(/read refused: timeout/);
    expect(many.calls.read).toBe(MAX_READY_ATTEMPTS);
    const late = source(['timeout', 'timeout']);
    await expect(untilReady(late.s, 0)).rejects.toThrow(/read refused: timeout/);
    expect(late.calls.read).toBe(1);
  });
});
