/**
 * The simulator's oracle: global knowledge that no single node has, used to check Raft's safety
 * properties incrementally after every step.
 *
 * - election safety: at most one leader per term;
 * - election quorum: a leader of term T was elected by a (joint) quorum of voters that durably voted for
 *   it in term T;
 * - commit quorum (Raft §5.4.2): when a leader of term T advances its commit index to c, a (joint) quorum of
 *   voters durably holds an entry of term T at an index >= c (the leader's own copy counts only once synced: it
 *   sends its entries while writing them);
 * - commit durability at exposure: a commit index leaves a node (in a message, a persisted hard state, a
 *   read index, or an applied entry) only once a (joint) quorum of the configuration the leader of term T
 *   counted under durably (synced) holds an entry of term T at an index >= it, so every later leader has it;
 * - log matching: two logs holding an entry with the same (index, term) hold the same entry and the same
 *   predecessor term (hence, by induction, identical prefixes);
 * - leader completeness: an entry committed by the leader of term T is in the log of every leader of a
 *   later term;
 * - commit safety: all nodes agree on the committed entry at every index;
 * - state-machine safety: every node applies the same entry at the same index, and reaches the same state;
 * - exactly-once: a proposal is applied at one index only;
 * - durable votes: a node never changes its persisted vote within a term, and term/commit never regress;
 * - membership agreement: every node computes the same configuration at every conf entry;
 * - linearizable reads: a read index is at least the highest exposed commit index when the read was issued;
 * - convergence: at the end, every member of the final configuration has applied every acknowledged entry
 *   (same indexes, same order: its state hash equals the one recorded at its applied index).
 */
import { majorityVoteResult } from '../core/quorum.js';
import type { ConfState, Entry, HardState, NodeId } from '../types.js';

/** Bound on leader commit decisions not yet confirmed durable (they are pruned as exposures confirm them). */
const MAX_PENDING_DECISIONS = 100_000;

/** A leader of `term` advanced its commit index to `commit`, counting votes of `conf`. */
interface CommitDecision {
  term: number;
  commit: number;
  conf: ConfState;
}

export class SimViolation extends Error {
  constructor(
    readonly kind: string,
    detail: string,
  ) {
    super(`${kind}: ${detail}`);
    this.name = 'SimViolation';
  }
}

/** What the checker needs to read from a node's log. */
export interface LogProbe {
  termAt(index: number): number | null;
}

const TERM_BITS = 1048576; // 2^20: (index, term) packed into one safe integer

function entryKey(index: number, term: number): number {
  return index * TERM_BITS + term;
}

export class Checker {
  readonly leaderOfTerm = new Map<number, NodeId>();
  /** Highest commit index any leader declared that is known to be durable on a quorum. */
  commitMax = 0;
  /**
   * Highest commit index confirmed durable on a quorum (checked when it was first exposed). Every commit
   * index a node exposes must be at most this, or confirmable now from a leader's decision.
   */
  durableCommit = 0;
  private decisions: CommitDecision[] = [];
  /** Membership after each conf entry, as the first node to apply it computed it. */
  private readonly confAt = new Map<number, ConfState>();
  private readonly committedTerm: number[] = [];
  /** Term of the leader that first declared index i committed (Infinity if first seen on a follower). */
  private readonly commitTermOf: number[] = [];
  private readonly appliedDataHash: number[] = [];
  private readonly appliedStateHash: number[] = [];
  private readonly logEntries = new Map<number, { dataHash: number; prevTerm: number }>();
  private readonly proposalIndex = new Map<number, number>();
  /** Durable votes: term -> voter -> candidate. */
  private readonly votes = new Map<number, Map<NodeId, NodeId>>();

  violation(kind: string, detail: string): never {
    throw new SimViolation(kind, detail);
  }

