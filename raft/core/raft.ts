/**
 * The pure, deterministic Raft core (in the style of etcd-io/raft's raft.go + rawnode.go).
 *
 * No timers, sockets or disk: the driver calls tick() on a timer, step() for every message from a peer,
 * and drains work with hasReady()/ready()/advance() following the Ready contract in raft/types.ts
 * (persist, then send, then apply, then advance). At most one Ready is outstanding at a time; the driver
 * may keep calling tick()/step()/propose() while it persists one.
 *
 * Protocol: pre-vote, check-quorum with leader lease, randomized election timeouts, pipelined replication
 * with probe/replicate/snapshot flow control and term-skipping backtracking, commit of current-term entries
 * only, chunked snapshot streaming, joint-consensus membership changes with learners, leader transfer, and
 * linearizable ReadIndex reads (ReadOnlySafe).
 */
import {
  CompactedError,
  type ConfChange,
  type ConfState,
  type CoreOptions,
  type Entry,
  entrySizeBytes,
  type HardState,
  type Message,
  type MessageType,
  type NodeId,
  ProposalDroppedError,
  type Random,
  type ReadState,
  type Ready,
  type Role,
  type SnapshotChunk,
  type SnapshotInfo,
  type SnapshotMeta,
  type SoftState,
} from '../types.js';
import { encodeConfChange } from './codec.js';
import { ConfChangeError, type ConfChangeResult, computeConfChange, restoreTracker } from './confchange.js';
import { splitEarly } from './early-send.js';
import { RaftLog } from './log.js';
import { type Progress, type ProgressState, SnapshotStream } from './progress.js';
import { NO_COMMIT_LIMIT } from './quorum.js';
import { ReadOnly, type ReadRequest } from './read-only.js';
import type { ProgressTracker } from './tracker.js';
import { assert, bytesEqual, decodeU53, encodeU53, payloadBytes } from './util.js';

export { bootstrapEntries } from './bootstrap.js';
export { decodeConfChange, encodeConfChange } from './codec.js';
export { ConfChangeError } from './confchange.js';
export { RaftInvariantError } from './util.js';

/** Context of vote requests sent on a leader transfer: bypasses the lease check of the voters. */
const TRANSFER_CONTEXT = new TextEncoder().encode('keel-raft/campaign-transfer');
const DEFAULT_MAX_COMMITTED_BYTES_PER_READY = 16 * 1024 * 1024;
const DEFAULT_MAX_PENDING_READ_INDEX = 4096;
/** The driver must drain messages with ready(); more than this in the outbox means it stopped doing so. */
const MAX_OUTBOX_MESSAGES = 1 << 20;
/** How far back in the outbox mergeQueuedAppend looks for the last message to a follower. */
const MERGE_SCAN_MESSAGES = 16;
/** Re-send unacknowledged snapshot chunks after this many rewind periods without progress, then start over. */
const SNAPSHOT_STALL_ABORT_REWINDS = 4;

/**
 * Ticks between the early campaigns of a dead leader's followers, by rank (leaderUnreachable). The followers learn
 * of the death up to about a tick apart (their tick phases differ) and jitter adds one more: with 3 ticks between
 * ranks two of them never campaign in the same tick, whose split vote would cost a whole election timeout.
 */
const RANK_SPACING_TICKS = 3;

type CampaignType = 'preElection' | 'election' | 'transfer';

interface MsgFields {
  term?: number;
  logTerm?: number;
  index?: number;
  entries?: Entry[];
  commit?: number;
  reject?: boolean;
  rejectHint?: number;
  rejectTerm?: number;
  snapshot?: SnapshotChunk;
  context?: Uint8Array;
}

/** A snapshot being received: its chunks go to the driver's storage (Ready.snapshotChunks); only the count stays. */
interface IncomingSnapshot {
  from: NodeId;
  term: number;
  meta: SnapshotMeta;
  bytes: number;
}

export interface ProgressStatus {
  match: number;
  next: number;
  state: ProgressState;
}

export interface BasicStatus {
  id: NodeId;
  term: number;
  role: Role;
  leader: NodeId | null;
  commit: number;
  applied: number;
  lastIndex: number;
}

export interface CoreStatus extends BasicStatus {
  conf: ConfState;
  progress?: Record<NodeId, ProgressStatus>;
}

const NO_FIELDS: MsgFields = {};
const EMPTY_BYTES = new Uint8Array(0);
const textDecoder = new TextDecoder();
const textEncoder = new TextEncoder();

/** takeEarly's answer when there is nothing to send or apply early (frozen: shared by every call). */
const NOTHING_EARLY: { messages: Message[]; committed: Entry[] } = Object.freeze({
  messages: Object.freeze([]) as unknown as Message[],
  committed: Object.freeze([]) as unknown as Entry[],
});

export class RaftCore {
  readonly id: NodeId;
  protected readonly log: RaftLog;
  protected tracker: ProgressTracker;

  private readonly random: Random;
  private readonly electionTicks: number;
  private readonly heartbeatTicks: number;
  private readonly preVote: boolean;
  private readonly checkQuorum: boolean;
  private readonly maxMsgBytes: number;
  private readonly maxInflightMsgs: number;
  private readonly maxUncommittedBytes: number;
  private readonly snapshotChunkBytes: number;
  private readonly maxInflightSnapshotChunks: number;
  private readonly maxCommittedBytesPerReady: number;
  private readonly maxPendingReadIndex: number;
  /** Heartbeat responses without snapshot progress (about half an election timeout) before a rewind. */
  private readonly snapshotRewindBeats: number;

  private term = 0;
  private vote: NodeId | null = null;
  private lead: NodeId | null = null;
  private state: Role = 'follower';
  private electionElapsed = 0;
  private heartbeatElapsed = 0;
  private randomizedElectionTimeout = 0;
  private leadTransferee: NodeId | null = null;
  /** Index of the newest conf entry this leader may not have applied yet; no new conf change until applied. */
  private pendingConfIndex = 0;
  private uncommittedBytes = 0;
  private readonly readOnly: ReadOnly;
  /** Read requests received before this leader committed an entry of its term. */
  private pendingReadIndex: ReadRequest[] = [];
  private incomingSnapshot: IncomingSnapshot | null = null;
  /**
   * Vote requests this follower ignored under its leader's lease, the latest per sender (so at most one per
   * member): stepped again once the lease ends, dropped when the leader is heard from (see deferVoteRequest).
   */
  private readonly leaseDeferredVotes = new Map<NodeId, Message>();
  /** A complete snapshot received while a Ready was outstanding; installed on advance(). */
  private deferredSnapshot: { snap: SnapshotInfo; from: NodeId; term: number } | null = null;
  /** Received snapshot chunks for the driver to store (the next Ready's snapshotChunks). */
  private incomingChunks: SnapshotChunk[] = [];
  /** A follower needed a snapshot while the log's is deferred (takeSnapshotRequest). */
  private snapshotRequested = false;

  /** The last acknowledgement of an append this follower sent: to whom, in which term, for which index. */
  private ackedTo: NodeId | null = null;
  private ackedTerm = 0;
  private ackedIndex = -1;

  private msgs: Message[] = [];
  private readStates: ReadState[] = [];
  private prevSoft: SoftState;
  private prevHard: HardState;
  private outstanding: Ready | null = null;

