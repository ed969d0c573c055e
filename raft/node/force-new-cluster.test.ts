import { describe, expect, it } from 'vitest';
import { decodeConfChange, encodeConfChange } from '../core/codec.js';
import { computeConfChange, restoreTracker } from '../core/confchange.js';
import { ProgressTracker } from '../core/tracker.js';
import { confOf } from '../storage/log-testkit.js';
import { MemoryDurableLog } from '../storage/memory-durable-log.js';
import type { ConfChangeSingle, ConfState, Entry } from '../types.js';
import { forceNewCluster } from './force-new-cluster.js';

const conf = confOf;
const ents = (from: number, to: number, term: number): Entry[] =>
  Array.from({ length: to - from + 1 }, (_, i) => ({
    index: from + i,
    term,
    type: 'normal' as const,
    data: new Uint8Array([from + i]),
  }));

async function logWith(c: ConfState): Promise<MemoryDurableLog> {
  const log = new MemoryDurableLog();
  await log.persist({ snapshot: null, entries: ents(1, 5, 2), hardState: { term: 3, vote: 'b', commit: 3 } });
  await log.setConf({ index: 2, conf: c, addresses: {} });
  return log;
}

describe('forceNewCluster', () => {
  it('removes every other member (voters and learners) by committed changes after the last entry', async () => {
    const log = await logWith(conf(['a', 'b', 'c'], ['d']));
    expect(await forceNewCluster(log, 'a')).toEqual(['b', 'c', 'd']);
    const added = log.entries(6, 9, Infinity);
    expect(added.map((e) => [e.index, e.term, e.type])).toEqual([
      [6, 3, 'conf'],
      [7, 3, 'conf'],
      [8, 3, 'conf'],
    ]);
    expect(added.map((e) => decodeConfChange(e.data).changes)).toEqual([
      [{ type: 'removeNode', node: 'b' }],
      [{ type: 'removeNode', node: 'c' }],
      [{ type: 'removeNode', node: 'd' }],
    ]);
    // everything the log held is committed with them (entries 4 and 5 were not), and the vote is its own
    expect(log.initialState().hardState).toEqual({ term: 3, vote: 'a', commit: 8 });
    expect(log.entries(1, 6, Infinity).map((e) => e.data[0])).toEqual([1, 2, 3, 4, 5]);
  });

  /** The configuration after applying, in order, the changes written after entry 5 (the core's own rules). */
  function applied(log: MemoryDurableLog, from: ConfState): ConfState {
    let tracker = restoreTracker(from, 5, 16);
    for (const e of log.entries(6, log.lastIndex() + 1, Infinity)) {
      const r = computeConfChange(tracker, decodeConfChange(e.data), e.index);
      tracker = new ProgressTracker(r.config, r.progress, 16);
    }
    return tracker.confState();
  }

  it('leaves exactly one voter, itself, under the conf-change rules; a learner is made a voter first', async () => {
    for (const [self, c] of [
      ['a', conf(['a', 'b', 'c'], ['d'])],
      ['d', conf(['a', 'b', 'c'], ['d'])],
      ['c', conf(['a', 'b', 'c'])],
    ] as const) {
      const log = await logWith(c);
      await forceNewCluster(log, self);
      expect(applied(log, c), self).toMatchObject({ voters: [self], learners: [], votersOutgoing: [] });
    }
    const log = await logWith(conf(['a', 'b'], ['d']));
    expect(await forceNewCluster(log, 'd')).toEqual(['a', 'b']);
    expect(decodeConfChange(log.entries(6, 7, Infinity)[0]!.data).changes).toEqual([{ type: 'addVoter', node: 'd' }]);
  });

  it('takes the membership changes of the log tail (not applied yet) into account', async () => {
    const tail = async (change: ConfChangeSingle) => {
      const log = await logWith(conf(['a', 'b', 'c']));
      const data = encodeConfChange({ changes: [change] });
      await log.persist({ snapshot: null, entries: [{ index: 6, term: 3, type: 'conf', data }], hardState: null });
      return log;
    };
    // a learner added in the tail is removed too
    const added = await tail({ type: 'addLearner', node: 'e' });
    expect(await forceNewCluster(added, 'a')).toEqual(['b', 'c', 'e']);
    expect(added.initialState().hardState.commit).toBe(9);
    // a tail that removes this member: it is not a member of where its log leads
    await expect(forceNewCluster(await tail({ type: 'removeNode', node: 'a' }), 'a')).rejects.toThrow(/not a member/);
  });

  it('a member alone already: nothing written', async () => {
    const log = await logWith(conf(['a']));
    expect(await forceNewCluster(log, 'a')).toEqual([]);
    expect(log.lastIndex()).toBe(5);
    expect(log.initialState().hardState.commit).toBe(3);
  });

  it('refuses a node its own configuration does not hold, and a joint configuration', async () => {
    await expect(forceNewCluster(await logWith(conf(['b', 'c'])), 'a')).rejects.toThrow(/not a member/);
    await expect(forceNewCluster(await logWith(conf(['a', 'b'], [], ['a', 'b', 'c'])), 'a')).rejects.toThrow(/joint/);
  });
});
