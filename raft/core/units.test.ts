/** Unit tests of the core's building blocks, the in-memory log and the PRNG. */
import { describe, expect, it } from 'vitest';
import { MemoryLog } from '../memory-log.js';
import { SeededRandom } from '../random.js';
import { CompactedError, type Entry, UnavailableError } from '../types.js';
import { decodeConfChange, encodeConfChange } from './codec.js';
import { RaftLog } from './log.js';
import { Inflights, Progress, SnapshotStream } from './progress.js';
import { jointCommittedIndex, jointVoteResult, majorityCommittedIndex, majorityVoteResult } from './quorum.js';
import { ReadOnly } from './read-only.js';
import { confOf, entries, seedLog } from './testkit.js';
import { Unstable } from './unstable.js';

const set = (...ids: string[]) => new Set(ids);

describe('quorum', () => {
  it('majority commit index is the highest index acknowledged by a majority', () => {
    const acked: Record<string, number> = { a: 5, b: 3, c: 9, d: 1, e: 7 };
    expect(majorityCommittedIndex(set('a', 'b', 'c'), (id) => acked[id] ?? 0)).toBe(5);
    expect(majorityCommittedIndex(set('a', 'b', 'c', 'd'), (id) => acked[id] ?? 0)).toBe(3);
    expect(majorityCommittedIndex(set('a', 'b', 'c', 'd', 'e'), (id) => acked[id] ?? 0)).toBe(5);
    expect(majorityCommittedIndex(set('a', 'x'), (id) => acked[id] ?? 0)).toBe(0);
  });

  it('majority commit index of any voter set size (sorted in place in a buffer grown past 16 voters)', () => {
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let n = 1; n <= 24; n++) {
      for (let trial = 0; trial < 20; trial++) {
        const acked = new Map(Array.from({ length: n }, (_, i) => [`v${i}`, rnd(50) + (i === 0 ? 2 ** 40 : 0)]));
        const sorted = [...acked.values()].sort((a, b) => a - b);
        const expected = sorted[n - (Math.floor(n / 2) + 1)];
        expect(majorityCommittedIndex(new Set(acked.keys()), (id) => acked.get(id)!)).toBe(expected);
      }
    }
  });

  it('joint commit index is the minimum of both majorities; an empty half imposes nothing', () => {
    const acked: Record<string, number> = { a: 5, b: 5, c: 1, d: 2, e: 2 };
    const f = (id: string) => acked[id] ?? 0;
    expect(jointCommittedIndex(set('a', 'b', 'c'), set('c', 'd', 'e'), f)).toBe(2);
    expect(jointCommittedIndex(set('a', 'b', 'c'), set(), f)).toBe(5);
  });

  it('vote results: won, pending, lost; joint needs both', () => {
    const votes = new Map([
      ['a', true],
      ['b', false],
    ]);
    const v = (id: string) => votes.get(id);
    expect(majorityVoteResult(set('a', 'b', 'c'), v)).toBe('pending');
    votes.set('c', true);
    expect(majorityVoteResult(set('a', 'b', 'c'), v)).toBe('won');
    votes.set('c', false);
    expect(majorityVoteResult(set('a', 'b', 'c'), v)).toBe('lost');
    expect(majorityVoteResult(set(), v)).toBe('won');
    votes.set('c', true);
    expect(jointVoteResult(set('a', 'b', 'c'), set('b', 'd', 'e'), v)).toBe('pending');
    votes.set('d', false);
    expect(jointVoteResult(set('a', 'b', 'c'), set('b', 'd', 'e'), v)).toBe('lost');
  });
});

describe('inflights and progress', () => {
  it('inflights is a bounded window freed by acknowledgements', () => {
    const w = new Inflights(3);
    w.add(2);
    w.add(5);
    w.add(9);
    expect(w.full()).toBe(true);
    expect(() => w.add(10)).toThrow(/full/);
    w.freeLE(5);
    expect(w.size).toBe(1);
    w.add(12);
    w.add(15);
    expect(w.full()).toBe(true);
    w.freeLE(100);
    expect(w.size).toBe(0);
    expect(() => {
      w.add(20);
      w.add(19);
    }).toThrow(/not after/);
  });

  it('probe pauses after one message; replicate pipelines until the window is full', () => {
    const p = new Progress(5, new Inflights(2), false);
    p.sentEntries(3, 7);
    expect(p.isPaused()).toBe(true);
    expect(p.maybeUpdate(7)).toBe(true);
    expect(p.isPaused()).toBe(false);
    p.becomeReplicate();
    expect(p.next).toBe(8);
    p.sentEntries(2, 9);
    expect(p.isPaused()).toBe(false);
    p.sentEntries(2, 11);
    expect(p.isPaused()).toBe(true);
    p.inflights.freeLE(9);
    expect(p.inflights.full()).toBe(false);
  });

  it('maybeDecrTo ignores stale rejections and uses the hint', () => {
    const p = new Progress(11, new Inflights(4), false);
    p.match = 3;
    // Probe state: only a rejection of next-1 counts.
    expect(p.maybeDecrTo(7, 2)).toBe(false);
    expect(p.maybeDecrTo(10, 5)).toBe(true);
    expect(p.next).toBe(6);
    // Never below match+1.
    expect(p.maybeDecrTo(5, 0)).toBe(true);
    expect(p.next).toBe(4);
    // Replicate state: rejections at or below match are stale; otherwise back to match+1.
    p.becomeReplicate();
    expect(p.maybeDecrTo(3, 0)).toBe(false);
    expect(p.maybeDecrTo(8, 0)).toBe(true);
    expect(p.next).toBe(4);
  });

  it('leaving snapshot state probes after the snapshot', () => {
    const p = new Progress(2, new Inflights(4), false);
    const snap = { meta: { index: 50, term: 3, conf: confOf(['a']) }, size_bytes: 25 };
    p.becomeSnapshot(50, new SnapshotStream(snap, 10));
    expect(p.isPaused()).toBe(true);
    expect(p.stream?.totalChunks).toBe(3);
    p.becomeProbe();
    expect(p.next).toBe(51);
    expect(p.stream).toBeNull();
  });
});