  constructor(opts: CoreOptions) {
    assert(typeof opts.id === 'string' && opts.id.length > 0, 'options: id must be a non-empty string');
    assert(Number.isInteger(opts.heartbeatTicks) && opts.heartbeatTicks >= 1, 'options: heartbeatTicks must be >= 1');
    assert(
      Number.isInteger(opts.electionTicks) && opts.electionTicks > opts.heartbeatTicks,
      'options: electionTicks must be an integer greater than heartbeatTicks',
    );
    assert(
      Number.isInteger(opts.maxInflightMsgs) && opts.maxInflightMsgs >= 1,
      'options: maxInflightMsgs must be >= 1',
    );
    assert(opts.maxMsgBytes >= 1, 'options: maxMsgBytes must be >= 1');
    assert(opts.maxUncommittedBytes >= 1, 'options: maxUncommittedBytes must be >= 1');
    assert(
      Number.isInteger(opts.snapshotChunkBytes) && opts.snapshotChunkBytes >= 1,
      'options: snapshotChunkBytes >= 1',
    );
    this.id = opts.id;
    this.random = opts.random;
    this.electionTicks = opts.electionTicks;
    this.heartbeatTicks = opts.heartbeatTicks;
    this.preVote = opts.preVote;
    this.checkQuorum = opts.checkQuorum;
    this.maxMsgBytes = opts.maxMsgBytes;
    this.maxInflightMsgs = opts.maxInflightMsgs;
    this.maxUncommittedBytes = opts.maxUncommittedBytes;
    this.snapshotChunkBytes = opts.snapshotChunkBytes;
    this.maxInflightSnapshotChunks = opts.maxInflightSnapshotChunks ?? opts.maxInflightMsgs;
    assert(
      Number.isInteger(this.maxInflightSnapshotChunks) && this.maxInflightSnapshotChunks >= 1,
      'options: maxInflightSnapshotChunks must be >= 1',
    );
    this.maxCommittedBytesPerReady = opts.maxCommittedBytesPerReady ?? DEFAULT_MAX_COMMITTED_BYTES_PER_READY;
    this.maxPendingReadIndex = opts.maxPendingReadIndex ?? DEFAULT_MAX_PENDING_READ_INDEX;
    assert(this.maxCommittedBytesPerReady >= 1, 'options: maxCommittedBytesPerReady must be >= 1');
    assert(this.maxPendingReadIndex >= 1, 'options: maxPendingReadIndex must be >= 1');
    this.readOnly = new ReadOnly(this.maxPendingReadIndex);
    this.snapshotRewindBeats = Math.max(2, Math.ceil(this.electionTicks / (2 * this.heartbeatTicks)));

    this.log = new RaftLog(opts.storage);
    const { hardState, conf } = opts.storage.initialState();
    const last = this.log.lastIndex();
    assert(
      hardState.commit <= last,
      `storage: commit ${hardState.commit} beyond last index ${last} (log corrupted, truncated or lost?)`,
    );
    this.log.committed = Math.max(hardState.commit, this.log.committed);
    assert(
      opts.applied >= this.log.firstIndex() - 1,
      `options: applied ${opts.applied} is below the snapshot index ${this.log.firstIndex() - 1}; restore the state machine from storage.snapshot() first`,
    );
    assert(opts.applied <= this.log.committed, `options: applied ${opts.applied} beyond commit ${this.log.committed}`);
    this.log.applied = opts.applied;
    this.tracker = restoreTracker(conf, last, this.maxInflightMsgs);
    this.term = hardState.term;
    this.vote = hardState.vote;
    this.becomeFollower(this.term, null);
    this.prevSoft = { leader: null, role: 'follower' };
    this.prevHard = { term: hardState.term, vote: hardState.vote, commit: hardState.commit };
  }

  // ---------------------------------------------------------------- public API

  tick(): void {
    if (this.state === 'leader') this.tickHeartbeat();
    else this.tickElection();
  }

  /** Handles a message from a peer. */
  step(m: Message): void {
    assert(m.to === this.id, `step: message for ${m.to} delivered to ${this.id}`);
    assert(m.from !== this.id, 'step: message from self');
    if (m.term === 0) {
      // Term-less requests forwarded by followers.
      if (m.type !== 'readIndex' && m.type !== 'transferLeader' && m.type !== 'propose') return;
    } else if (m.term > this.term) {
      if (m.type === 'vote' || m.type === 'preVote') {
        const force = bytesEqual(m.context, TRANSFER_CONTEXT);
        // Leader lease: while we hear from a live leader, a vote request cannot disrupt it.
        if (!force && this.inLease()) {
          this.deferVoteRequest(m);
          return;
        }
      }
      if (m.type === 'preVote') {
        // Never change the term in response to a pre-vote.
      } else if (m.type === 'preVoteResp' && !m.reject) {
        // A granted pre-vote carries the term we will campaign in; the term changes when the quorum is in.
      } else if (m.type === 'append' || m.type === 'heartbeat' || m.type === 'snapshot') {
        this.becomeFollower(m.term, m.from);
      } else if (m.type === 'vote' && (this.state === 'follower' || this.state === 'preCandidate')) {
        // Raft Figure 2: only hearing from a leader or granting a vote resets the election timer. A vote
        // request we may reject (stale log) must not keep postponing our own, possibly winning, campaign.
        const elapsed = this.electionElapsed;
        const timeout = this.randomizedElectionTimeout;
        this.becomeFollower(m.term, null);
        this.electionElapsed = elapsed;
        this.randomizedElectionTimeout = timeout;
      } else {
        this.becomeFollower(m.term, null);
      }
    } else if (m.term < this.term) {
      if (!this.acceptLowerTermMessage(m)) {
        if ((this.checkQuorum || this.preVote) && (m.type === 'heartbeat' || m.type === 'append')) {
          // A stale leader (or a node that partitioned itself and bumped its term) learns our term this way.
          this.send('appendResp', m.from);
        } else if (m.type === 'preVote') {
          this.send('preVoteResp', m.from, this.voteRejection());
        }
        return;
      }
    }

    if (m.type === 'vote' || m.type === 'preVote') {
      this.handleVoteRequest(m);
      return;
    }
    if ((m.type === 'voteResp' || m.type === 'preVoteResp') && m.reject) this.maybeCommitFromHint(m.index, m.logTerm);
    switch (this.state) {
      case 'leader':
        this.stepLeader(m);
        break;
      case 'candidate':
      case 'preCandidate':
        this.stepCandidate(m);
        break;
      case 'follower':
        this.stepFollower(m);
        break;
    }
  }

  /** Appends a normal entry (leader only). Throws ProposalDroppedError otherwise or when over a bound. */
  propose(data: Uint8Array): { index: number; term: number } {
    const [at] = this.proposeMany([data]);
    if (at === undefined) throw new ProposalDroppedError('too many uncommitted bytes on the leader', this.lead);
    return at;
  }

  /**
   * Appends several normal entries, in order, and replicates them together: one append per follower for the lot
   * instead of one per entry. Stops at the first entry the uncommitted-bytes bound refuses; returns where the
   * appended ones went (none: nothing was appended or sent).
   */
  proposeMany(datas: Uint8Array[]): Array<{ index: number; term: number }> {
    this.checkCanPropose();
    const out: Array<{ index: number; term: number }> = [];
    for (const data of datas) {
      const e: Entry = { term: this.term, index: this.log.lastIndex() + 1, type: 'normal', data };
      if (!this.appendEntries([e], true)) break;
      out.push({ index: e.index, term: e.term });
    }
    if (out.length > 0) this.bcastAppend();
    return out;
  }

