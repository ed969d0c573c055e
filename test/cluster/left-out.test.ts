/**
 * A removed member stops: how it judges, from another member's status, that it was removed (leftOutBy), and a
 * restart on data whose last applied configuration leaves it out is refused.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type ConfState, LevelLog } from '../../raft/index.js';
import { preparePeerPki } from '../../src/cluster/local.js';
import { leftOutBy, RemovedFromClusterError } from '../../src/cluster/node.js';
import { inProcessMember } from './in-process.js';

const conf = (voters: string[], learners: string[] = [], votersOutgoing: string[] = []): ConfState => ({
  voters,
  learners,
  votersOutgoing,
  learnersNext: [],
  autoLeave: false,
});

describe('leftOutBy', () => {
  const mine = { index: 10, conf: conf(['n1', 'n2', 'n3']) };

  it('a newer configuration without this member, while its own has it: removed', () => {
    expect(leftOutBy('n3', mine, { index: 11, members: ['n1', 'n2'] })).toBe(true);
    // a learner counts as a member of its own configuration too
    expect(leftOutBy('n4', { index: 12, conf: conf(['n1'], ['n4']) }, { index: 13, members: ['n1'] })).toBe(true);
  });

  it('a configuration that still has it, an older or the same one, or none said: not removed', () => {
    expect(leftOutBy('n3', mine, { index: 11, members: ['n1', 'n2', 'n3'] })).toBe(false);
    // a member behind this one (it has not applied this member's addition yet)
    expect(leftOutBy('n3', mine, { index: 9, members: ['n1', 'n2'] })).toBe(false);
    expect(leftOutBy('n3', mine, { index: 10, members: ['n1', 'n2'] })).toBe(false);
    // a member of an older release says nothing of its configuration
    expect(leftOutBy('n3', mine, undefined)).toBe(false);
  });

  it('a node that is not in its own configuration yet (joining) is not judged removed', () => {
    expect(leftOutBy('n4', { index: 0, conf: conf([]) }, { index: 11, members: ['n1', 'n2'] })).toBe(false);
    expect(leftOutBy('n4', mine, { index: 11, members: ['n1', 'n2', 'n3'] })).toBe(false);
  });

  it('either side of a joint configuration counts', () => {
    const joint = { index: 10, conf: conf(['n1', 'n2'], [], ['n1', 'n2', 'n3']) };
    expect(leftOutBy('n3', joint, { index: 11, members: ['n1', 'n2'] })).toBe(true);
    expect(leftOutBy('n3', joint, { index: 11, members: ['n1', 'n2', 'n3'] })).toBe(false);
  });
});

describe('a member restarted on the data of a removed node', () => {
  it('refuses to start, naming the removal and what to do (RemovedFromClusterError)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-left-out-'));
    try {
      await preparePeerPki(['n1', 'n3'], (id) => join(dir, id));
      // n3's Raft log as it is once n3 applied its own removal at index 7: a configuration of n1 and n2
      const log = await LevelLog.open(join(dir, 'n3', 'raft'));
      const enc = new TextEncoder();
      await log.persist({
        snapshot: null,
        entries: Array.from({ length: 7 }, (_, i) => ({
          index: i + 1,
          term: 1,
          type: 'normal' as const,
          data: enc.encode('x'),
        })),
        hardState: { term: 1, vote: 'n1', commit: 7 },
      });
      await log.setConf({ index: 7, conf: conf(['n1', 'n2']), addresses: { n1: '127.0.0.1:1', n2: '127.0.0.1:2' } });
      await log.close();
      const started = inProcessMember(dir, 'n3', { join: '127.0.0.1:1' }, { readyTimeout_ms: 2_000 });
      await expect(started).rejects.toThrow(RemovedFromClusterError);
      await expect(started).rejects.toThrow(
        /^node n3 was removed from the cluster \(its last applied configuration: the configuration at index 7 leaves it out\); to bring it back, delete its data directory and join again with --join$/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