  /** A node is leader of `term` (called after every step on it). Returns true the first time. */
  onLeader(id: NodeId, term: number, log: LogProbe, lastIndex: number): boolean {
    const prior = this.leaderOfTerm.get(term);
    if (prior !== undefined) {
      if (prior !== id) this.violation('election-safety', `term ${term} has two leaders: ${prior} and ${id}`);
      return false;
    }
    this.leaderOfTerm.set(term, id);
    // Leader completeness: every entry committed by a leader of an earlier term is in this log.
    for (let i = this.commitMax; i >= 1; i--) {
      const ct = this.commitTermOf[i];
      if (ct === undefined || ct >= term) continue;
      const t = log.termAt(i);
      if (t === null) {
        if (i > lastIndex) {
          this.violation(
            'leader-completeness',
            `leader ${id} of term ${term} lacks committed index ${i} (last ${lastIndex})`,
          );
        }
        break; // compacted below here: covered by its snapshot
      }
      if (t !== this.committedTerm[i]) {
        this.violation(
          'leader-completeness',
          `leader ${id} of term ${term} has term ${t} at committed index ${i}, committed term ${this.committedTerm[i]}`,
        );
      }
    }
    return true;
  }

  /** Node `id` has commit index `commit` (called after every step); `checkedFrom` is what was verified before. */
  onCommit(id: NodeId, isLeaderOfTerm: number | null, log: LogProbe, checkedFrom: number, commit: number): void {
    for (let i = checkedFrom + 1; i <= commit; i++) {
      const t = log.termAt(i);
      if (t === null) continue; // compacted into a snapshot: checked through the state hash
      const known = this.committedTerm[i];
      if (known === undefined) {
        this.committedTerm[i] = t;
        this.commitTermOf[i] = isLeaderOfTerm ?? Number.POSITIVE_INFINITY;
      } else {
        if (known !== t) {
          this.violation(
            'commit-safety',
            `${id} committed term ${t} at index ${i}, another node committed term ${known}`,
          );
        }
        if (isLeaderOfTerm !== null && isLeaderOfTerm < (this.commitTermOf[i] as number)) {
          this.commitTermOf[i] = isLeaderOfTerm;
        }
      }
    }
    if (isLeaderOfTerm !== null && commit > this.commitMax) this.commitMax = commit;
  }

  /** Entries a node made durable; `prevTermOf` reads the term before the first one from the durable log. */
  onPersistEntries(
    id: NodeId,
    entries: Entry[],
    prevTermOf: (index: number) => number,
    dataHashOf: (e: Entry) => number,
  ) {
    let prevTerm = entries.length > 0 ? prevTermOf((entries[0] as Entry).index - 1) : 0;
    for (const e of entries) {
      const key = entryKey(e.index, e.term);
      const dataHash = dataHashOf(e);
      const seen = this.logEntries.get(key);
      if (seen === undefined) {
        this.logEntries.set(key, { dataHash, prevTerm });
      } else if (seen.dataHash !== dataHash) {
        this.violation('log-matching', `${id} holds a different entry at (index ${e.index}, term ${e.term})`);
      } else if (seen.prevTerm !== prevTerm) {
        this.violation(
          'log-matching',
          `${id} holds (index ${e.index}, term ${e.term}) after term ${prevTerm}, another log after term ${seen.prevTerm}`,
        );
      }
      prevTerm = e.term;
    }
  }

  /** Checks that `conf`'s voters (both majorities when joint) satisfy `ok`. */
  private jointQuorum(conf: ConfState, ok: (id: NodeId) => boolean): boolean {
    const incoming = new Set(conf.voters);
    const outgoing = new Set(conf.votersOutgoing);
    const vote = (id: NodeId) => ok(id);
    return majorityVoteResult(incoming, vote) === 'won' && majorityVoteResult(outgoing, vote) === 'won';
  }

  /** A node just became leader of `term` under `conf`: a quorum must have durably voted for it. */
  checkElectionQuorum(id: NodeId, term: number, conf: ConfState): void {
    const votes = this.votes.get(term);
    const ok = this.jointQuorum(conf, (v) => v === id || votes?.get(v) === id);
    if (!ok) {
      const got = [...(votes?.entries() ?? [])].filter(([, c]) => c === id).map(([v]) => v);
      this.violation(
        'election-quorum',
        `${id} leads term ${term} without a quorum of durable votes (votes from ${got.join(',') || 'nobody'}; voters ${conf.voters.join(',')}${conf.votersOutgoing.length ? ` & ${conf.votersOutgoing.join(',')}` : ''})`,
      );
    }
  }