  /** Appends a membership change (leader only; one pending at a time; validated against the current config). */
  proposeConfChange(cc: ConfChange): { index: number; term: number } {
    this.checkCanPropose();
    if (this.pendingConfIndex > this.log.applied) {
      throw new ProposalDroppedError('a previous configuration change is not applied yet', this.lead);
    }
    const joint = this.tracker.isJoint();
    const leave = cc.changes.length === 0;
    if (joint && !leave) throw new ProposalDroppedError('must leave the joint configuration first', this.lead);
    if (!joint && leave) throw new ProposalDroppedError('not in a joint configuration', this.lead);
    try {
      computeConfChange(this.tracker, cc, this.log.lastIndex());
    } catch (err) {
      if (err instanceof ConfChangeError) throw new ProposalDroppedError(err.message, this.lead);
      throw err;
    }
    const e: Entry = { term: this.term, index: this.log.lastIndex() + 1, type: 'conf', data: encodeConfChange(cc) };
    if (!this.appendEntries([e], true)) {
      throw new ProposalDroppedError('too many uncommitted bytes on the leader', this.lead);
    }
    this.pendingConfIndex = e.index;
    this.bcastAppend();
    return { index: e.index, term: e.term };
  }

  /** Applies a committed conf entry's change; the driver calls it while applying that entry. */
  applyConfChange(cc: ConfChange): ConfState {
    const r = computeConfChange(this.tracker, cc, this.log.lastIndex());
    return this.switchToConfig(r);
  }

  /** Starts a leadership transfer to `to` (on a follower: forwarded to the leader). */
  transferLeadership(to: NodeId): void {
    if (this.state === 'leader') {
      const pr = this.tracker.progress.get(to);
      if (!pr || pr.isLearner) throw new ProposalDroppedError(`transfer target ${to} is not a voter`, this.lead);
      this.leaderTransfer(to);
      return;
    }
    if (this.lead === null) throw new ProposalDroppedError('no leader to transfer leadership from', null);
    this.send('transferLeader', this.lead, { term: 0, context: textEncoder.encode(to) });
  }

  /** Requests a linearizable read index; the answer arrives as a ReadState tagged `context` in a later Ready. */
  readIndex(context: Uint8Array): void {
    if (this.state === 'leader') {
      this.leaderReadIndex({ from: this.id, context }, true);
      return;
    }
    if (this.lead === null) throw new ProposalDroppedError('no leader to serve a read index', null);
    this.send('readIndex', this.lead, { term: 0, context });
  }

  hasReady(): boolean {
    if (this.outstanding !== null) return false;
    if (this.lead !== this.prevSoft.leader || this.state !== this.prevSoft.role) return true;
    if (this.hardStateChanged()) return true;
    if (this.log.unstable.nextSnapshot() !== null || this.log.unstable.hasNextEntries()) return true;
    if (this.msgs.length > 0 || this.readStates.length > 0 || this.incomingChunks.length > 0) return true;
    return this.log.hasNextCommittedEnts();
  }

  ready(): Ready {
    assert(this.outstanding === null, 'ready() called again before advance() of the previous Ready');
    const softChanged = this.lead !== this.prevSoft.leader || this.state !== this.prevSoft.role;
    const hard: HardState = { term: this.term, vote: this.vote, commit: this.log.committed };
    const rd: Ready = {
      softState: softChanged ? { leader: this.lead, role: this.state } : null,
      hardState: this.hardStateChanged() ? hard : null,
      entries: this.log.unstable.nextEntries(),
      snapshotChunks: this.incomingChunks,
      snapshot: this.log.unstable.nextSnapshot(),
      committed: this.log.nextCommittedEnts(this.maxCommittedBytesPerReady),
      messages: this.msgs,
      readStates: this.readStates,
    };
    this.msgs = [];
    this.readStates = [];
    this.incomingChunks = [];
    this.log.unstable.acceptInProgress();
    if (softChanged) this.prevSoft = { leader: this.lead, role: this.state };
    this.prevHard = hard;
    this.outstanding = rd;
    return rd;
  }

  /**
   * While the outstanding Ready's write runs (every committed entry it handed out applied already): the messages
   * that may leave now (a leader's replication traffic of a durable term, core/early-send.ts) when `messages`, and
   * the committed entries this log holds durably that no Ready handed out (up to the first membership change).
   * The driver sends the messages, applies the entries and reports them with appliedTo(). So a commit reached by
   * acknowledgements during the write is applied, and told to the followers, without waiting for the write.
   */
  takeEarly(durableTerm: number, messages: boolean): { messages: Message[]; committed: Entry[] } {
    assert(this.outstanding !== null, 'takeEarly() without an outstanding Ready');
    let out = NOTHING_EARLY.messages;
    if (messages && this.msgs.length > 0) {
      const split = splitEarly(this.msgs, durableTerm);
      out = split.beforePersist;
      this.msgs = split.afterPersist;
    }
    const committed = this.log.takeDurableCommitted(this.maxCommittedBytesPerReady);
    // asked on every round of the driver's write loop, mostly with nothing to take: one shared, frozen answer then
    if (out.length === 0 && committed.length === 0) return NOTHING_EARLY;
    this.reduceUncommittedSize(committed);
    return { messages: out, committed };
  }

  /** The driver applied the entries takeEarly() handed out, up to `index`. */
  appliedTo(index: number): void {
    assert(index <= this.log.applying, `appliedTo(${index}) beyond what was handed out (${this.log.applying})`);
    this.log.appliedTo(index);
  }

  /** The driver persisted, sent and applied `rd`. */
  advance(rd: Ready): void {
    assert(this.outstanding === rd, 'advance() with a Ready that is not the outstanding one');
    this.outstanding = null;
    const lastEntry = rd.entries[rd.entries.length - 1];
    if (lastEntry) {
      this.log.unstable.stableTo(lastEntry.index, lastEntry.term);
      this.selfAck();
    }
    let applied = this.log.applied;
    if (rd.snapshot) {
      this.log.unstable.stableSnapTo(rd.snapshot.meta.index);
      applied = Math.max(applied, rd.snapshot.meta.index);
    }
    const lastCommitted = rd.committed[rd.committed.length - 1];
    if (lastCommitted) applied = Math.max(applied, lastCommitted.index);
    this.log.appliedTo(applied);
    this.reduceUncommittedSize(rd.committed);
    const deferred = this.deferredSnapshot;
    if (deferred !== null) {
      this.deferredSnapshot = null;
      if (this.state === 'follower' && this.term === deferred.term) this.installSnapshot(deferred.snap, deferred.from);
    }
    if (
      this.state === 'leader' &&
      this.tracker.config.autoLeave &&
      this.log.applied >= this.pendingConfIndex &&
      this.leadTransferee === null
    ) {
      // Leave the joint configuration automatically. The empty change encodes to zero bytes, so it is
      // never refused for size.
      const e: Entry = { term: this.term, index: this.log.lastIndex() + 1, type: 'conf', data: new Uint8Array(0) };
      this.appendEntries([e], false);
      this.pendingConfIndex = e.index;
      this.bcastAppend();
    }
  }

  /**
   * The leader's own entries became durable (etcd's MsgStorageAppendResp to itself): its match advances to its
   * durable last index, which may commit. Until then a leader's entries count toward no quorum, so the driver may
   * send its appends while its own write is in flight (one fsync of latency per write, not two) and the commit
   * index never runs ahead of what a quorum, the leader included only once durable, has persisted.
   */
  private selfAck(): void {
    if (this.state !== 'leader') return;
    const durable = this.log.durableLastIndex();
    assert(durable <= this.log.lastIndex(), `durable index ${durable} beyond last index ${this.log.lastIndex()}`);
    const self = this.tracker.progress.get(this.id);
    if (self === undefined || !self.maybeUpdate(durable)) return;
    if (this.leaderMaybeCommit()) this.bcastAppend();
  }

