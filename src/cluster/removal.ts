/**
 * A member removed from the cluster stops (docs/cluster.md, "A removed member stops"): the error that says so, how a
 * member judges from another's status that it was removed, and the record it keeps in its data directory so that
 * it does not start again on that data.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type AppliedConf, type ConfState, confMembers, type NodeId } from '../../raft/index.js';
import { writeFileDurably } from '../util/durable-file.js';

/** Exit status of `keel run` for a node removed from the cluster (sysexits EX_CONFIG): a restart cannot help. */
export const EXIT_REMOVED = 78;

/**
 * Where a node records, in its data directory, that it learnt it was removed: it refuses to start on that data.
 * (Not judged from its last applied configuration alone: a learner that installed a snapshot taken before its
 * addition holds one without itself until it applies the addition.)
 */
export const REMOVED_FILE = 'removed.json';
/** Bound on the recorded text a message repeats (the record is this node's own, but a file may be anything). */
const MAX_HOW_CHARS = 200;

/**
 * This node is no longer a member of the cluster: it applied its own removal, or a member answered with a newer
 * configuration that leaves it out; at start, it had recorded either (REMOVED_FILE). Its log no longer grows and its
 * state goes stale, so it stops (`keel run` exits with status 78). Its id stays refused (src/model/cluster-removal.ts)
 * until an operator adds it again; then it joins again with a fresh data directory. Also the error of a join that a
 * member refuses because the id was removed.
 */
export class RemovedFromClusterError extends Error {
  readonly code = 'KEEL_REMOVED_FROM_CLUSTER';
  constructor(
    readonly nodeId: string,
    /** The index of the configuration that leaves it out. */
    readonly confIndex: number,
    /** How this node learnt it. */
    readonly how: string,
  ) {
    super(
      `node ${nodeId} was removed from the cluster (${how}: the configuration at index ${confIndex} leaves it out); ` +
        `to bring it back, add it again from a member (keel cluster add --id ${nodeId} --address ADDR --learner), ` +
        'delete its data directory and start it with --join',
    );
    this.name = 'RemovedFromClusterError';
  }
}

/** Records a removal in `dataDir` (REMOVED_FILE), durably. */
export async function recordRemoval(dataDir: string, removal: RemovedFromClusterError): Promise<void> {
  const record = {
    nodeId: removal.nodeId,
    confIndex: removal.confIndex,
    how: removal.how,
    at: new Date().toISOString(),
  };
  await writeFileDurably(join(dataDir, REMOVED_FILE), `${JSON.stringify(record)}\n`, { mode: 0o600 });
}