  /**
   * The leader `id` of `term` advanced its commit index to `commit` under `conf`; `holds(v)` tells whether
   * voter v durably holds an entry of `term` at an index >= commit (the leader included). Records the decision
   * for the exposure check.
   */
  onCommitDecision(id: NodeId, term: number, commit: number, conf: ConfState, holds: (v: NodeId) => boolean): void {
    if (!this.jointQuorum(conf, holds)) {
      this.violation(
        'commit-durability',
        `leader ${id} of term ${term} committed ${commit} but no quorum holds an entry of term ${term} at or after it`,
      );
    }
    if (commit <= this.durableCommit) return;
    if (this.decisions.length >= MAX_PENDING_DECISIONS) throw new Error('checker: too many pending commit decisions');
    this.decisions.push({ term, commit, conf });
  }

  /** Bootstrap entries are committed by fiat. */
  setBootstrapCommit(index: number): void {
    this.durableCommit = Math.max(this.durableCommit, index);
  }

  /**
   * Node `id` exposes commit index `commit` (`what` says how). It must be confirmed durable: at most
   * durableCommit, or some leader of term T decided a commit >= it under a configuration of which a (joint)
   * quorum now durably holds an entry of term T at an index >= it (`durablyHolds(voter, T, index)`).
   */
  checkExposure(
    id: NodeId,
    commit: number,
    what: string,
    durablyHolds: (voter: NodeId, term: number, from: number) => boolean,
  ): void {
    if (commit <= this.durableCommit) return;
    for (const d of this.decisions) {
      if (d.commit < commit) continue;
      if (!this.jointQuorum(d.conf, (v) => durablyHolds(v, d.term, commit))) continue;
      this.durableCommit = commit;
      this.decisions = this.decisions.filter((x) => x.commit > commit);
      return;
    }
    this.violation(
      'commit-durability',
      `${id} exposed commit ${commit} (${what}) but no quorum durably holds it (durable commit ${this.durableCommit})`,
    );
  }

  /** A node computed `conf` when applying the conf entry at `index`: every node must compute the same one. */
  onConfApplied(id: NodeId, index: number, conf: ConfState): void {
    const known = this.confAt.get(index);
    if (known === undefined) {
      this.confAt.set(index, conf);
    } else if (!sameConf(known, conf)) {
      this.violation(
        'state-machine-safety',
        `${id} computed membership ${JSON.stringify(conf)} at ${index}, another node ${JSON.stringify(known)}`,
      );
    }
  }

  /** The membership after the conf entry at `index` (for a driver that skips re-applying it). */
  confAfter(index: number): ConfState | undefined {
    return this.confAt.get(index);
  }

  /**
   * End of a run: member `id` has applied up to `index` reaching `stateHash`; it must cover every acknowledged
   * entry (`ackedIndex`), and its state must be the one every node reached at that index (the hash chains
   * index, term and data of every entry in order, so equal hashes mean the same entries at the same indexes).
   */
  checkConverged(id: NodeId, index: number, stateHash: number, ackedIndex: number): void {
    if (index < ackedIndex) {
      this.violation('convergence', `${id} applied up to ${index}, below the acknowledged index ${ackedIndex}`);
    }
    if (this.appliedStateHash[index] !== stateHash) {
      this.violation('state-machine-safety', `${id} reached a state at index ${index} that no node applied`);
    }
  }

  private recordVote(voter: NodeId, term: number, candidate: NodeId): void {
    let m = this.votes.get(term);
    if (!m) this.votes.set(term, (m = new Map()));
    const prior = m.get(voter);
    if (prior !== undefined && prior !== candidate) {
      this.violation('vote-safety', `${voter} voted for ${prior} and ${candidate} in term ${term}`);
    }
    m.set(voter, candidate);
  }