  /**
   * The driver learned that this follower's leader is gone (its connection closed: the process died or the link
   * broke). The follower forgets it, so its leader lease no longer makes it ignore the (pre-)votes of members that
   * lost the leader too, and campaigns after a short delay instead of a whole election timeout: 1 + 3 × its rank
   * among the other voters + 0..1 ticks of jitter (at most electionTicks - 1), so two followers of a dead leader
   * do not campaign in the same tick and split the vote (RANK_SPACING_TICKS). It answers the vote requests it
   * ignored under that lease (deferVoteRequest). Harmless when the leader is alive after all: pre-vote fails while
   * a quorum still hears from it (their lease), and its next message makes this node follow it again.
   */
  leaderUnreachable(): void {
    if (this.state !== 'follower' || this.lead === null) return;
    const lost = this.lead;
    this.lead = null;
    if (this.promotable()) {
      const rank = this.tracker
        .voterIds()
        .filter((id) => id !== lost)
        .indexOf(this.id);
      const delay = Math.min(this.electionTicks - 1, 1 + RANK_SPACING_TICKS * Math.max(0, rank) + this.random.int(2));
      this.electionElapsed = Math.max(this.electionElapsed, this.randomizedElectionTimeout - delay);
    }
    // after the timer moved: a vote granted now restarts it (Figure 2), so this node does not campaign against it
    this.releaseDeferredVotes();
  }

  /** Tells the leader that the last message to `id` could not be delivered. */
  reportUnreachable(id: NodeId): void {
    if (this.state !== 'leader') return;
    const pr = this.tracker.progress.get(id);
    if (pr && pr.state === 'replicate') pr.becomeProbe();
  }

  /** Tells the leader that streaming a snapshot to `id` finished (`ok`) or failed. */
  reportSnapshot(id: NodeId, ok: boolean): void {
    if (this.state !== 'leader') return;
    const pr = this.tracker.progress.get(id);
    if (pr?.state !== 'snapshot') return;
    if (!ok) pr.pendingSnapshot = 0;
    pr.becomeProbe();
    // Wait for the follower's append response (ok) or the next heartbeat (failure) before sending again.
    pr.msgAppFlowPaused = true;
  }

  /**
   * Whether a follower needed a snapshot since the last call while the log's snapshot is deferred (it has no
   * bytes to stream): the driver should take a snapshot with bytes, after which the follower gets it on its next
   * append attempt. Clears the request.
   */
  takeSnapshotRequest(): boolean {
    const r = this.snapshotRequested;
    this.snapshotRequested = false;
    return r;
  }

  /**
   * Whether this leader is streaming a snapshot to a follower it heard from recently (within the last election
   * timeout, `recentActive`): a stream to a follower gone silent does not count.
   */
  snapshotStreamActive(): boolean {
    if (this.state !== 'leader') return false;
    for (const [id, pr] of this.tracker.progress)
      if (id !== this.id && pr.state === 'snapshot' && pr.recentActive) return true;
    return false;
  }

  /** basicStatus().term, without building the status (asked on every proposal). */
  currentTerm(): number {
    return this.term;
  }

  /** basicStatus().commit, likewise (asked on every round of the driver's loop). */
  committedIndex(): number {
    return this.log.committed;
  }

  /** basicStatus().leader, likewise. */
  knownLeader(): NodeId | null {
    return this.lead;
  }

  /** status() without the configuration and progress: cheap enough to call after every step. */
  basicStatus(): BasicStatus {
    return {
      id: this.id,
      term: this.term,
      role: this.state,
      leader: this.lead,
      commit: this.log.committed,
      applied: this.log.applied,
      lastIndex: this.log.lastIndex(),
    };
  }

  status(opts: { progress?: boolean } = {}): CoreStatus {
    const st: CoreStatus = { ...this.basicStatus(), conf: this.tracker.confState() };
    if (this.state === 'leader' && opts.progress !== false) {
      const progress: Record<NodeId, ProgressStatus> = {};
      for (const [id, pr] of this.tracker.progress) progress[id] = { match: pr.match, next: pr.next, state: pr.state };
      st.progress = progress;
    }
    return st;
  }

  /** Term of the entry at `index` in this node's log, or null if compacted/absent (for tests and the simulator). */
  termAt(index: number): number | null {
    return this.log.termOrNull(index);
  }

  // ---------------------------------------------------------------- fault-injection seams (tests only)
  // The simulator's broken-core tests override these in a subclass to prove the checker catches the bugs.
  // Production code never overrides them.

  /** Vote granting: is the candidate's log at least as up to date as ours (Raft §5.4.1)? */
  protected candidateLogUpToDate(lastIndex: number, lastTerm: number): boolean {
    return this.log.isUpToDate(lastIndex, lastTerm);
  }

  /** Messages from a lower term are rejected; a broken core may accept some. */
  protected acceptLowerTermMessage(_m: Message): boolean {
    return false;
  }

  /** Commit rule (Raft §5.4.2): a leader commits by counting replicas only entries of its own term. */
  protected commitAllowed(index: number): boolean {
    return this.log.termOrNull(index) === this.term;
  }

  // ---------------------------------------------------------------- roles

  private becomeFollower(term: number, lead: NodeId | null): void {
    this.reset(term);
    this.lead = lead;
    this.state = 'follower';
  }

  private becomePreCandidate(): void {
    assert(this.state !== 'leader', 'leader -> preCandidate');
    // A pre-candidate does not change its term or vote.
    this.tracker.resetVotes();
    this.lead = null;
    this.state = 'preCandidate';
    this.resetRandomizedElectionTimeout();
  }

  private becomeCandidate(): void {
    assert(this.state !== 'leader', 'leader -> candidate');
    this.reset(this.term + 1);
    this.vote = this.id;
    this.state = 'candidate';
  }

  private becomeLeader(): void {
    assert(this.state !== 'follower', 'follower -> leader');
    this.reset(this.term);
    this.lead = this.id;
    this.state = 'leader';
    const self = this.tracker.progress.get(this.id);
    assert(self !== undefined, 'leader without own progress');
    self.becomeReplicate();
    self.recentActive = true;
    // Conservatively assume the log holds an unapplied conf change until everything is applied.
    this.pendingConfIndex = this.log.lastIndex();
    const noop: Entry = { term: this.term, index: this.log.lastIndex() + 1, type: 'noop', data: new Uint8Array(0) };
    assert(this.appendEntries([noop], false), 'leader noop refused');
  }

  private reset(term: number): void {
    assert(term >= this.term, `term going backwards ${this.term} -> ${term}`);
    if (this.term !== term) {
      this.term = term;
      this.vote = null;
      this.incomingSnapshot = null;
      this.deferredSnapshot = null;
    }
    this.lead = null;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.resetRandomizedElectionTimeout();
    this.leadTransferee = null;
    this.tracker.resetVotes();
    const last = this.log.lastIndex();
    for (const [id, pr] of this.tracker.progress) {
      pr.resetState('probe');
      pr.match = id === this.id ? this.log.durableLastIndex() : 0;
      pr.next = last + 1;
      pr.recentActive = false;
    }
    this.pendingConfIndex = 0;
    this.uncommittedBytes = 0;
    this.readOnly.clear();
    this.pendingReadIndex = [];
  }

  private resetRandomizedElectionTimeout(): void {
    this.randomizedElectionTimeout = this.electionTicks + this.random.int(this.electionTicks);
  }

  private promotable(): boolean {
    const pr = this.tracker.progress.get(this.id);
    return pr !== undefined && !pr.isLearner && !this.log.hasPendingSnapshot();
  }

  // ---------------------------------------------------------------- ticks and elections

  private tickElection(): void {
    this.electionElapsed++;
    if (this.leaseDeferredVotes.size > 0 && !this.inLease()) this.releaseDeferredVotes();
    if (this.promotable() && this.electionElapsed >= this.randomizedElectionTimeout) {
      this.electionElapsed = 0;
      this.hup(this.preVote ? 'preElection' : 'election');
    }
  }