describe('unstable', () => {
  it('truncates and appends, tracking what was handed out', () => {
    const u = new Unstable(5);
    u.truncateAndAppend(entries(5, [1, 1, 1]));
    expect(u.nextEntries().map((e) => e.index)).toEqual([5, 6, 7]);
    u.acceptInProgress();
    expect(u.hasNextEntries()).toBe(false);
    // A conflicting append replaces 6..7: the new entries must be handed out again.
    u.truncateAndAppend(entries(6, [2, 2]));
    expect(u.nextEntries().map((e) => `${e.index}@${e.term}`)).toEqual(['6@2', '7@2']);
    // Persisting 7@1 (the replaced entry) must not drop the new 7@2.
    u.stableTo(7, 1);
    expect(u.maybeTerm(7)).toBe(2);
    u.stableTo(7, 2);
    expect(u.entries).toEqual([]);
    expect(u.offset).toBe(8);
  });

  it('restore replaces everything with a snapshot', () => {
    const u = new Unstable(1);
    u.truncateAndAppend(entries(1, [1, 1]));
    u.restore({ meta: { index: 10, term: 4, conf: confOf(['a']) }, size_bytes: 0 });
    expect(u.maybeLastIndex()).toBe(10);
    expect(u.maybeTerm(10)).toBe(4);
    expect(u.maybeTerm(2)).toBeNull();
    expect(u.nextSnapshot()?.meta.index).toBe(10);
  });
});

describe('raft log', () => {
  function log(terms: number[], commit = 0): RaftLog {
    const ml = new MemoryLog({ conf: confOf(['a']) });
    seedLog(ml, entries(1, terms), terms[terms.length - 1] ?? 0, commit);
    const l = new RaftLog(ml);
    l.committed = commit;
    return l;
  }

  it('findConflictByTerm returns the last index whose term is <= the given term', () => {
    const l = log([1, 1, 2, 2, 5, 5, 5]);
    expect(l.findConflictByTerm(7, 4)).toEqual([4, 2]);
    expect(l.findConflictByTerm(7, 5)).toEqual([7, 5]);
    expect(l.findConflictByTerm(3, 1)).toEqual([2, 1]);
    expect(l.findConflictByTerm(7, 0)).toEqual([0, 0]);
  });

  it('maybeAppend refuses a mismatching prev entry and never truncates committed entries', () => {
    const l = log([1, 1, 2], 2);
    expect(l.maybeAppend(3, 1, 3, entries(4, [3]))).toBe(-1);
    expect(l.maybeAppend(3, 2, 9, entries(4, [3]))).toBe(4);
    expect(l.committed).toBe(4);
    const l2 = log([1, 1, 2], 3);
    expect(() => l2.maybeAppend(1, 1, 3, entries(2, [3]))).toThrow(/conflicts with committed/);
  });

  it('slices across stable and unstable entries within a byte budget', () => {
    const l = log([1, 1, 1]);
    l.append(entries(4, [2, 2]));
    expect(l.slice(2, 6, 1 << 20).map((e) => e.index)).toEqual([2, 3, 4, 5]);
    // Each entry counts 3 payload bytes + 16: 40 bytes hold two.
    expect(l.slice(2, 6, 40).map((e) => e.index)).toEqual([2, 3]);
    expect(l.slice(2, 6, 1).map((e) => e.index)).toEqual([2]);
    expect(() => l.slice(0, 2, 100)).toThrow(CompactedError);
    expect(() => l.slice(2, 9, 100)).toThrow(UnavailableError);
  });

  it('up-to-date comparison uses the last term, then the length', () => {
    const l = log([1, 2, 2]);
    expect(l.isUpToDate(3, 2)).toBe(true);
    expect(l.isUpToDate(2, 2)).toBe(false);
    expect(l.isUpToDate(1, 3)).toBe(true);
    expect(l.isUpToDate(10, 1)).toBe(false);
  });
});