/** The removal recorded in `dataDir` (REMOVED_FILE), null when none. A record it cannot read still counts. */
export function readRemoval(dataDir: string, nodeId: string): RemovedFromClusterError | null {
  let text: string;
  try {
    text = readFileSync(join(dataDir, REMOVED_FILE), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  let record: { confIndex?: unknown; how?: unknown; at?: unknown } = {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null) record = parsed;
  } catch {
    // unreadable: the file's presence is what counts
  }
  const confIndex = Number.isSafeInteger(record.confIndex) ? (record.confIndex as number) : 0;
  const how = typeof record.how === 'string' ? record.how.slice(0, MAX_HOW_CHARS) : 'recorded';
  const at = typeof record.at === 'string' ? `, learnt ${record.at.slice(0, MAX_HOW_CHARS)}` : '';
  return new RemovedFromClusterError(nodeId, confIndex, `${how}${at}`);
}

/**
 * Whether member `self`, whose applied configuration is `mine`, was removed, judged by a member's applied one
 * (`theirs`, from its status; undefined from an older release). Applied configurations are committed, so a newer
 * one that leaves `self` out while `mine` has it means `self` was removed since. A node not yet in its own (one
 * joining) or a member behind this one (an older or the same index) proves nothing.
 */
export function leftOutBy(
  self: NodeId,
  mine: { index: number; conf: ConfState },
  theirs: { index: number; members: readonly NodeId[] } | undefined,
): boolean {
  if (theirs === undefined || theirs.index <= mine.index) return false;
  return !theirs.members.includes(self) && confMembers(mine.conf).has(self);
}

/**
 * remove-member of a voter this leader reaches while too few of the other voters are reachable: once the removal
 * applied, the rest could not form a quorum (etcd's strict reconfiguration check). A voter this leader cannot reach
 * may always be removed: it is not part of the quorum that is working.
 */
export class RemovalQuorumError extends Error {
  constructor(
    readonly id: string,
    readonly reachable: number,
    readonly remaining: number,
  ) {
    super(
      `removing ${id} would leave ${reachable} of ${remaining} voters reachable, short of the ` +
        `${quorumOf(remaining)} a quorum needs: bring the others back (or remove those that are gone) first`,
    );
    this.name = 'RemovalQuorumError';
  }
}

/** The votes a quorum of `voters` voters needs: a majority. */
export const quorumOf = (voters: number): number => Math.floor(voters / 2) + 1;

/**
 * Why removing voter `id` now would cost the cluster its quorum (RemovalQuorumError), or null: `id` is no voter, the
 * leader cannot reach it, or enough of the voters left are this leader and peers it is connected to.
 */
export function removalQuorumRisk(
  id: string,
  self: string,
  voters: readonly string[],
  connected: (peer: string) => boolean,
): RemovalQuorumError | null {
  if (!voters.includes(id)) return null;
  if (id !== self && !connected(id)) return null;
  const remaining = voters.filter((v) => v !== id);
  if (remaining.length === 0) return null; // the last voter: Raft itself refuses an empty configuration
  const reachable = remaining.filter((v) => v === self || connected(v)).length;
  return reachable >= quorumOf(remaining.length) ? null : new RemovalQuorumError(id, reachable, remaining.length);
}

/** What the members' applied configurations say of a removal of `self` this node applied (removalVerdict). */
export type RemovalVerdict = 'history' | 'removed' | 'unknown';

/** One member's answer: its applied configuration (undefined from an older release, which does not say) and role. */
export interface ConfAnswer {
  conf: { index: number; members: readonly NodeId[] } | undefined;
  /** It said it leads. */
  leads: boolean;
}

/**
 * Judges a removal of `self` at index `index` that this node applied, by the applied configurations the members
 * that answered report (`answers`). A node catching up from the leader's log replays every earlier removal of its
 * id too: an operator may have reused the id and added it again further on in that log.
 * - `history`: a member's configuration newer than the removal holds `self`: it was added again since (applied
 *   configurations are committed);
 * - `removed`: the leader and a majority of `voters` (the voters of the configuration the removal left) hold
 *   configurations at or past the removal without `self`. The leader's word is needed: a node catching up is sent
 *   the log only by a leader that has applied its latest addition, while the other members may not have applied it
 *   yet; a majority guards against a leader that was deposed meanwhile;
 * - `unknown`: too few answers to tell. Wrongly judged removed, a node stops for good; wrongly judged history, it
 *   only waits longer: so anything in doubt is unknown.
 */
export function removalVerdict(
  self: NodeId,
  index: number,
  voters: readonly NodeId[],
  answers: ReadonlyMap<NodeId, ConfAnswer>,
): RemovalVerdict {
  let without = 0;
  let leaderWithout = false;
  for (const [id, { conf, leads }] of answers) {
    if (conf === undefined || conf.index < index) continue;
    if (conf.members.includes(self)) {
      if (conf.index > index) return 'history';
      continue;
    }
    if (leads) leaderWithout = true;
    if (voters.includes(id)) without++;
  }
  return leaderWithout && voters.length > 0 && without >= quorumOf(voters.length) ? 'removed' : 'unknown';
}

/**
 * The rounds of judging a removal of this node it applied (removalVerdict each round): at most `judgeRounds` rounds
 * without a verdict (the fallback: its own apply is taken as the removal), then, once judged history, at most
 * `watchRounds` rounds in all watching for its addition again; `wait_ms` between two rounds.
 */
export interface RemovalJudgeLimits {
  judgeRounds: number;
  watchRounds: number;
  wait_ms: number;
}

/** What judgeOwnRemoval reads and does: the node's side of it. */
export interface RemovalJudge {
  /** The latest removal of this node it applied (a later one may arrive while judging). */
  target(): number;
  /** Judging is over from outside: the node stopped, or learnt its removal otherwise. */
  over(): boolean;
  appliedConf(): AppliedConf;
  /** The answers of the members it can name by `applied` this round (removalVerdict's `answers`). */
  ask(applied: AppliedConf): Promise<ReadonlyMap<NodeId, ConfAnswer>>;
  /** The verdict: this node was removed (by the removal at `index`). */
  removed(index: number, how: string): void;
  log(level: 'info' | 'warn', msg: string, extra: Record<string, unknown>): void;
  sleep(ms: number): Promise<void>;
}

/**
 * Judges the removal of `self` it applied (judge.target()), round after round, until one of:
 * - it applies a configuration newer than the removal with itself (its addition again): the removal was history,
 *   and the judging ends;
 * - a later removal of this node applied meanwhile is judged from its first round (history said of the earlier
 *   one says nothing of it);
 * - the members' verdict is `removed`: judge.removed;
 * - `judgeRounds` rounds without a verdict: judge.removed too (its own apply counts);
 * - once judged `history`, it watches on, so that a removal made meanwhile, which it would never apply (the leader
 *   stops sending it the log), is still learnt from the members; after `watchRounds` rounds it gives up watching;
 * - judge.over().
 */
export async function judgeOwnRemoval(self: NodeId, judge: RemovalJudge, limits: RemovalJudgeLimits): Promise<void> {
  let history = false;
  let judging = judge.target();
  for (let round = 0; round < limits.watchRounds; round++) {
    if (judge.over()) return;
    const index = judge.target();
    if (index !== judging) {
      // a later removal arrived: judged from its first round, whatever was said of the earlier one
      judging = index;
      history = false;
      round = 0;
    }
    if (!history && round >= limits.judgeRounds) {
      judge.removed(index, 'it applied its own removal, and no member told otherwise');
      return;
    }
    const applied = judge.appliedConf();
    // it applied its addition again: the removal was history
    if (applied.index > index && confMembers(applied.conf).has(self)) return;
    const verdict = removalVerdict(self, index, applied.conf.voters, await judge.ask(applied));
    if (judge.over()) return;
    if (verdict === 'removed') {
      judge.removed(index, 'it applied its own removal');
      return;
    }
    if (verdict === 'history' && !history) {
      history = true;
      judge.log('info', 'replayed an earlier removal of this id: it was added again since', { index });
    }
    await judge.sleep(limits.wait_ms);
  }
  judge.log('warn', "stopped watching for this node's addition again", { index: judge.target() });
}