  private tickHeartbeat(): void {
    this.heartbeatElapsed++;
    this.electionElapsed++;
    if (this.electionElapsed >= this.electionTicks) {
      this.electionElapsed = 0;
      if (this.checkQuorum) {
        if (!this.tracker.quorumActive(this.id)) {
          this.becomeFollower(this.term, null);
          return;
        }
        for (const [id, pr] of this.tracker.progress) if (id !== this.id) pr.recentActive = false;
      }
      // A transfer that did not finish within an election timeout is abandoned (and a leader that is no
      // longer a voter tries again, maybe with another target).
      if (this.leadTransferee !== null) this.leadTransferee = null;
      if (!this.tracker.isVoter(this.id)) this.handOver();
      if (this.state !== 'leader') return;
    }
    if (this.heartbeatElapsed >= this.heartbeatTicks) {
      this.heartbeatElapsed = 0;
      this.bcastHeartbeat(0);
    }
  }

  /** Check-quorum's leader lease: this node heard from its leader within an election timeout. */
  private inLease(): boolean {
    return this.checkQuorum && this.lead !== null && this.electionElapsed < this.electionTicks;
  }

  /**
   * A vote request ignored under the lease is kept (the latest per sender) and stepped again once the lease ends
   * without word from the leader: when the driver reports the leader gone (leaderUnreachable) or the election
   * timeout runs out. Without this, a survivor that has not yet noticed its leader's death leaves the first
   * candidate's pre-vote unanswered; if that candidate's log is the longer one, it refuses the survivor's own
   * pre-vote, and both wait out a whole randomized election timeout. Answering late is answering a message the
   * network delayed, which Raft tolerates; it happens only once this node would answer a fresh request too, so the
   * lease still protects a live leader. A leader's message drops them (followLeader): the lease holds again.
   */
  private deferVoteRequest(m: Message): void {
    if (this.state !== 'follower' || !this.tracker.progress.has(m.from)) return;
    // members removed since they asked are forgotten: the map holds current members only (at most one each)
    for (const id of this.leaseDeferredVotes.keys())
      if (!this.tracker.progress.has(id)) this.leaseDeferredVotes.delete(id);
    this.leaseDeferredVotes.set(m.from, m);
    assert(this.leaseDeferredVotes.size <= this.tracker.progress.size, 'more deferred vote requests than members');
  }

  private releaseDeferredVotes(): void {
    if (this.leaseDeferredVotes.size === 0) return;
    const requests = [...this.leaseDeferredVotes.values()];
    this.leaseDeferredVotes.clear();
    for (const m of requests) this.step(m);
  }

  /** A message from the leader: the election timer restarts and the lease holds again. */
  private followLeader(from: NodeId): void {
    this.electionElapsed = 0;
    this.lead = from;
    if (this.leaseDeferredVotes.size > 0) this.leaseDeferredVotes.clear();
  }

  private hup(t: CampaignType): void {
    if (this.state === 'leader') return;
    if (!this.promotable()) return;
    // A committed but unapplied conf change may change who votes; wait until it is applied.
    if (this.hasUnappliedConfChanges()) return;
    this.campaign(t);
  }

  private campaign(t: CampaignType): void {
    let voteType: MessageType;
    let term: number;
    if (t === 'preElection') {
      this.becomePreCandidate();
      voteType = 'preVote';
      term = this.term + 1;
    } else {
      this.becomeCandidate();
      voteType = 'vote';
      term = this.term;
    }
    if (this.poll(this.id, true) === 'won') {
      // Single voter: won already.
      if (t === 'preElection') this.campaign('election');
      else {
        this.becomeLeader();
        this.bcastAppend();
      }
      return;
    }
    const lastIndex = this.log.lastIndex();
    const lastTerm = this.log.lastTerm();
    const context = t === 'transfer' ? TRANSFER_CONTEXT : undefined;
    for (const id of this.tracker.voterIds()) {
      if (id === this.id) continue;
      this.send(voteType, id, { term, index: lastIndex, logTerm: lastTerm, context });
    }
  }

  private poll(id: NodeId, granted: boolean): 'won' | 'lost' | 'pending' {
    this.tracker.recordVote(id, granted);
    return this.tracker.tallyVotes();
  }

  private hasUnappliedConfChanges(): boolean {
    if (this.log.applied >= this.log.committed) return false;
    let lo = Math.max(this.log.applied + 1, this.log.firstIndex());
    const hi = this.log.committed + 1;
    while (lo < hi) {
      const ents = this.log.slice(lo, hi, this.maxCommittedBytesPerReady);
      for (const e of ents) if (e.type === 'conf') return true;
      lo += ents.length;
    }
    return false;
  }

  private handleVoteRequest(m: Message): void {
    const respType: MessageType = m.type === 'vote' ? 'voteResp' : 'preVoteResp';
    const canVote =
      this.vote === m.from ||
      (this.vote === null && this.lead === null) ||
      (m.type === 'preVote' && m.term > this.term);
    if (canVote && this.candidateLogUpToDate(m.index, m.logTerm)) {
      this.send(respType, m.from, { term: m.term });
      if (m.type === 'vote') {
        this.electionElapsed = 0;
        this.vote = m.from;
      }
    } else {
      this.send(respType, m.from, this.voteRejection());
    }
  }

  /** A vote rejection: our term, plus our commit index and its term as a hint (see maybeCommitFromHint). */
  private voteRejection(): MsgFields {
    const commit = this.log.committed;
    return { term: this.term, reject: true, index: commit, logTerm: this.log.termOrNull(commit) ?? 0 };
  }

  /**
   * A vote rejection carries the voter's commit index and the term of the entry there. Committed is committed:
   * if we hold the same entry, everything up to it is committed here too (log matching). Without this a voter
   * can wait forever: it needs the vote of a node whose removal (or demotion) committed without it learning
   * so, while that node rejects it (its log holds entries ours lacks) and never campaigns. Learning the commit
   * index, it applies the change and campaigns under the new configuration. A leader commits only by counting.
   * A campaign that learns of new commits stands down until it has applied them: they may change who votes,
   * or remove this node (the grants still in flight must not make it a leader outside its configuration).
   */
  private maybeCommitFromHint(index: number, term: number): void {
    if (this.state === 'leader' || term === 0 || index <= this.log.committed) return;
    if (!this.log.matchTerm(index, term)) return;
    this.log.commitTo(index);
    if (this.state !== 'follower') this.becomeFollower(this.term, null);
  }

  // ---------------------------------------------------------------- per-role message handling

  private stepLeader(m: Message): void {
    switch (m.type) {
      case 'readIndex':
        this.leaderReadIndex({ from: m.from, context: m.context ?? new Uint8Array(0) }, false);
        return;
      case 'transferLeader': {
        const target = m.context ? textDecoder.decode(m.context) : '';
        const pr = this.tracker.progress.get(target);
        if (pr && !pr.isLearner) this.leaderTransfer(target);
        return;
      }
      case 'propose':
        // Proposals are forwarded by the application (ProposalDroppedError carries the leader), never by the core.
        return;
      default:
        break;
    }
    const pr = this.tracker.progress.get(m.from);
    if (!pr) return;
    switch (m.type) {
      case 'appendResp':
        this.handleAppendResp(m, pr);
        break;
      case 'heartbeatResp':
        this.handleHeartbeatResp(m, pr);
        break;
      case 'snapshotResp':
        this.handleSnapshotResp(m, pr);
        break;
      default:
        break;
    }
  }