  /**
   * `voter` sends a vote grant for `candidate` in `term`; its durable state must already rule out any other
   * vote in that term (a persisted vote for the candidate in that term, or a later persisted term).
   */
  onSendVoteGrant(voter: NodeId, candidate: NodeId, term: number, durable: HardState): void {
    if (!(durable.term > term || (durable.term === term && durable.vote === candidate))) {
      this.violation(
        'vote-durability',
        `${voter} granted ${candidate} in term ${term} before persisting it (durable ${JSON.stringify(durable)})`,
      );
    }
    this.recordVote(voter, term, candidate);
  }

  onPersistHardState(id: NodeId, prev: HardState, next: HardState): void {
    if (next.vote !== null) this.recordVote(id, next.term, next.vote);
    if (next.term < prev.term) this.violation('durable-state', `${id} term regressed ${prev.term} -> ${next.term}`);
    if (next.term === prev.term && prev.vote !== null && next.vote !== prev.vote) {
      this.violation('vote-safety', `${id} changed its vote in term ${next.term}: ${prev.vote} -> ${next.vote}`);
    }
    if (next.commit < prev.commit)
      this.violation('durable-state', `${id} commit regressed ${prev.commit} -> ${next.commit}`);
  }

  /** A node applied `e`, reaching `stateHash`. */
  onApply(id: NodeId, e: Entry, dataHash: number, stateHash: number): void {
    const i = e.index;
    const ct = this.committedTerm[i];
    if (ct === undefined) {
      this.committedTerm[i] = e.term;
      this.commitTermOf[i] = Number.POSITIVE_INFINITY;
    } else if (ct !== e.term) {
      this.violation('state-machine-safety', `${id} applied term ${e.term} at index ${i}, committed term is ${ct}`);
    }
    const dh = this.appliedDataHash[i];
    if (dh === undefined) this.appliedDataHash[i] = dataHash;
    else if (dh !== dataHash) this.violation('state-machine-safety', `${id} applied different data at index ${i}`);
    const sh = this.appliedStateHash[i];
    if (sh === undefined) this.appliedStateHash[i] = stateHash;
    else if (sh !== stateHash) this.violation('state-machine-safety', `${id} reached a different state at index ${i}`);
  }

  /** A node installed a snapshot of state `stateHash` at `index`. */
  onSnapshotInstalled(id: NodeId, index: number, stateHash: number): void {
    const sh = this.appliedStateHash[index];
    if (sh === undefined)
      this.violation('state-machine-safety', `${id} installed a snapshot at ${index} that nobody applied`);
    if (sh !== stateHash)
      this.violation('state-machine-safety', `${id} installed a snapshot at ${index} with a different state`);
  }

  /** A normal entry carrying proposal `pid` was applied at `index`. */
  onProposalApplied(id: NodeId, pid: number, index: number): void {
    const at = this.proposalIndex.get(pid);
    if (at === undefined) this.proposalIndex.set(pid, index);
    else if (at !== index)
      this.violation('exactly-once', `${id} applied proposal ${pid} at ${index}, it was applied at ${at}`);
  }

  onReadState(id: NodeId, readIndex: number, commitAtIssue: number): void {
    // commitAtIssue is the durable commit when the read was issued (an in-memory commit of a single voter
    // that crashed before syncing was never acknowledged and may legitimately be lost).
    if (readIndex < commitAtIssue) {
      this.violation(
        'linearizable-read',
        `${id} got read index ${readIndex} for a read issued when index ${commitAtIssue} was already committed`,
      );
    }
  }
}

function sameConf(a: ConfState, b: ConfState): boolean {
  const eq = (x: readonly string[], y: readonly string[]) => x.length === y.length && x.every((v, i) => v === y[i]);
  return (
    eq(a.voters, b.voters) &&
    eq(a.learners, b.learners) &&
    eq(a.votersOutgoing, b.votersOutgoing) &&
    eq(a.learnersNext, b.learnersNext) &&
    a.autoLeave === b.autoLeave
  );
}