describe('conf change codec', () => {
  it('round-trips changes, transition and context; the empty change is zero bytes', () => {
    const cc = {
      changes: [
        { type: 'addVoter' as const, node: 'n1' },
        { type: 'removeNode' as const, node: 'n2' },
        { type: 'addLearner' as const, node: 'n3' },
      ],
      transition: 'joint' as const,
      context: new Uint8Array([1, 2, 3]),
    };
    expect(decodeConfChange(encodeConfChange(cc))).toEqual(cc);
    expect(encodeConfChange({ changes: [] }).byteLength).toBe(0);
    expect(decodeConfChange(new Uint8Array(0))).toEqual({ changes: [] });
    expect(() => decodeConfChange(new Uint8Array([0x91, 0x05]))).toThrow(/malformed/);
  });
});

describe('read-only queue', () => {
  it('releases every request up to an acknowledged one, and is bounded', () => {
    const ro = new ReadOnly(3);
    const s1 = ro.add(5, { from: 'a', context: new Uint8Array([1]) });
    const s2 = ro.add(6, { from: 'b', context: new Uint8Array([2]) });
    ro.add(7, { from: 'a', context: new Uint8Array([3]) });
    expect(ro.full()).toBe(true);
    expect(() => ro.add(8, { from: 'a', context: new Uint8Array([4]) })).toThrow(/full/);
    expect(ro.recvAck('x', 999)).toBeNull();
    expect([...(ro.recvAck('b', s2) ?? [])]).toEqual(['b']);
    expect(ro.advance(s2).map((r) => r.index)).toEqual([5, 6]);
    expect(ro.advance(s1)).toEqual([]);
    expect(ro.size).toBe(1);
  });
});

describe('memory log', () => {
  it('appends, overwrites a suffix, compacts up to the snapshot and answers range queries', () => {
    const ml = new MemoryLog({ conf: confOf(['a']) });
    ml.append(entries(1, [1, 1, 1, 1]));
    ml.append(entries(3, [2]));
    expect(ml.lastIndex()).toBe(3);
    expect(ml.term(3)).toBe(2);
    ml.append(entries(4, [2, 2]));
    ml.setHardState({ term: 2, vote: null, commit: 4 });
    expect(() => ml.compact(2)).toThrow(/beyond snapshot/);
    const snap = ml.createSnapshot(3, confOf(['a', 'b']), new Uint8Array([9]));
    expect(snap.meta).toMatchObject({ index: 3, term: 2 });
    ml.compact(3);
    expect(ml.firstIndex()).toBe(4);
    expect(ml.term(3)).toBe(2);
    expect(() => ml.term(2)).toThrow(CompactedError);
    expect(() => ml.entries(3, 5, 100)).toThrow(CompactedError);
    expect(() => ml.term(9)).toThrow(UnavailableError);
    expect(ml.initialState().conf.voters).toEqual(['a', 'b']);
    expect(() => ml.append(entries(4, [3]))).toThrow(/overwrite committed/);
  });

  it('applySnapshot replaces the log; stale snapshots are refused', () => {
    const ml = new MemoryLog();
    ml.append(entries(1, [1, 1]));
    const snap = { meta: { index: 10, term: 3, conf: confOf(['x']) }, data: new Uint8Array([1]) };
    ml.applySnapshot(snap);
    expect([ml.firstIndex(), ml.lastIndex(), ml.term(10)]).toEqual([11, 10, 3]);
    expect(() => ml.applySnapshot({ ...snap, meta: { ...snap.meta, index: 5 } })).toThrow(/not newer/);
    ml.append([{ index: 11, term: 3, type: 'normal', data: new Uint8Array(0) } satisfies Entry]);
    expect(ml.lastIndex()).toBe(11);
  });

  it('bootstrap writes the initial voters as committed conf entries', () => {
    const ml = new MemoryLog();
    ml.bootstrap(['a', 'b']);
    expect(ml.lastIndex()).toBe(2);
    expect(ml.getHardState()).toEqual({ term: 1, vote: null, commit: 2 });
    expect(ml.entries(1, 3, 1 << 20).map((e) => decodeConfChange(e.data).changes)).toEqual([
      [{ type: 'addVoter', node: 'a' }],
      [{ type: 'addVoter', node: 'b' }],
    ]);
    expect(() => ml.bootstrap(['c'])).toThrow(/empty log/);
  });
});

describe('seeded random', () => {
  it('is deterministic per seed, uniform enough, and within bounds', () => {
    const a = new SeededRandom(42);
    const b = new SeededRandom(42);
    const xs = Array.from({ length: 100 }, () => a.int(1000));
    expect(Array.from({ length: 100 }, () => b.int(1000))).toEqual(xs);
    expect(new SeededRandom(43).int(1000)).not.toBe(new SeededRandom(42).int(1000));
    const counts = new Array(10).fill(0);
    const r = new SeededRandom(7);
    for (let i = 0; i < 10_000; i++) counts[r.int(10)]++;
    for (const c of counts) expect(c).toBeGreaterThan(850);
    expect(() => r.int(0)).toThrow();
  });
});