  private stepCandidate(m: Message): void {
    const myRespType: MessageType = this.state === 'preCandidate' ? 'preVoteResp' : 'voteResp';
    switch (m.type) {
      case 'append':
        this.becomeFollower(m.term, m.from);
        this.handleAppendEntries(m);
        break;
      case 'heartbeat':
        this.becomeFollower(m.term, m.from);
        this.handleHeartbeat(m);
        break;
      case 'snapshot':
        this.becomeFollower(m.term, m.from);
        this.handleSnapshotChunk(m);
        break;
      case 'voteResp':
      case 'preVoteResp': {
        if (m.type !== myRespType) break;
        const res = this.poll(m.from, !m.reject);
        if (res === 'won') {
          if (this.state === 'preCandidate') this.campaign('election');
          else {
            this.becomeLeader();
            this.bcastAppend();
          }
        } else if (res === 'lost') {
          // A pre-vote response carries a future term; stay in ours.
          this.becomeFollower(this.term, null);
        }
        break;
      }
      default:
        break;
    }
  }

  private stepFollower(m: Message): void {
    switch (m.type) {
      case 'append':
        this.followLeader(m.from);
        this.handleAppendEntries(m);
        break;
      case 'heartbeat':
        this.followLeader(m.from);
        this.handleHeartbeat(m);
        break;
      case 'snapshot':
        this.followLeader(m.from);
        this.handleSnapshotChunk(m);
        break;
      case 'timeoutNow':
        // Leader transfer: campaign at once, without pre-vote and bypassing the voters' lease.
        this.hup('transfer');
        break;
      case 'readIndexResp':
        if (m.context) this.readStates.push({ index: m.index, context: m.context });
        break;
      default:
        // readIndex / transferLeader reaching a follower are dropped: no multi-hop forwarding.
        break;
    }
  }

  // ---------------------------------------------------------------- follower side of replication

  private handleAppendEntries(m: Message): void {
    if (m.index < this.log.committed) {
      this.send('appendResp', m.from, { index: this.log.committed });
      return;
    }
    const committedBefore = this.log.committed;
    const lastNew = this.log.maybeAppend(m.index, m.logTerm, m.commit, m.entries);
    if (lastNew >= 0) {
      // A commit notice (no entries, a commit index that moved this log's) whose answer would repeat the last
      // acknowledgement this follower sent this leader in this term tells the leader nothing new: not answered,
      // one message less per batch. Every other append is answered, so a leader that lost that acknowledgement
      // learns the index again from its next probe or heartbeat, which moves no commit index.
      const repeat = this.ackedTo === m.from && this.ackedTerm === this.term && this.ackedIndex === lastNew;
      if (repeat && m.entries.length === 0 && this.log.committed > committedBefore) return;
      this.ackedTo = m.from;
      this.ackedTerm = this.term;
      this.ackedIndex = lastNew;
      this.send('appendResp', m.from, { index: lastNew });
      return;
    }
    // Mismatch at m.index: hint the largest (index, term) that might match, skipping our whole tail of
    // entries with terms above m.logTerm (fast backtracking).
    const hintIndex = Math.min(m.index, this.log.lastIndex());
    const [hint, hintTerm] = this.log.findConflictByTerm(hintIndex, m.logTerm);
    this.send('appendResp', m.from, { index: m.index, reject: true, rejectHint: hint, rejectTerm: hintTerm });
  }

  private handleHeartbeat(m: Message): void {
    this.log.commitTo(m.commit);
    this.send('heartbeatResp', m.from, { context: m.context });
  }

  private handleSnapshotChunk(m: Message): void {
    const c = m.snapshot;
    if (!c) return;
    if (c.meta.index <= this.log.committed) {
      // Already have everything the snapshot covers (e.g. a resent chunk after we installed it).
      this.send('appendResp', m.from, { index: this.log.committed });
      return;
    }
    if (this.deferredSnapshot !== null) {
      // A complete snapshot waits to be installed (its chunks are queued for the driver): a chunk starting another
      // stream now would make the driver discard them.
      return;
    }
    let asm = this.incomingSnapshot;
    const same =
      asm !== null &&
      asm.from === m.from &&
      asm.term === m.term &&
      asm.meta.index === c.meta.index &&
      asm.meta.term === c.meta.term;
    if (asm === null || !same) {
      if (c.offset_bytes !== 0) {
        this.send('snapshotResp', m.from, { index: c.meta.index, logTerm: c.meta.term, reject: true, rejectHint: 0 });
        return;
      }
      asm = { from: m.from, term: m.term, meta: c.meta, bytes: 0 };
      this.incomingSnapshot = asm;
    } else if (c.offset_bytes !== asm.bytes) {
      // Older chunk: a duplicate, acknowledge what we hold. Newer chunk: a gap, ask to resend from our offset.
      const gap = c.offset_bytes > asm.bytes;
      this.send('snapshotResp', m.from, {
        index: c.meta.index,
        logTerm: c.meta.term,
        reject: gap,
        rejectHint: asm.bytes,
      });
      return;
    }
    // The driver stores the chunk (in order; offset 0 starts a new snapshot) before the acknowledgement leaves.
    this.incomingChunks.push(c);
    asm.bytes += c.data.byteLength;
    if (!c.done) {
      this.send('snapshotResp', m.from, { index: c.meta.index, logTerm: c.meta.term, rejectHint: asm.bytes });
      return;
    }
    this.incomingSnapshot = null;
    const snap: SnapshotInfo = { meta: c.meta, size_bytes: asm.bytes };
    if (this.outstanding !== null) {
      // Entries handed out in the outstanding Ready (maybe conf changes) must be applied against the
      // configuration they were committed under: install the snapshot once that Ready is advanced.
      this.deferredSnapshot = { snap, from: m.from, term: m.term };
      return;
    }
    this.installSnapshot(snap, m.from);
  }

  private installSnapshot(snap: SnapshotInfo, from: NodeId): void {
    if (this.restore(snap)) this.send('appendResp', from, { index: this.log.lastIndex() });
    else this.send('appendResp', from, { index: this.log.committed });
  }

  /** Installs a complete snapshot from the leader; false when it is not needed. */
  private restore(snap: SnapshotInfo): boolean {
    if (snap.meta.index <= this.log.committed) return false;
    if (this.state !== 'follower') {
      // Defense in depth: only followers install snapshots.
      this.becomeFollower(this.term + 1, null);
      return false;
    }
    if (this.log.matchTerm(snap.meta.index, snap.meta.term)) {
      // Our log already contains the snapshot's last entry: just fast-forward the commit index.
      this.log.commitTo(snap.meta.index);
      return false;
    }
    this.log.restore(snap);
    this.tracker = restoreTracker(snap.meta.conf, this.log.lastIndex(), this.maxInflightMsgs);
    return true;
  }

  // ---------------------------------------------------------------- leader side of replication

  private handleAppendResp(m: Message, pr: Progress): void {
    pr.recentActive = true;
    if (m.reject) {
      let next = m.rejectHint;
      const rejectTerm = m.rejectTerm ?? 0;
      if (rejectTerm > 0) next = this.log.findConflictByTerm(m.rejectHint, rejectTerm)[0];
      if (pr.maybeDecrTo(m.index, next)) {
        if (pr.state === 'replicate') pr.becomeProbe();
        this.sendAppend(m.from);
      }
      return;
    }
    if (!(pr.maybeUpdate(m.index) || (pr.match === m.index && pr.state === 'probe'))) return;
    if (pr.state === 'probe') {
      pr.becomeReplicate();
    } else if (pr.state === 'snapshot' && pr.match + 1 >= this.log.firstIndex()) {
      // The follower can be caught up from the log now (whatever snapshot it installed).
      pr.becomeProbe();
      pr.becomeReplicate();
    } else if (pr.state === 'replicate') {
      pr.inflights.freeLE(m.index);
    }
    if (this.leaderMaybeCommit()) this.bcastAppend();
    // Flow control may allow several messages now; the window bounds the loop.
    for (let i = 0; i <= this.maxInflightMsgs; i++) {
      if (this.state !== 'leader' || !this.maybeSendAppend(m.from, false)) break;
    }
    if (this.state === 'leader' && m.from === this.leadTransferee && pr.match === this.log.lastIndex()) {
      this.sendTimeoutNow(m.from);
    }
  }

