/**
 * A removed member stops: how it judges, from another member's status, that it was removed (leftOutBy); a restart
 * on data where it recorded its removal is refused, one where only its last configuration leaves it out is not.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LevelLog } from '../../raft/index.js';
import { confOf } from '../../raft/storage/log-testkit.js';
import { preparePeerPki } from '../../src/cluster/local.js';
import {
  type ConfAnswer,
  judgeOwnRemoval,
  leftOutBy,
  REMOVED_FILE,
  type RemovalJudge,
  RemovedFromClusterError,
  removalVerdict,
} from '../../src/cluster/removal.js';
import { inProcessMember } from './in-process.js';

const conf = confOf;

describe('removalVerdict: a removal of this node it applied, judged by the members', () => {
  // n3 was removed at index 12, which left the voters n1, n2 and n4; `*` marks the member that says it leads
  const voters = ['n1', 'n2', 'n4'];
  type Conf = { index: number; members: string[] } | undefined;
  const again: Conf = { index: 20, members: ['n1', 'n2', 'n3'] }; // added again since
  const without: Conf = { index: 12, members: ['n1', 'n2', 'n4'] }; // the removal itself
  const later: Conf = { index: 15, members: ['n1', 'n2', 'n4', 'n5'] }; // past it, still without n3
  const older: Conf = { index: 11, members: ['n1', 'n2', 'n3', 'n4'] }; // a member behind the removal
  const cases: Array<[string, Array<[string, Conf]>, string, string[]?]> = [
    ['a member holds a newer configuration with it', [['n1', again]], 'history'],
    // one such answer is enough: those behind the addition have not applied it yet
    [
      'one newer with it, whatever the others say',
      [
        ['n1*', without],
        ['n2', without],
        ['n4', again],
      ],
      'history',
    ],
    [
      'the leader and a majority of the voters left, without it',
      [
        ['n1*', without],
        ['n2', later],
      ],
      'removed',
    ],
    [
      'every voter left without it, the leader among them',
      [
        ['n1', without],
        ['n2*', without],
        ['n4', later],
      ],
      'removed',
    ],
    // the leader may have applied an addition that the others have not yet (it sends a joining node the log only
    // once it has): without the leader's word, a majority proves nothing
    [
      'a majority without it, the leader not among the answers',
      [
        ['n1', without],
        ['n2', without],
      ],
      'unknown',
    ],
    ['the leader alone without it', [['n1*', without]], 'unknown'],
    [
      'a leader outside the voters left, and one voter',
      [
        ['n5*', later],
        ['n1', without],
      ],
      'unknown',
    ],
    [
      'a leader outside the voters left, and a majority',
      [
        ['n5*', later],
        ['n1', without],
        ['n2', later],
      ],
      'removed',
    ],
    ['no answer', [], 'unknown'],
    [
      'a member behind the removal',
      [
        ['n1*', without],
        ['n2', older],
      ],
      'unknown',
    ],
    [
      'a member of an older release (says nothing)',
      [
        ['n1*', without],
        ['n2', undefined],
      ],
      'unknown',
    ],
    [
      "a learner's answer does not count towards the voters",
      [
        ['n1*', without],
        ['l9', without],
      ],
      'unknown',
    ],
    // a configuration at the removal's own index that holds the node cannot be: it proves nothing either way
    ['its own index, with it', [['n1*', { index: 12, members: ['n3'] }]], 'unknown'],
    ['no voters known', [['n1*', without]], 'unknown', []],
  ];
  for (const [what, answers, verdict, of] of cases) {
    it(`${verdict}: ${what}`, () => {
      const asked = new Map(answers.map(([id, conf]) => [id.replace('*', ''), { conf, leads: id.endsWith('*') }]));
      expect(removalVerdict('n3', 12, of ?? voters, asked)).toBe(verdict);
    });
  }
});

describe('judgeOwnRemoval: the rounds of judging', () => {
  const LIMITS = { judgeRounds: 4, watchRounds: 12, wait_ms: 500 };
  const VOTERS = ['n1', 'n2', 'n4'];
  const removedAt = (index: number) => ({ index, conf: conf(VOTERS), addresses: {} });
  const withIt = (index: number) => ({ index, conf: conf([...VOTERS, 'n3']), addresses: {} });
  const answer = (index: number, members: string[], leads = false): ConfAnswer => ({ conf: { index, members }, leads });
  const HISTORY = new Map([['n1', answer(20, [...VOTERS, 'n3'], true)]]);
  const NONE = new Map<string, ConfAnswer>();

  /**
   * n3 judging its removal at `target` with `answers(round)` from the members each round and `applied(round)` as its
   * applied configuration; `each(round)` runs before a round's answers (to move things on). What it did, by round.
   */
  async function judge(opts: {
    target: number;
    answers: (round: number) => ReadonlyMap<string, ConfAnswer>;
    applied?: (round: number) => ReturnType<RemovalJudge['appliedConf']>;
    each?: (round: number, j: { target: number; over: boolean }) => void;
  }) {
    const state = { target: opts.target, over: false };
    let round = 0;
    const removed: Array<[number, string]> = [];
    const logs: string[] = [];
    let sleeps = 0;
    await judgeOwnRemoval(
      'n3',
      {
        target: () => state.target,
        over: () => state.over,
        appliedConf: () => (opts.applied ?? (() => removedAt(state.target)))(round),
        ask: async () => {
          opts.each?.(round, state);
          return opts.answers(round++);
        },
        removed: (index, how) => removed.push([index, how]),
        log: (level, msg) => logs.push(`${level}: ${msg}`),
        sleep: async () => {
          sleeps++;
        },
      },
      LIMITS,
    );
    return { removed, logs, asked: round, sleeps };
  }

  it('no member tells: after judgeRounds rounds its own apply counts as the removal', async () => {
    const r = await judge({ target: 12, answers: () => NONE });
    expect(r.asked).toBe(LIMITS.judgeRounds);
    expect(r.removed).toEqual([[12, 'it applied its own removal, and no member told otherwise']]);
  });

  it('the leader and a majority say removed: removed at once', async () => {
    const gone = new Map([
      ['n1', answer(12, VOTERS, true)],
      ['n2', answer(12, VOTERS)],
    ]);
    const r = await judge({ target: 12, answers: (round) => (round < 1 ? NONE : gone) });
    expect(r.asked).toBe(2);
    expect(r.removed).toEqual([[12, 'it applied its own removal']]);
  });

  it('history: it watches past judgeRounds, and stops once it applies its addition again, not removed', async () => {
    const again = LIMITS.judgeRounds + 3;
    const r = await judge({
      target: 12,
      answers: () => HISTORY,
      applied: (round) => (round < again ? removedAt(12) : withIt(20)),
    });
    expect(r.removed).toEqual([]);
    expect(r.asked).toBe(again);
    expect(r.logs).toEqual(['info: replayed an earlier removal of this id: it was added again since']);
  });

  it('history, its addition never applied: it gives up watching after watchRounds, not removed', async () => {
    const r = await judge({ target: 12, answers: () => HISTORY });
    expect(r.removed).toEqual([]);
    expect(r.asked).toBe(LIMITS.watchRounds);
    expect(r.logs.at(-1)).toBe("warn: stopped watching for this node's addition again");
  });

  it('a later removal arriving while it watches an earlier one judged history is judged from its first round', async () => {
    // while round 2 asks: it applied its addition at 20 and its removal again at 30; nobody answers any more
    const r = await judge({
      target: 12,
      answers: (round) => (round < 2 ? HISTORY : NONE),
      each: (round, state) => {
        if (round === 2) state.target = 30;
      },
    });
    expect(r.removed).toEqual([[30, 'it applied its own removal, and no member told otherwise']]);
    // rounds 0-2 on the first removal; then judgeRounds rounds on the second
    expect(r.asked).toBe(3 + LIMITS.judgeRounds);
  });

  it('over from outside (stopped, or removal learnt otherwise): it ends without a verdict of its own', async () => {
    const r = await judge({
      target: 12,
      answers: () => NONE,
      each: (round, state) => {
        if (round === 1) state.over = true;
      },
    });
    expect(r.removed).toEqual([]);
    expect(r.asked).toBe(2);
  });
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
  const recordedConfOf = async (dir: string, id: string, voters: string[]) => {
    // a Raft log whose last applied configuration (index 7) is `voters`
    const log = await LevelLog.open(join(dir, id, 'raft'));
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
    await log.setConf({ index: 7, conf: conf(voters), addresses: { n1: '127.0.0.1:1', n2: '127.0.0.1:2' } });
    await log.close();
  };

  it('refuses to start once it recorded its removal, naming it and what to do (RemovedFromClusterError)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-left-out-'));
    try {
      await preparePeerPki(['n1', 'n3'], (id) => join(dir, id));
      await recordedConfOf(dir, 'n3', ['n1', 'n2', 'n3']);
      const record = { nodeId: 'n3', confIndex: 9, how: 'it applied its own removal', at: '2026-11-27T10:00:00.000Z' };
      writeFileSync(join(dir, 'n3', REMOVED_FILE), JSON.stringify(record));
      const started = inProcessMember(dir, 'n3', { join: '127.0.0.1:1' }, { readyTimeout_ms: 2_000 });
      await expect(started).rejects.toThrow(RemovedFromClusterError);
      await expect(started).rejects.toThrow(
        /^node n3 was removed from the cluster \(it applied its own removal, learnt 2026-11-27T10:00:00.000Z: the configuration at index 9 leaves it out\); to bring it back, add it again from a member \(keel cluster add --id n3 --address ADDR --learner\), delete its data directory and start it with --join$/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  it('is not judged removed from its last applied configuration alone (a learner installed an older snapshot)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-left-out-'));
    try {
      await preparePeerPki(['n1', 'n3'], (id) => join(dir, id));
      await recordedConfOf(dir, 'n3', ['n1', 'n2']);
      // it starts and waits for a leader (none here: its start fails for that, not as removed)
      const started = inProcessMember(dir, 'n3', { join: '127.0.0.1:1' }, { readyTimeout_ms: 1_000 });
      await expect(started).rejects.toThrow(/no leader within 1000 ms/);
      await expect(started).rejects.not.toThrow(RemovedFromClusterError);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