  private handleHeartbeatResp(m: Message, pr: Progress): void {
    pr.recentActive = true;
    pr.msgAppFlowPaused = false;
    if (pr.state === 'snapshot') this.snapshotStallCheck(m.from, pr);
    if (pr.match < this.log.lastIndex() || pr.state === 'probe') this.sendAppend(m.from);
    const seq = decodeU53(m.context);
    if (seq === null) return;
    const acks = this.readOnly.recvAck(m.from, seq);
    if (acks === null) return;
    if (this.tracker.voteResult((id) => (acks.has(id) ? true : undefined)) !== 'won') return;
    for (const rs of this.readOnly.advance(seq)) this.respondToRead(rs.req, rs.index);
  }

  private handleSnapshotResp(m: Message, pr: Progress): void {
    pr.recentActive = true;
    const st = pr.stream;
    if (pr.state !== 'snapshot' || st === null) return;
    if (m.index !== st.snapshot.meta.index || m.logTerm !== st.snapshot.meta.term) return;
    const have = st.chunksFor(m.rejectHint);
    if (m.reject) {
      // Go back to what the follower holds.
      st.ackedChunks = have;
      st.nextChunk = have;
    } else if (have > st.ackedChunks) {
      st.ackedChunks = have;
      st.stalledBeats = 0;
      if (st.nextChunk < have) st.nextChunk = have;
    } else {
      return;
    }
    this.sendSnapshotChunks(m.from, pr);
  }

  private snapshotStallCheck(to: NodeId, pr: Progress): void {
    const st = pr.stream;
    if (st === null) return;
    st.stalledBeats++;
    if (st.stalledBeats >= this.snapshotRewindBeats * SNAPSHOT_STALL_ABORT_REWINDS) {
      // Give up on this stream; the next append attempt starts over (possibly with a newer snapshot).
      pr.pendingSnapshot = 0;
      pr.becomeProbe();
      return;
    }
    if (st.stalledBeats % this.snapshotRewindBeats === 0) {
      st.nextChunk = st.ackedChunks;
      this.sendSnapshotChunks(to, pr);
    }
  }

  private leaderMaybeCommit(): boolean {
    const mci = this.tracker.committed();
    if (mci === NO_COMMIT_LIMIT) return false;
    if (!this.log.maybeCommit(mci, (i) => this.commitAllowed(i))) return false;
    this.releasePendingReadIndex();
    return true;
  }

  private sendAppend(to: NodeId): void {
    this.maybeSendAppend(to, true);
  }

  /** Sends an append (or starts a snapshot) to `to` if flow control allows; true if something was sent. */
  private maybeSendAppend(to: NodeId, sendIfEmpty: boolean): boolean {
    const pr = this.tracker.progress.get(to);
    if (!pr || pr.isPaused()) return false;
    const prevIndex = pr.next - 1;
    const prevTerm = this.log.termOrNull(prevIndex);
    let ents: Entry[] = [];
    let compacted = false;
    if (pr.state !== 'replicate' || !pr.inflights.full()) {
      const last = this.log.lastIndex();
      if (pr.next <= last) {
        try {
          ents = this.log.slice(pr.next, last + 1, this.maxMsgBytes);
        } catch (err) {
          if (!(err instanceof CompactedError)) throw err;
          compacted = true;
        }
      }
    }
    if (prevTerm === null || compacted) return this.maybeSendSnapshot(to, pr);
    if (ents.length === 0 && !sendIfEmpty) return false;
    if (!this.mergeQueuedAppend(to, prevIndex, ents)) {
      this.send('append', to, { index: prevIndex, logTerm: prevTerm, entries: ents, commit: this.log.committed });
    }
    const lastSent = ents[ents.length - 1];
    pr.sentEntries(ents.length, lastSent ? lastSent.index : prevIndex);
    return true;
  }

  /**
   * Folds an append into the last message queued for `to` (not yet handed to the driver) when that is an append
   * of this term ending right where this one starts: the follower gets one message with both sets of entries and
   * the newer commit index, exactly as if it stepped the two in a row. Within a Ready, proposals of several turns
   * and the commit they reach then travel to each follower as one message instead of one each. Not when the
   * merged entries would exceed maxMsgBytes. Only the last MERGE_SCAN_MESSAGES queued messages are looked at.
   */
  private mergeQueuedAppend(to: NodeId, prevIndex: number, ents: Entry[]): boolean {
    for (let i = this.msgs.length - 1; i >= 0 && i >= this.msgs.length - MERGE_SCAN_MESSAGES; i--) {
      const m = this.msgs[i] as Message;
      if (m.to !== to) continue;
      if (m.type !== 'append' || m.term !== this.term || m.index + m.entries.length !== prevIndex) return false;
      if (ents.length > 0) {
        let size = 0;
        for (const e of m.entries) size += entrySizeBytes(e);
        for (const e of ents) size += entrySizeBytes(e);
        if (m.entries.length > 0 && size > this.maxMsgBytes) return false;
        m.entries = m.entries.length === 0 ? ents : m.entries.concat(ents);
      }
      assert(this.log.committed >= m.commit, `commit ${this.log.committed} below a queued append's ${m.commit}`);
      m.commit = this.log.committed;
      return true;
    }
    return false;
  }

  private maybeSendSnapshot(to: NodeId, pr: Progress): boolean {
    if (!pr.recentActive) return false;
    const snap = this.log.snapshot();
    assert(snap !== null, `entries for ${to} are compacted but there is no snapshot`);
    assert(
      snap.meta.index >= this.log.firstIndex() - 1,
      `snapshot ${snap.meta.index} is older than the compacted log (first ${this.log.firstIndex()})`,
    );
    if (snap.deferred === true) {
      // Nothing to stream yet: the driver takes a snapshot with bytes; the follower stays as it is until then.
      this.snapshotRequested = true;
      return false;
    }
    pr.becomeSnapshot(snap.meta.index, new SnapshotStream(snap, this.snapshotChunkBytes));
    this.sendSnapshotChunks(to, pr);
    return true;
  }

  private sendSnapshotChunks(to: NodeId, pr: Progress): void {
    const st = pr.stream;
    assert(st !== null, 'snapshot chunks without a stream');
    const size = st.snapshot.size_bytes;
    while (st.nextChunk < st.totalChunks && st.nextChunk - st.ackedChunks < this.maxInflightSnapshotChunks) {
      const off = st.nextChunk * st.chunkBytes;
      assert(off <= size, `snapshot chunk at ${off} beyond the snapshot's ${size} bytes`);
      // No bytes here: the driver reads them from its storage as it sends (fillSnapshotChunk).
      const chunk: SnapshotChunk = {
        meta: st.snapshot.meta,
        offset_bytes: off,
        data: EMPTY_BYTES,
        done: st.nextChunk === st.totalChunks - 1,
      };
      this.send('snapshot', to, { snapshot: chunk });
      st.nextChunk++;
    }
  }

  private bcastAppend(): void {
    for (const id of this.tracker.progress.keys()) {
      if (id !== this.id) this.sendAppend(id);
    }
  }

  /** Heartbeats to all peers; `seq` (or the newest pending read) rides along as the read-index context. */
  private bcastHeartbeat(seq: number): void {
    const s = seq > 0 ? seq : this.readOnly.lastSeq();
    const context = s > 0 ? encodeU53(s) : undefined;
    for (const [id, pr] of this.tracker.progress) {
      if (id === this.id) continue;
      // Never tell a follower to commit beyond what we know it holds.
      this.send('heartbeat', id, { commit: Math.min(pr.match, this.log.committed), context });
    }
  }

  private appendEntries(ents: Entry[], checkSize: boolean): boolean {
    const bytes = payloadBytes(ents);
    if (
      checkSize &&
      this.uncommittedBytes > 0 &&
      bytes > 0 &&
      this.uncommittedBytes + bytes > this.maxUncommittedBytes
    ) {
      return false;
    }
    this.uncommittedBytes += bytes;
    this.log.append(ents);
    // The leader's own match moves only once these entries are durable (advance): see selfAck().
    return true;
  }

  private reduceUncommittedSize(ents: Entry[]): void {
    const bytes = payloadBytes(ents);
    this.uncommittedBytes = bytes > this.uncommittedBytes ? 0 : this.uncommittedBytes - bytes;
  }

  private checkCanPropose(): void {
    if (this.state !== 'leader') throw new ProposalDroppedError(`not the leader (role ${this.state})`, this.lead);
    if (!this.tracker.isVoter(this.id)) {
      throw new ProposalDroppedError('leader was removed from the configuration (or demoted); handing over', null);
    }
    if (this.leadTransferee !== null) {
      throw new ProposalDroppedError(`leadership transfer to ${this.leadTransferee} in progress`, this.lead);
    }
  }

  private switchToConfig(r: ConfChangeResult): ConfState {
    this.tracker.config = r.config;
    this.tracker.progress = r.progress;
    const cs = this.tracker.confState();
    // Defense in depth: a campaign never outlives this node's membership (it could win outside it).
    if ((this.state === 'candidate' || this.state === 'preCandidate') && !this.promotable()) {
      this.becomeFollower(this.term, null);
    }
    if (this.state !== 'leader' || cs.voters.length === 0) return cs;
    if (this.leaderMaybeCommit()) {
      this.bcastAppend();
    } else {
      for (const id of this.tracker.progress.keys()) if (id !== this.id) this.maybeSendAppend(id, false);
    }
    if (this.leadTransferee !== null && !this.tracker.isVoter(this.leadTransferee)) this.leadTransferee = null;
    // Removed or demoted: hand leadership over rather than step down at once (see handOver).
    if (!this.tracker.isVoter(this.id)) this.handOver();
    return cs;
  }

  /**
   * A leader that is no longer a voter (it applied its own removal or demotion) refuses proposals and hands
   * leadership to a voter of the new configuration: a transfer, which catches the target up before sending
   * timeoutNow. Stepping down at once could leave no electable node: survivors that have not learned that the
   * change committed still count this node's vote (two voters, or a joint configuration replacing the only
   * voter), and it rejects any candidate whose log lacks entries it holds, while never campaigning itself.
   * Retried every election timeout (a transfer is abandoned after one); with check-quorum the leader still
   * steps down when the new configuration's quorum is not active.
   */
  private handOver(): void {
    if (this.leadTransferee !== null) return;
    let best: { id: NodeId; active: boolean; match: number } | null = null;
    for (const id of this.tracker.voterIds()) {
      const pr = this.tracker.progress.get(id);
      if (id === this.id || !pr) continue;
      const better =
        best === null ||
        (pr.recentActive && !best.active) ||
        (pr.recentActive === best.active && pr.match > best.match);
      if (better) best = { id, active: pr.recentActive, match: pr.match };
    }
    if (best === null) {
      this.becomeFollower(this.term, null);
      return;
    }
    this.leaderTransfer(best.id);
  }

  // ---------------------------------------------------------------- leader transfer

  private leaderTransfer(target: NodeId): void {
    if (this.leadTransferee !== null) {
      if (this.leadTransferee === target) return;
      this.leadTransferee = null;
    }
    if (target === this.id) return;
    const pr = this.tracker.progress.get(target);
    if (!pr) return;
    // The transfer must finish within an election timeout.
    this.electionElapsed = 0;
    this.leadTransferee = target;
    if (pr.match === this.log.lastIndex()) this.sendTimeoutNow(target);
    else this.sendAppend(target);
  }

  /**
   * The transfer target holds our whole log: tell it to campaign. A leader that is no longer a voter steps
   * down now: the target (or, if timeoutNow is lost, whichever caught-up voter times out first) gets its vote,
   * and a removed node would otherwise never learn of the new leader, which does not replicate to it.
   */
  private sendTimeoutNow(to: NodeId): void {
    this.send('timeoutNow', to);
    if (!this.tracker.isVoter(this.id)) this.becomeFollower(this.term, null);
  }

  // ---------------------------------------------------------------- read index

  private committedEntryInCurrentTerm(): boolean {
    return this.log.termOrNull(this.log.committed) === this.term;
  }

  private leaderReadIndex(req: ReadRequest, local: boolean): void {
    if (!this.committedEntryInCurrentTerm()) {
      // Our commit index may lag entries committed by earlier leaders (or, for a single voter restarted with a
      // lazily written commit index, by itself): wait for our first commit. A leader counts its own entries only
      // once durable, so even a single voter commits its noop one write after its election.
      if (this.pendingReadIndex.length >= this.maxPendingReadIndex) {
        if (local) throw new ProposalDroppedError('too many pending read-index requests', this.lead);
        return;
      }
      this.pendingReadIndex.push(req);
      return;
    }
    if (this.tracker.isSingleton() && this.tracker.config.incoming.has(this.id)) {
      this.respondToRead(req, this.log.committed);
      return;
    }
    this.startReadIndex(req, local);
  }

  private startReadIndex(req: ReadRequest, local: boolean): void {
    if (this.readOnly.full()) {
      if (local) throw new ProposalDroppedError('too many pending read-index requests', this.lead);
      return;
    }
    const seq = this.readOnly.add(this.log.committed, req);
    this.readOnly.recvAck(this.id, seq);
    this.bcastHeartbeat(seq);
  }

  private releasePendingReadIndex(): void {
    if (this.pendingReadIndex.length === 0 || !this.committedEntryInCurrentTerm()) return;
    const reqs = this.pendingReadIndex;
    this.pendingReadIndex = [];
    for (const req of reqs) this.leaderReadIndex(req, false);
  }

  private respondToRead(req: ReadRequest, index: number): void {
    if (req.from === this.id) this.readStates.push({ index, context: req.context });
    else this.send('readIndexResp', req.from, { index, context: req.context });
  }

  // ---------------------------------------------------------------- messages and hard state

  private send(type: MessageType, to: NodeId, f: MsgFields = NO_FIELDS): void {
    assert(to !== this.id, `send ${type} to self`);
    const voteType = type === 'vote' || type === 'voteResp' || type === 'preVote' || type === 'preVoteResp';
    assert(!voteType || (f.term !== undefined && f.term > 0), `${type} without a term`);
    assert(this.msgs.length < MAX_OUTBOX_MESSAGES, 'outbox overflow: the driver is not draining ready()');
    const m: Message = {
      type,
      from: this.id,
      to,
      term: f.term ?? this.term,
      logTerm: f.logTerm ?? 0,
      index: f.index ?? 0,
      entries: f.entries ?? [],
      commit: f.commit ?? 0,
      reject: f.reject ?? false,
      rejectHint: f.rejectHint ?? 0,
    };
    if (f.rejectTerm !== undefined) m.rejectTerm = f.rejectTerm;
    if (f.snapshot !== undefined) m.snapshot = f.snapshot;
    if (f.context !== undefined) m.context = f.context;
    this.msgs.push(m);
  }

  private hardStateChanged(): boolean {
    return (
      this.term !== this.prevHard.term ||
      this.vote !== this.prevHard.vote ||
      this.log.committed !== this.prevHard.commit
    );
  }
}
