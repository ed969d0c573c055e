/**
 * Deterministic simulation of a Keel Raft cluster (in the spirit of TigerBeetle's VOPR).
 *
 * One seed fixes everything: cluster size (1 to 7 voters, maybe learners), protocol options, network and
 * disk behaviour, the driver model, and the schedule of faults and client requests. A run has three phases:
 *  1. chaos: message loss, duplication, reordering and delay, (asymmetric) partitions, crashes that lose
 *     unsynced writes, restarts, membership changes, leader transfers, reads, snapshots and compaction;
 *  2. liveness: the network heals, crashed members restart, removed members stop; a leader must be elected
 *     and a fresh proposal acknowledged within a bounded number of ticks;
 *  3. convergence: no more proposals; every member of the final configuration must apply every acknowledged
 *     entry within a bound.
 * The Checker verifies the safety properties after every step; the first violation stops the run.
 */

import { bootstrapEntries } from '../core/bootstrap.js';
import { decodeConfChange } from '../core/codec.js';
import { durableCommitted, splitMessages } from '../core/early-send.js';
import { RaftCore } from '../core/raft.js';
import { copyConfState, emptyConfState, MemoryLog, withChunkData } from '../memory-log.js';
import { SeededRandom } from '../random.js';
import { confMembers, supersedes } from '../storage/durable-log.js';
import {
  type ConfChange,
  type ConfChangeSingle,
  type ConfState,
  type CoreOptions,
  ENTRY_OVERHEAD_BYTES,
  type Entry,
  type HardState,
  type Message,
  type NodeId,
  ProposalDroppedError,
  type Ready,
  type Role,
} from '../types.js';
import { Checker, SimViolation } from './checker.js';
import { EventQueue, type Timed } from './event-queue.js';
import { deriveParams, type SimParams } from './params.js';
import {
  chainHash,
  decodeProposalId,
  decodeSnapshotData,
  encodeProposal,
  encodeSnapshotData,
  entryDataHash,
  type SmState,
} from './state-machine.js';

export type CoreFactory = (opts: CoreOptions) => RaftCore;

export interface SimOptions {
  seed: number;
  /** Builds each node's core; tests pass deliberately broken cores here. */
  coreFactory?: CoreFactory;
  /** Keep the last events as text (for a failure report). */
  trace?: boolean;
  /** Receives every event as text (the CLI's --verbose). */
  verbose?: (line: string) => void;
  /** Overrides the length of the chaos phase (simulated ms). */
  chaosMs?: number;
  /**
   * Deliberately broken client behaviour, for the checker's proof (tests only): `blindRetry` re-proposes, under
   * the same proposal id, every proposal whose outcome became unknown (its leader stepped down or crashed
   * before applying it), as a client that retries a forward without knowing whether it committed would.
   */
  brokenClient?: 'blindRetry';
  /**
   * Deliberately broken driver behaviour, for the checker's proof (tests only): `neverRelease` holds proposals
   * (holdWhileCommitting seeds) and never hands them to the core.
   */
  brokenDriver?: 'neverRelease';
}

export interface SimStats {
  steps: number;
  simulatedMs: number;
  elections: number;
  proposals: number;
  acked: number;
  crashes: number;
  partitions: number;
  snapshotsCreated: number;
  snapshotsInstalled: number;
  /** Deferred snapshots recorded (deferredSnapshots seeds). */
  snapshotsDeferred: number;
  /** Snapshots with bytes taken because a follower needed one while the log's was deferred. */
  snapshotsOnRequest: number;
  confChanges: number;
  transfers: number;
  reads: number;
  messages: number;
  /** Time from the end of the chaos phase until a fresh proposal was acknowledged, in election timeouts. */
  recoveryElectionTimeouts: number;
  /** Time from that acknowledgement until every member applied every acknowledged entry, in election timeouts. */
  convergenceElectionTimeouts: number;
  /** Commit decisions of a leader whose configuration had a single voter (commit once its own write is durable). */
  singleVoterCommits: number;
  /** Reads issued on a leader whose configuration had a single voter (answered without a heartbeat round). */
  singleVoterReads: number;
  /** Crashes that lost a persisted-but-unsynced commit index (lazyCommit seeds). */
  commitsLost: number;
  /** Restarts where the commit index was raised to the application's applied index. */
  commitsRaised: number;
  /** Restarts from an application state ahead of the snapshot. */
  appAheadRestarts: number;
  /** Crashes of a leader whose own write was in flight after its appends had left (its unsynced entries lost). */
  leaderWritesLost: number;
  /** Proposals held while the leader's appended entries committed (holdWhileCommitting seeds). */
  held: number;
}

/** All counters at zero. */
export function emptyStats(): SimStats {
  return {
    steps: 0,
    simulatedMs: 0,
    elections: 0,
    proposals: 0,
    acked: 0,
    crashes: 0,
    partitions: 0,
    snapshotsCreated: 0,
    snapshotsInstalled: 0,
    snapshotsDeferred: 0,
    snapshotsOnRequest: 0,
    confChanges: 0,
    transfers: 0,
    reads: 0,
    messages: 0,
    held: 0,
    recoveryElectionTimeouts: 0,
    convergenceElectionTimeouts: 0,
    singleVoterCommits: 0,
    singleVoterReads: 0,
    commitsLost: 0,
    leaderWritesLost: 0,
    commitsRaised: 0,
    appAheadRestarts: 0,
  };
}

export interface SimResult {
  seed: number;
  ok: boolean;
  violation: string | null;
  kind: string | null;
  stats: SimStats;
  params: string;
  trace: string[];
}

const TRACE_LINES = 60;
const MAX_EVENTS_QUEUED = 2_000_000;
/** brokenClient 'blindRetry': bound on proposal ids waiting to be re-proposed. */
const MAX_UNKNOWN_OUTCOMES = 1024;
/** holdWhileCommitting: bound on the proposals one leader holds (the driver's bound on one turn's batch). */
const MAX_HELD = 64;
/**
 * After the chaos phase a fresh proposal must be acknowledged within this many election timeouts, plus the
 * worst-case time to re-replicate the whole log under the seed's flow control (see catchUpMs).
 */
const LIVENESS_ELECTION_TIMEOUTS = 60;
/**
 * After that acknowledgement every member of the final configuration must have applied every acknowledged
 * entry within this many election timeouts, plus the catch-up time (see catchUpMs).
 */
const CONVERGENCE_ELECTION_TIMEOUTS = 30;

type EventKind =
  | 'tick'
  | 'deliver'
  | 'sync'
  | 'restart'
  | 'heal'
  | 'chaos'
  | 'liveness'
  | 'endChaos'
  | 'leaderFault'
  | 'leaderGone'
  | 'snapshotWritten';
type Phase = 'chaos' | 'liveness' | 'convergence' | 'done';

interface SimEvent extends Timed {
  kind: EventKind;
  node?: SimNode;
  inc?: number;
  msg?: Message;
  faultKind?: number;
  /** leaderGone: the crashed leader whose connection `node` sees closed. */
  gone?: NodeId;
  /** snapshotWritten: the state captured when the snapshot was started. */
  snap?: CapturedSnapshot;
}

/** A node's state machine captured at once for a snapshot that is written later (the driver's background one). */
interface CapturedSnapshot {
  index: number;
  conf: ConfState;
  /** null: a deferred snapshot (the application's durable state is its state). */
  data: Uint8Array | null;
}

interface PendingProposal {
  pid: number;
  term: number;
}

class SimNode {
  core: RaftCore | null = null;
  alive = false;
  /** Removed from the configuration and stopped for good. */
  stopped = false;
  /** Incremented on every crash: events of an earlier incarnation are ignored. */
  inc = 0;
  pending: Ready | null = null;
  /** The pending Ready's messages that wait for its write (the others left when it was taken). */
  pendingMessages: Message[] = [];
  /** Some of the pending Ready's messages left before its write (a leader's appends). */
  pendingEarly = false;
  /** How many of the pending Ready's committed entries were applied before its write (durableCommitted). */
  appliedEarly = 0;
  /** The commit index the replication messages sent so far carry (the driver's whileWriting). */
  toldCommit = 0;
  sm: SmState;
  /** The hard state on the (synced) disk. */
  persistedHard: HardState;
  /** The latest hard state handed to the disk; ahead of persistedHard only by a lazily written commit. */
  writtenHard: HardState;
  /** The application's own durable state (appPersistRate > 0), which a restart resumes from. */
  appDurable: SmState | null = null;
  /** Conf entries at or below this index were reflected in the core's initial membership: not re-applied. */
  confIndexAtStart = 0;
  /** Commit index up to which this node's commits were recorded by the checker. */
  checkedCommit = 0;
  /** Highest commit index this node had (in any role); a leader's advance beyond it is a commit decision. */
  decidedCommit = 0;
  /** Last term this incarnation was seen leading. */
  leaderTerm = -1;
  lastRole: Role = 'follower';
  /** Process paused (a GC-like stall) until this time: its events wait. */
  pausedUntil = 0;
  /** This node's clock: tick interval (clocks drift apart a little). */
  tickMs = 10;
  readonly proposals = new Map<number, PendingProposal>();
  /** Proposals held while this leader's appended entries commit (holdWhileCommitting seeds); not in the core. */
  held: Array<{ pid: number; data: Uint8Array }> = [];

  constructor(
    readonly id: NodeId,
    readonly idx: number,
    readonly disk: MemoryLog,
  ) {
    this.sm = { index: 0, hash: 0, count: 0, conf: disk.initialState().conf };
    this.persistedHard = disk.getHardState();
    this.writtenHard = disk.getHardState();
  }
}

function copySm(st: SmState): SmState {
  return { index: st.index, hash: st.hash, count: st.count, conf: copyConfState(st.conf) };
}

function isSingleVoter(conf: ConfState): boolean {
  return conf.voters.length === 1 && conf.votersOutgoing.length === 0;
}

class Simulation {
  private readonly rng: SeededRandom;
  private readonly p: SimParams;
  private readonly queue = new EventQueue<SimEvent>(MAX_EVENTS_QUEUED);
  private readonly nodes: SimNode[] = [];
  private readonly byId = new Map<NodeId, SimNode>();
  private readonly checker: Checker = new Checker();
  /** Blocked directed links, as fromIdx * 64 + toIdx. */
  private blocked = new Set<number>();
  private now = 0;
  private phase: Phase = 'chaos';
  private nextPid = 1;
  private nextReadId = 1;
  private readonly reads = new Map<number, { node: SimNode; commitAtIssue: number }>();
  /** brokenClient 'blindRetry': proposal ids whose outcome became unknown, re-proposed as they are (bounded). */
  private readonly unknownOutcome: number[] = [];
  private livenessDeadline = 0;
  private convergenceDeadline = 0;
  private convergenceStartMs = 0;
  /** Highest index of an acknowledged proposal: every member must apply up to here before the run ends. */
  private ackedMaxIndex = 0;
  /** Proposals from this id on were made after healing: one of them must be acknowledged. */
  private firstLivenessPid = Number.MAX_SAFE_INTEGER;
  /** Number of bootstrap entries (committed conf entries at term 1). */
  private readonly bootEntries: number;
  private latestConf: { index: number; conf: ConfState };
  /** Every configuration applied so far, by index (latestConf is the last): what retireRemoved keeps. */
  private readonly confHistory: Array<{ index: number; conf: ConfState }> = [];
  private readonly everMember = new Set<NodeId>();
  private readonly traceLines: string[] = [];
  readonly stats: SimStats = emptyStats();

  constructor(private readonly opts: SimOptions) {
    this.rng = new SeededRandom(opts.seed);
    this.p = deriveParams(this.rng, opts.chaosMs);
    const voters: NodeId[] = [];
    const learners: NodeId[] = [];
    for (let i = 1; i <= this.p.voters; i++) voters.push(`n${i}`);
    for (let i = 1; i <= this.p.learners; i++) learners.push(`n${this.p.voters + i}`);
    const conf: ConfState = { voters, learners, votersOutgoing: [], learnersNext: [], autoLeave: false };
    this.bootEntries = bootstrapEntries(voters, learners).entries.length;
    this.latestConf = { index: this.bootEntries, conf: copyConfState(conf) };
    this.confHistory.push(this.latestConf);
    this.checker.setBootstrapCommit(this.bootEntries);
    for (const id of [...voters, ...learners]) {
      this.everMember.add(id);
      const disk = new MemoryLog();
      disk.bootstrap(voters, learners);
      this.addNode(id, disk);
    }
  }

  get params(): string {
    const p = this.p;
    return (
      `${p.storm ? 'storm ' : ''}voters=${p.voters} learners=${p.learners} minVoters=${p.minVoters} ` +
      `lazyCommit=${p.lazyCommit} recordConf=${p.recordConf} appPersist=${p.appPersistRate} ` +
      `election=${p.electionTicks} heartbeat=${p.heartbeatTicks} preVote=${p.preVote} ` +
      `checkQuorum=${p.checkQuorum} maxMsg=${p.maxMsgBytes} inflight=${p.maxInflightMsgs} ` +
      `maxUncommitted=${p.maxUncommittedBytes} chunk=${p.snapshotChunkBytes} delay=${p.delayMinMs}-${p.delayMaxMs}ms ` +
      `loss=${p.lossRate} dup=${p.dupRate} disk<=${p.diskMaxMs}ms chaos=${p.chaosMs}ms`
    );
  }

  get trace(): string[] {
    return this.traceLines;
  }

  run(): void {
    for (const n of this.nodes) this.start(n);
    this.schedule({ kind: 'chaos', time: this.p.chaosIntervalMs, seq: 0 });
    this.schedule({ kind: 'endChaos', time: this.p.chaosMs, seq: 0 });
    while (this.phase !== 'done') {
      const ev = this.queue.pop();
      if (!ev) this.checker.violation('liveness', 'event queue ran dry');
      this.now = ev.time;
      this.stats.steps++;
      this.handle(ev);
      if (this.phase === 'liveness' && this.now > this.livenessDeadline) {
        this.checker.violation(
          'liveness',
          `no fresh proposal acknowledged by ${this.livenessDeadline} ms (healed at ${this.p.chaosMs} ms)`,
        );
      }
      if (this.phase === 'convergence' && this.now > this.convergenceDeadline) {
        this.checker.violation(
          'convergence',
          `members ${this.laggingMembers().join(', ')} have not applied up to the acknowledged index ${this.ackedMaxIndex} by ${this.convergenceDeadline} ms`,
        );
      }
    }
    this.stats.simulatedMs = this.now;
  }

  // ---------------------------------------------------------------- events

  private schedule(ev: SimEvent): void {
    this.queue.push(ev);
  }

  private handle(ev: SimEvent): void {
    switch (ev.kind) {
      case 'tick': {
        const n = ev.node as SimNode;
        if (!n.alive || ev.inc !== n.inc) return;
        if (this.deferIfPaused(n, ev)) return;
        this.traceEvent(() => `${n.id} tick`);
        this.coreOf(n).tick();
        this.afterStep(n, true);
        this.schedule({ kind: 'tick', node: n, inc: n.inc, time: this.now + n.tickMs, seq: 0 });
        return;
      }
      case 'deliver': {
        const m = ev.msg as Message;
        const to = this.byId.get(m.to);
        if (!to?.alive) return;
        if (this.deferIfPaused(to, ev)) return;
        const from = this.byId.get(m.from);
        if (from && this.blocked.has(from.idx * 64 + to.idx)) return;
        this.traceEvent(() => `deliver ${describe(m)}`);
        this.coreOf(to).step(m);
        this.afterStep(to);
        return;
      }
      case 'sync': {
        const n = ev.node as SimNode;
        if (!n.alive || ev.inc !== n.inc) return;
        if (this.deferIfPaused(n, ev)) return;
        this.sync(n);
        return;
      }
      case 'restart': {
        const n = ev.node as SimNode;
        if (n.alive || n.stopped) return;
        this.traceEvent(() => `${n.id} restart`);
        this.start(n);
        return;
      }
      case 'heal':
        this.traceEvent(() => 'heal partition');
        this.blocked = new Set();
        return;
      case 'chaos':
        if (this.phase !== 'chaos') return;
        this.chaos();
        this.schedule({ kind: 'chaos', time: this.now + this.p.chaosIntervalMs, seq: 0 });
        return;
      case 'endChaos':
        this.endChaos();
        return;
      case 'leaderFault': {
        const n = ev.node as SimNode;
        if (this.phase !== 'chaos' || !n.alive || ev.inc !== n.inc) return;
        if (ev.faultKind === 0) {
          this.crash(n);
          this.schedule({ kind: 'restart', node: n, time: this.now + this.rng.range(0, 1500), seq: 0 });
        } else if (ev.faultKind === 1) {
          this.isolate(n);
        } else {
          this.pause(n, this.rng.range(20, this.p.pauseMaxMs));
        }
        return;
      }
      case 'leaderGone': {
        const o = ev.node as SimNode;
        if (!o.alive || ev.inc !== o.inc || o.pausedUntil > this.now) return;
        const core = this.coreOf(o);
        if (core.basicStatus().leader !== ev.gone) return;
        this.traceEvent(() => `${o.id} learns its leader ${ev.gone} is gone`);
        core.leaderUnreachable();
        this.afterStep(o);
        return;
      }
      case 'snapshotWritten': {
        // A slow snapshot (below) is written, of the state captured when it started.
        const n = ev.node as SimNode;
        if (!n.alive || ev.inc !== n.inc) return;
        if (this.deferIfPaused(n, ev)) return;
        this.recordSnapshot(n, ev.snap as CapturedSnapshot);
        this.afterStep(n);
        return;
      }
      case 'liveness':
        if (this.phase === 'done' || this.phase === 'chaos') return;
        this.retireRemoved();
        if (this.phase === 'liveness') this.livenessProbe();
        else this.convergenceProbe();
        this.schedule({ kind: 'liveness', time: this.now + this.p.tickMs, seq: 0 });
        return;
    }
  }

  /** Events of a paused node wait until it resumes (in their original order). */
  private deferIfPaused(n: SimNode, ev: SimEvent): boolean {
    if (n.pausedUntil <= this.now) return false;
    ev.time = n.pausedUntil;
    this.schedule(ev);
    return true;
  }

  private coreOf(n: SimNode): RaftCore {
    if (!n.core) throw new Error(`${n.id} has no core`);
    return n.core;
  }

  // ---------------------------------------------------------------- nodes, disk and state machine

  private addNode(id: NodeId, disk: MemoryLog): SimNode {
    const n = new SimNode(id, this.nodes.length, disk);
    n.tickMs = this.p.tickMs + (this.rng.chance(this.p.clockSkewRate) ? this.rng.range(-2, 2) : 0);
    if (n.idx >= 64) throw new Error('too many simulated nodes');
    this.nodes.push(n);
    this.byId.set(id, n);
    return n;
  }

  /**
   * Starts (or restarts) a node like the driver does: the application resumes from its own durable state
   * when that is ahead of the snapshot, else from the snapshot; a commit index behind the applied index
   * (lost because it was written lazily) is raised to it.
   */
  private start(n: SimNode): void {
    const snap = n.disk.snapshot();
    const snapIndex = snap ? snap.meta.index : 0;
    const app = n.appDurable;
    if (snap?.deferred === true && !(app !== null && app.index >= snapIndex)) {
      this.checker.violation('durable-state', `${n.id} application behind its deferred snapshot@${snapIndex}`);
    }
    if (app !== null && (app.index > snapIndex || (snap?.deferred === true && app.index === snapIndex))) {
      n.sm = copySm(app);
      this.stats.appAheadRestarts++;
    } else if (snap) {
      n.sm = decodeSnapshotData(n.disk.snapshotData() as Uint8Array, snap.meta.conf);
      if (n.sm.index !== snap.meta.index) this.checker.violation('snapshot', `${n.id} snapshot index mismatch`);
    } else {
      n.sm = { index: 0, hash: 0, count: 0, conf: emptyConfState() };
    }
    const hs = n.disk.getHardState();
    if (n.sm.index > hs.commit) {
      if (n.sm.index > n.disk.lastIndex()) {
        this.checker.violation(
          'durable-state',
          `${n.id} applied ${n.sm.index} beyond its last index ${n.disk.lastIndex()}`,
        );
      }
      const raised = { ...hs, commit: n.sm.index };
      this.checker.onPersistHardState(n.id, hs, raised);
      n.disk.setHardState(raised);
      this.stats.commitsRaised++;
    }
    this.exposeCommit(n, n.sm.index, 'applied index at restart');
    n.persistedHard = n.disk.getHardState();
    n.writtenHard = n.disk.getHardState();
    n.confIndexAtStart = n.disk.confIndex();
    const p = this.p;
    const opts: CoreOptions = {
      id: n.id,
      storage: n.disk,
      random: this.rng.fork(),
      electionTicks: p.electionTicks,
      heartbeatTicks: p.heartbeatTicks,
      preVote: p.preVote,
      checkQuorum: p.checkQuorum,
      maxMsgBytes: p.maxMsgBytes,
      maxInflightMsgs: p.maxInflightMsgs,
      maxUncommittedBytes: p.maxUncommittedBytes,
      snapshotChunkBytes: p.snapshotChunkBytes,
      applied: n.sm.index,
      maxCommittedBytesPerReady: p.maxCommittedBytesPerReady,
      maxPendingReadIndex: 64,
    };
    n.core = this.opts.coreFactory ? this.opts.coreFactory(opts) : new RaftCore(opts);
    n.alive = true;
    n.pending = null;
    n.pendingMessages = [];
    n.checkedCommit = 0;
    n.decidedCommit = 0;
    n.leaderTerm = -1;
    n.lastRole = 'follower';
    n.proposals.clear();
    n.held = [];
    // Desynchronise the nodes' tick phases.
    this.schedule({ kind: 'tick', node: n, inc: n.inc, time: this.now + 1 + this.rng.int(p.tickMs), seq: 0 });
  }

  private crash(n: SimNode): void {
    this.traceEvent(() => `${n.id} CRASH (pending write lost: ${n.pending !== null})`);
    if (n.writtenHard.commit > n.persistedHard.commit) this.stats.commitsLost++;
    this.outcomeUnknown(n);
    if (n.pending !== null && n.pending.entries.length > 0 && n.pendingEarly) this.stats.leaderWritesLost++;
    n.alive = false;
    n.core = null;
    n.pending = null;
    n.pendingMessages = [];
    n.appliedEarly = 0;
    this.refuseHeld(n, 'crash');
    n.inc++;
    this.stats.crashes++;
    // Like a transport whose connection to a killed process closes: its followers learn their leader is gone
    // (RaftNode.checkLeaderConnection) and campaign early, each within 0-2 ticks of the others (their tick phases
    // and event loops differ), so one may pre-vote while another still holds the dead leader's lease.
    for (const o of this.nodes) {
      if (!o.alive || o.core === null || o.pausedUntil > this.now) continue;
      if (o.core.basicStatus().leader !== n.id) continue;
      const time = this.now + this.rng.int(2 * o.tickMs + 1);
      this.schedule({ kind: 'leaderGone', node: o, inc: o.inc, gone: n.id, time, seq: 0 });
    }
  }

  /** Checks invariants after a step on `n` and hands its next Ready to the simulated disk. */
  private afterStep(n: SimNode, ticked = false): void {
    const core = this.coreOf(n);
    // A follower needs a snapshot while this node's is deferred: take one with bytes (as the driver does).
    if (core.takeSnapshotRequest()) {
      this.stats.snapshotsOnRequest++;
      this.snapshot(n, true);
    }
    const s = core.basicStatus();
    if (s.role === 'candidate' && n.lastRole !== 'candidate') this.newCandidateFault(n);
    const wasLeader = n.lastRole === 'leader';
    n.lastRole = s.role;
    if (wasLeader && s.role !== 'leader') this.outcomeUnknown(n);
    if (s.role === 'leader') {
      if (this.checker.onLeader(n.id, s.term, core, s.lastIndex)) {
        this.checker.checkElectionQuorum(n.id, s.term, core.status({ progress: false }).conf);
        this.stats.elections++;
        this.traceEvent(() => `${n.id} LEADER term=${s.term} last=${s.lastIndex} commit=${s.commit}`);
        this.newLeaderFault(n);
      }
    }
    this.observeCommitDecision(n, core, wasLeader, s);
    // Only commits confirmed durable count as committed (a single voter's in-memory commit may be lost).
    const commit = Math.min(s.commit, this.checker.durableCommit);
    if (commit > n.checkedCommit) {
      this.checker.onCommit(n.id, s.role === 'leader' ? s.term : null, core, n.checkedCommit, commit);
      n.checkedCommit = commit;
    }
    if (n.pending !== null && n.appliedEarly === n.pending.committed.length) this.whileWriting(n, core, ticked);
    if (n.pending === null && core.hasReady()) {
      const rd = core.ready();
      n.pending = rd;
      n.toldCommit = core.basicStatus().commit;
      // Like the driver: a leader's replication traffic leaves before the write starts (its fsync overlaps the
      // followers'); a crash before the sync event loses the leader's unsynced entries.
      const { beforePersist, afterPersist } = splitMessages(rd, n.persistedHard.term);
      n.pendingMessages = afterPersist;
      n.pendingEarly = beforePersist.length > 0;
      const delay = this.p.diskMaxMs > 0 ? this.rng.int(this.p.diskMaxMs + 1) : 0;
      this.schedule({ kind: 'sync', node: n, inc: n.inc, time: this.now + delay, seq: 0 });
      if (beforePersist.length > 0) {
        this.traceEvent(() => `${n.id} sends ${beforePersist.length} before its write`);
        this.exposeMessages(n, beforePersist);
        for (const m of beforePersist) this.send(m);
      }
      // Like the driver: the committed entries the disk holds already are applied while the write runs.
      n.appliedEarly = durableCommitted(rd);
      if (n.appliedEarly > 0) {
        const early = rd.committed.slice(0, n.appliedEarly);
        this.traceEvent(() => `${n.id} applies ${early.length} before its write`);
        this.exposeCommit(n, early[early.length - 1]!.index, 'applied before the write');
        for (const e of early) this.apply(n, core, e);
      }
    }
    this.releaseHeld(n);
  }

  /**
   * Like the driver (RaftNode.whileWriting) after a step or a tick while the pending Ready's write runs: a commit
   * that moved (or a tick's heartbeats) is told to the followers at once (the replication messages queued since),
   * and committed entries the disk holds are applied at once.
   */
  private whileWriting(n: SimNode, core: RaftCore, ticked: boolean): void {
    const commit = core.basicStatus().commit;
    const { messages, committed } = core.takeEarly(n.persistedHard.term, commit > n.toldCommit || ticked);
    if (messages.length > 0) {
      n.toldCommit = commit;
      this.traceEvent(() => `${n.id} sends ${messages.length} during its write (commit ${commit})`);
      this.exposeMessages(n, messages);
      for (const m of messages) this.send(m);
    }
    if (committed.length > 0) {
      const last = committed[committed.length - 1]!.index;
      this.traceEvent(() => `${n.id} applies ${committed.length} during its write`);
      this.exposeCommit(n, last, 'applied during the write');
      for (const e of committed) this.apply(n, core, e);
      core.appliedTo(last);
    }
  }

  /** Every commit index the messages expose must be durable on a quorum already. */
  private exposeMessages(n: SimNode, messages: Message[]): void {
    for (const m of messages) {
      if ((m.type === 'append' || m.type === 'heartbeat') && m.commit > 0) this.exposeCommit(n, m.commit, m.type);
      else if (m.type === 'readIndexResp') this.exposeCommit(n, m.index, 'read index');
      else if ((m.type === 'voteResp' || m.type === 'preVoteResp') && m.reject)
        this.exposeCommit(n, m.index, 'vote hint');
    }
  }

  /**
   * Records a leader's commit decision (called after every step, and after each membership change it applies,
   * so the configuration it counted under is the one seen). A leader that stepped down within this step (it
   * handed over after its removal) without changing term still decided: no other node leads that term. Any
   * other commit advance of a non-leader was learned (from a leader, a snapshot or a vote rejection's hint).
   */
  private observeCommitDecision(n: SimNode, core: RaftCore, wasLeader: boolean, basic = core.basicStatus()): void {
    if (basic.role === 'leader') n.leaderTerm = basic.term;
    if (basic.commit <= n.decidedCommit) return;
    n.decidedCommit = basic.commit;
    if (n.leaderTerm !== basic.term || (basic.role !== 'leader' && !wasLeader)) return;
    const s = core.status({ progress: false });
    // The leader counts its own entries only once they are synced, like every other voter's.
    this.checker.onCommitDecision(n.id, s.term, s.commit, s.conf, (v) =>
      this.diskHoldsTermAtOrAfter(v, s.term, s.commit),
    );
    if (isSingleVoter(s.conf)) this.stats.singleVoterCommits++;
  }

  /** Checks that commit index `commit`, about to leave node `n`, is durable on a quorum (Checker.checkExposure). */
  private exposeCommit(n: SimNode, commit: number, what: string): void {
    this.checker.checkExposure(n.id, commit, what, (v, term, from) => this.diskHoldsTermAtOrAfter(v, term, from));
  }

  /** Voter `id`'s synced disk holds an entry of `term` at an index >= `from` (or a snapshot covering `from`). */
  private diskHoldsTermAtOrAfter(id: NodeId, term: number, from: number): boolean {
    const v = this.byId.get(id);
    if (!v) return false;
    const disk = v.disk;
    const snap = disk.snapshot();
    if (snap && snap.meta.index >= from) return true;
    for (let i = disk.lastIndex(); i >= from && i >= disk.firstIndex(); i--) {
      const t = disk.term(i);
      if (t < term) return false;
      if (t === term) return true;
    }
    return false;
  }

  /** The pending Ready's write becomes durable: persist, send, apply, advance. */
  private sync(n: SimNode): void {
    const rd = n.pending as Ready;
    const messages = n.pendingMessages;
    const core = this.coreOf(n);
    n.pending = null;
    n.pendingMessages = [];
    this.traceEvent(
      () =>
        `${n.id} sync entries=${rd.entries.length} committed=${rd.committed.length} msgs=${messages.length}` +
        `${rd.snapshot ? ` snapshot@${rd.snapshot.meta.index}` : ''}${rd.hardState ? ` hs=${JSON.stringify(rd.hardState)}` : ''}`,
    );
    // 1. persist: received snapshot chunks first, then the snapshot they complete
    n.disk.receiveSnapshot(rd.snapshotChunks);
    if (rd.snapshot) n.disk.applySnapshot(rd.snapshot);
    if (rd.entries.length > 0) {
      n.disk.append(rd.entries);
      this.checker.onPersistEntries(n.id, rd.entries, (i) => n.disk.term(i), entryDataHash);
    }
    // Every commit index this Ready exposes (written, sent, read or applied) must be durable on a quorum now
    // that its entries are.
    if (rd.hardState) this.exposeCommit(n, rd.hardState.commit, 'hard state');
    this.exposeMessages(n, messages);
    for (const rs of rd.readStates) this.exposeCommit(n, rs.index, 'read state');
    const lastCommitted = rd.committed[rd.committed.length - 1];
    if (lastCommitted) this.exposeCommit(n, lastCommitted.index, 'applied');
    this.persistHardState(n, rd);
    // 2. send
    for (const m of messages) {
      if (m.type === 'voteResp' && !m.reject) this.checker.onSendVoteGrant(n.id, m.to, m.term, n.persistedHard);
      this.send(m);
    }
    // 3. apply
    if (rd.snapshot) {
      const st = decodeSnapshotData(n.disk.snapshotData() as Uint8Array, rd.snapshot.meta.conf);
      if (st.index !== rd.snapshot.meta.index) this.checker.violation('snapshot', `${n.id} snapshot index mismatch`);
      this.checker.onSnapshotInstalled(n.id, st.index, st.hash);
      n.sm = st;
      this.noteConf(st.index, st.conf);
      for (const idx of [...n.proposals.keys()]) if (idx <= st.index) n.proposals.delete(idx);
      this.stats.snapshotsInstalled++;
    }
    for (const e of rd.committed.slice(n.appliedEarly)) this.apply(n, core, e);
    n.appliedEarly = 0;
    if ((rd.snapshot || rd.committed.length > 0) && this.rng.chance(this.p.appPersistRate)) n.appDurable = copySm(n.sm);
    for (const rs of rd.readStates) {
      const rid = new DataView(rs.context.buffer, rs.context.byteOffset, rs.context.byteLength).getUint32(0);
      // Kept after the first answer: a duplicated request or response legitimately yields a second one, and
      // an answer may reach a node that restarted since it asked.
      const issued = this.reads.get(rid);
      if (issued === undefined || issued.node !== n) {
        this.checker.violation('linearizable-read', `${n.id} got an answer to unknown read ${rid}`);
      }
      this.checker.onReadState(n.id, rs.index, issued.commitAtIssue);
    }
    // 4. advance
    core.advance(rd);
    this.afterStep(n);
  }

  /**
   * Persists the Ready's hard state. With lazyCommit (like the LevelDB log) a change of nothing but the commit
   * index is not written; any later synced write carries the latest hard state.
   */
  private persistHardState(n: SimNode, rd: Ready): void {
    if (rd.hardState) n.writtenHard = { ...rd.hardState };
    const durable = n.disk.getHardState();
    const next = { ...n.writtenHard, commit: Math.max(n.writtenHard.commit, durable.commit) };
    const synced =
      !this.p.lazyCommit ||
      rd.snapshot !== null ||
      rd.entries.length > 0 ||
      next.term !== durable.term ||
      next.vote !== durable.vote;
    if (!synced || (next.term === durable.term && next.vote === durable.vote && next.commit === durable.commit)) return;
    this.checker.onPersistHardState(n.id, n.persistedHard, next);
    n.disk.setHardState(next);
    n.persistedHard = { ...next };
  }

  private apply(n: SimNode, core: RaftCore, e: Entry): void {
    if (e.index !== n.sm.index + 1) {
      this.checker.violation('state-machine-safety', `${n.id} applied index ${e.index} after ${n.sm.index}`);
    }
    const dataHash = entryDataHash(e);
    const hash = chainHash(n.sm.hash, e, dataHash);
    this.checker.onApply(n.id, e, dataHash, hash);
    n.sm.index = e.index;
    n.sm.hash = hash;
    if (e.type === 'normal') {
      n.sm.count++;
      const pid = decodeProposalId(e.data);
      this.checker.onProposalApplied(n.id, pid, e.index);
    } else if (e.type === 'conf') {
      if (e.index <= n.confIndexAtStart) {
        // The driver recorded this membership before a restart and the core started with it: skip it.
        const conf = this.checker.confAfter(e.index);
        if (!conf) throw new Error(`${n.id}: no membership recorded for conf entry ${e.index}`);
        n.sm.conf = copyConfState(conf);
      } else {
        n.sm.conf = core.applyConfChange(decodeConfChange(e.data));
        if (this.p.recordConf) n.disk.setConf(e.index, n.sm.conf);
        this.observeCommitDecision(n, core, n.lastRole === 'leader');
      }
      this.checker.onConfApplied(n.id, e.index, copyConfState(n.sm.conf));
      this.noteConf(e.index, n.sm.conf);
    }
    const pp = n.proposals.get(e.index);
    if (pp) {
      n.proposals.delete(e.index);
      if (e.type === 'normal' && e.term === pp.term && decodeProposalId(e.data) === pp.pid) {
        this.stats.acked++;
        this.ackedMaxIndex = Math.max(this.ackedMaxIndex, e.index);
        if (this.phase === 'liveness' && pp.pid >= this.firstLivenessPid) {
          this.traceEvent(() => `${n.id} liveness proposal ${pp.pid} acknowledged at ${e.index}`);
          this.stats.recoveryElectionTimeouts = (this.now - this.p.chaosMs) / (this.p.electionTicks * this.p.tickMs);
          this.beginConvergence();
        }
      }
    }
  }

  private noteConf(index: number, conf: ConfState): void {
    if (index <= this.latestConf.index) return;
    this.latestConf = { index, conf: copyConfState(conf) };
    this.confHistory.push(this.latestConf);
    // Bootstrap entries are not changes.
    if (index > this.bootEntries) this.stats.confChanges++;
    for (const id of [...conf.voters, ...conf.learners, ...conf.votersOutgoing, ...conf.learnersNext]) {
      this.everMember.add(id);
    }
  }

  // ---------------------------------------------------------------- network

  private send(unfilled: Message): void {
    this.stats.messages++;
    const from = this.byId.get(unfilled.from);
    const to = this.byId.get(unfilled.to);
    if (!from || !to) return;
    // Like the driver: a snapshot chunk's bytes are read from the sender's disk as it is sent.
    const m = withChunkData(unfilled, from.disk, this.p.snapshotChunkBytes);
    if (m === null) {
      from.core?.reportSnapshot(unfilled.to, false);
      return;
    }
    if (this.blocked.has(from.idx * 64 + to.idx)) {
      // Like a transport whose connection is down, tell the sender (it is mid-Ready: allowed by the contract).
      if (from.core && m.type === 'snapshot') from.core.reportSnapshot(m.to, false);
      else if (from.core && m.type === 'append') from.core.reportUnreachable(m.to);
      return;
    }
    const p = this.p;
    if (this.phase === 'chaos' && this.rng.chance(p.lossRate)) return;
    const copies = this.phase === 'chaos' && this.rng.chance(p.dupRate) ? 2 : 1;
    for (let c = 0; c < copies; c++) {
      let delay = p.delayMinMs + this.rng.int(p.delayMaxMs - p.delayMinMs + 1);
      if (this.phase === 'chaos' && this.rng.chance(p.slowRate)) delay *= 1 + this.rng.int(10);
      this.schedule({ kind: 'deliver', msg: m, time: this.now + delay, seq: 0 });
    }
  }

  // ---------------------------------------------------------------- chaos

  private aliveNodes(): SimNode[] {
    return this.nodes.filter((n) => n.alive);
  }

  private leaders(): SimNode[] {
    return this.nodes.filter((n) => n.alive && n.core !== null && n.core.basicStatus().role === 'leader');
  }

  private chaos(): void {
    const p = this.p;
    const rng = this.rng;
    if (rng.chance(p.pPropose)) this.clientPropose();
    if (rng.chance(p.pRead)) this.clientRead();
    if (rng.chance(p.pPartition)) this.partition();
    if (rng.chance(p.pCrash)) {
      const alive = this.aliveNodes();
      const leaders = this.leaders();
      if (alive.length > 0) {
        // Leaders are the interesting victims: half of the crashes hit one.
        const n = leaders.length > 0 && rng.chance(0.5) ? rng.pick(leaders) : rng.pick(alive);
        this.crash(n);
        const down = rng.chance(0.2) ? 0 : rng.range(50, 3000);
        this.schedule({ kind: 'restart', node: n, time: this.now + down, seq: 0 });
      }
    }
    if (rng.chance(p.pPause)) {
      const alive = this.aliveNodes();
      if (alive.length > 0) this.pause(rng.pick(alive), rng.range(20, p.pauseMaxMs));
    }
    if (rng.chance(p.pConf)) this.confChange();
    if (rng.chance(p.pTransfer)) this.transfer();
    if (rng.chance(p.pSnapshot)) {
      const alive = this.aliveNodes();
      if (alive.length > 0) this.snapshot(rng.pick(alive));
    }
  }

  private pause(n: SimNode, ms: number): void {
    n.pausedUntil = Math.max(n.pausedUntil, this.now + ms);
    this.traceEvent(() => `${n.id} PAUSE until ${n.pausedUntil}`);
  }

  /** A freshly elected leader sometimes fails right away (crash, isolation or stall): the nastiest moment. */
  private newLeaderFault(n: SimNode): void {
    if (this.phase !== 'chaos' || !this.rng.chance(this.p.pNewLeaderFault)) return;
    const delay = this.rng.int(3 * this.p.delayMaxMs + 1);
    const inc = n.inc;
    const kind = this.rng.int(3);
    this.schedule({ kind: 'leaderFault', node: n, inc, time: this.now + delay, seq: 0, faultKind: kind });
  }

  /** A campaign sometimes meets a stalled voter whose answer arrives after the candidate moved on. */
  private newCandidateFault(n: SimNode): void {
    if (this.phase !== 'chaos' || !this.rng.chance(this.p.pNewCandidateFault)) return;
    const others = this.aliveNodes().filter((o) => o !== n);
    if (others.length === 0) return;
    const electionMs = this.p.electionTicks * this.p.tickMs;
    this.pause(this.rng.pick(others), this.rng.range(electionMs, 2 * electionMs));
  }

  private clientPropose(): void {
    const leaders = this.leaders();
    // Mostly talk to a leader; sometimes to anyone (exercises ProposalDroppedError on followers).
    const alive = this.aliveNodes();
    const target =
      leaders.length > 0 && this.rng.chance(0.9) ? this.rng.pick(leaders) : alive.length ? this.rng.pick(alive) : null;
    if (!target) return;
    // Sometimes several at once, as the driver hands the proposals of one event-loop turn to the core together.
    if (this.rng.chance(0.3)) this.proposeMany(target, 2 + this.rng.int(3));
    else this.propose(target);
  }

  /**
   * holdWhileCommitting, as the driver decides it (RaftNode.proposeBatched): true when `n` leads with appended
   * entries not yet committed, or holds proposals already (they go once it has applied everything it appended),
   * so a new proposal waits in `held` (at most MAX_HELD) instead of reaching the core.
   */
  private holds(n: SimNode): boolean {
    if (!this.p.holdWhileCommitting || n.core === null) return false;
    if (n.held.length > 0) return true;
    const s = n.core.basicStatus();
    return s.role === 'leader' && s.lastIndex > s.commit;
  }

  private hold(n: SimNode, pid: number, data: Uint8Array): void {
    if (n.held.length >= MAX_HELD) {
      this.traceEvent(() => `${n.id} refuses #${pid}: ${MAX_HELD} held`);
      return;
    }
    n.held.push({ pid, data });
    this.stats.held++;
    this.traceEvent(() => `${n.id} holds #${pid} (${n.held.length} held)`);
  }

  /**
   * Like the driver (RaftNode.releaseHeld, proposeBatched): the held proposals go to the core together once this
   * leader has applied everything it appended; they are refused, never proposed, once it no longer leads.
   */
  private releaseHeld(n: SimNode): void {
    if (n.held.length === 0 || n.core === null || this.opts.brokenDriver === 'neverRelease') return;
    const s = n.core.basicStatus();
    if (s.role !== 'leader') {
      this.refuseHeld(n, `now ${s.role}`);
      return;
    }
    if (n.sm.index < s.lastIndex) return;
    const held = n.held;
    n.held = [];
    this.traceEvent(() => `${n.id} releases ${held.length} held`);
    this.proposeTogether(
      n,
      held.map((h) => h.pid),
      held.map((h) => h.data),
    );
  }

  private refuseHeld(n: SimNode, why: string): void {
    if (n.held.length === 0) return;
    const count = n.held.length;
    n.held = [];
    this.traceEvent(() => `${n.id} refuses ${count} held (${why})`);
  }

  /** A proposal of `n` still pending is not known to have failed: a correct client never re-proposes it. */
  private outcomeUnknown(n: SimNode): void {
    if (this.opts.brokenClient !== 'blindRetry') return;
    for (const pp of n.proposals.values()) {
      if (this.unknownOutcome.length < MAX_UNKNOWN_OUTCOMES) this.unknownOutcome.push(pp.pid);
    }
  }

  private propose(n: SimNode): void {
    const pid = this.unknownOutcome.shift() ?? this.nextPid++;
    const data = encodeProposal(pid, this.p.proposalPadMax > 0 ? this.rng.int(this.p.proposalPadMax + 1) : 0);
    if (this.holds(n)) {
      this.hold(n, pid, data);
      return;
    }
    try {
      const core = this.coreOf(n);
      const { index, term } = core.propose(data);
      n.proposals.set(index, { pid, term });
      this.stats.proposals++;
      this.traceEvent(() => `${n.id} propose #${pid} -> index ${index} term ${term}`);
      this.afterStep(n);
    } catch (err) {
      if (!(err instanceof ProposalDroppedError)) throw err;
    }
  }

  /** `count` proposals in one RaftCore.proposeMany call; those past the uncommitted-bytes bound are not appended. */
  private proposeMany(n: SimNode, count: number): void {
    const pids: number[] = [];
    const datas: Uint8Array[] = [];
    for (let i = 0; i < count; i++) {
      pids.push(this.unknownOutcome.shift() ?? this.nextPid++);
      datas.push(encodeProposal(pids[i]!, this.p.proposalPadMax > 0 ? this.rng.int(this.p.proposalPadMax + 1) : 0));
    }
    if (this.holds(n)) {
      for (let i = 0; i < count; i++) this.hold(n, pids[i]!, datas[i]!);
      return;
    }
    this.proposeTogether(n, pids, datas);
  }

  private proposeTogether(n: SimNode, pids: number[], datas: Uint8Array[]): void {
    try {
      const ats = this.coreOf(n).proposeMany(datas);
      for (const [i, { index, term }] of ats.entries()) {
        n.proposals.set(index, { pid: pids[i]!, term });
        this.stats.proposals++;
      }
      this.traceEvent(() => `${n.id} proposeMany #${pids.join(',')} -> ${ats.map((a) => a.index).join(',')}`);
      this.afterStep(n);
    } catch (err) {
      if (!(err instanceof ProposalDroppedError)) throw err;
    }
  }

  private clientRead(): void {
    const alive = this.aliveNodes();
    if (alive.length === 0) return;
    const n = this.rng.pick(alive);
    const rid = this.nextReadId++;
    const ctx = new Uint8Array(4);
    new DataView(ctx.buffer).setUint32(0, rid);
    try {
      const core = this.coreOf(n);
      const s = core.status({ progress: false });
      core.readIndex(ctx);
      this.reads.set(rid, { node: n, commitAtIssue: this.checker.durableCommit });
      this.stats.reads++;
      if (s.role === 'leader' && isSingleVoter(s.conf)) this.stats.singleVoterReads++;
      this.traceEvent(() => `${n.id} readIndex #${rid} (durable commit ${this.checker.durableCommit})`);
      this.afterStep(n);
    } catch (err) {
      if (!(err instanceof ProposalDroppedError)) throw err;
    }
  }

  private partition(): void {
    const rng = this.rng;
    const live = this.nodes.filter((n) => !n.stopped);
    if (live.length < 2) return;
    const blocked = new Set<number>();
    const kind = rng.int(4);
    const block = (a: SimNode, b: SimNode) => blocked.add(a.idx * 64 + b.idx);
    if (kind === 0) {
      // Isolate one node (a leader, if any, half of the time).
      const leaders = this.leaders();
      this.isolate(leaders.length > 0 && rng.chance(0.5) ? rng.pick(leaders) : rng.pick(live));
      return;
    } else if (kind === 1) {
      // Split into two groups.
      const side = new Map<SimNode, boolean>();
      for (const n of live) side.set(n, rng.chance(0.5));
      for (const a of live) for (const b of live) if (side.get(a) !== side.get(b)) block(a, b);
    } else if (kind === 2) {
      // Asymmetric: one node can send but not receive (or the reverse).
      const victim = rng.pick(live);
      const inbound = rng.chance(0.5);
      for (const o of live) {
        if (o === victim) continue;
        if (inbound) block(o, victim);
        else block(victim, o);
      }
    } else {
      // Random one-way link failures.
      for (const a of live) for (const b of live) if (a !== b && rng.chance(0.3)) block(a, b);
    }
    this.blocked = blocked;
    this.stats.partitions++;
    this.traceEvent(() => `PARTITION kind=${kind} blocked=${blocked.size}`);
    this.schedule({ kind: 'heal', time: this.now + rng.range(100, 2500), seq: 0 });
  }

  /** Cuts `victim` off from everyone (replacing any current partition) until a later heal. */
  private isolate(victim: SimNode): void {
    const blocked = new Set<number>();
    for (const o of this.nodes) {
      if (o === victim) continue;
      blocked.add(victim.idx * 64 + o.idx);
      blocked.add(o.idx * 64 + victim.idx);
    }
    this.blocked = blocked;
    this.stats.partitions++;
    this.traceEvent(() => `PARTITION isolate ${victim.id}`);
    this.schedule({ kind: 'heal', time: this.now + this.rng.range(100, 2500), seq: 0 });
  }

  private confChange(): void {
    const leaders = this.leaders();
    if (leaders.length === 0) return;
    const leader = this.rng.pick(leaders);
    const core = this.coreOf(leader);
    const conf = core.status({ progress: false }).conf;
    const rng = this.rng;
    const voters = conf.voters;
    const learners = conf.learners;
    const members = voters.length + learners.length;
    let cc: ConfChange | null = null;
    let newNode: NodeId | null = null;
    if (conf.votersOutgoing.length > 0) {
      if (!conf.autoLeave) cc = { changes: [] };
    } else {
      const options: (() => ConfChange | null)[] = [];
      if (members < this.p.maxMembers) {
        options.push(() => {
          newNode = `n${this.nodes.length + 1}`;
          return { changes: [{ type: 'addLearner', node: newNode }] };
        });
      }
      if (learners.length > 0) {
        options.push(() => ({ changes: [{ type: 'addVoter', node: rng.pick(learners) }] }));
        options.push(() => ({ changes: [{ type: 'removeNode', node: rng.pick(learners) }] }));
        // Replace a voter (maybe the only one, maybe the leader) by a learner through a joint configuration.
        options.push(() => {
          const changes: ConfChangeSingle[] = [
            { type: 'addVoter', node: rng.pick(learners) },
            { type: 'removeNode', node: rng.pick(voters) },
          ];
          return rng.chance(0.5) ? { changes, transition: 'joint' } : { changes };
        });
      }
      if (voters.length > this.p.minVoters) {
        options.push(() => ({ changes: [{ type: 'removeNode', node: rng.pick(voters) }] }));
        // Demote a voter to a learner (staged through learnersNext).
        options.push(() => ({
          changes: [{ type: 'addLearner', node: rng.pick(voters) }],
          transition: rng.chance(0.5) ? 'joint' : 'auto',
        }));
      }
      if (options.length > 0) cc = rng.pick(options)();
    }
    if (!cc) return;
    try {
      const { index } = core.proposeConfChange(cc);
      this.traceEvent(() => `${leader.id} propose conf ${JSON.stringify(cc)} -> index ${index}`);
      if (newNode !== null) {
        const n = this.addNode(newNode, new MemoryLog());
        this.start(n);
      }
      this.afterStep(leader);
    } catch (err) {
      if (!(err instanceof ProposalDroppedError)) throw err;
    }
  }

  private transfer(): void {
    const alive = this.aliveNodes();
    if (alive.length === 0) return;
    const n = this.rng.pick(alive);
    const core = this.coreOf(n);
    const voters = core.status({ progress: false }).conf.voters;
    if (voters.length === 0) return;
    const target = this.rng.pick(voters);
    try {
      core.transferLeadership(target);
      this.stats.transfers++;
      this.traceEvent(() => `${n.id} transferLeadership -> ${target}`);
      this.afterStep(n);
    } catch (err) {
      if (!(err instanceof ProposalDroppedError)) throw err;
    }
  }

  /**
   * Captures the state machine at once and records it as the log's snapshot, now or — sometimes, as the driver's
   * background snapshot does — a while later, with entries applied meanwhile (the log then compacts behind a
   * snapshot older than the applied index; one overtaken by a snapshot received meanwhile is skipped).
   */
  private snapshot(n: SimNode, withBytes = !this.p.deferredSnapshots): void {
    if (!withBytes) {
      // Deferred: the application's state made durable (its checkpoint), the snapshot records only its index —
      // sometimes a while later, as the driver records it once the checkpoint's flush is done, with entries
      // applied meanwhile (the recorded index is the one made durable, not the applied one by then).
      n.appDurable = copySm(n.sm);
      const checkpointed: CapturedSnapshot = { index: n.sm.index, conf: copyConfState(n.sm.conf), data: null };
      this.stats.snapshotsDeferred++;
      if (n.core !== null && this.rng.chance(0.3)) {
        const ms = this.rng.range(1, this.p.electionTicks * this.p.tickMs);
        this.traceEvent(() => `${n.id} slow checkpoint@${checkpointed.index}: recorded in ${ms}ms, apply goes on`);
        this.schedule({
          kind: 'snapshotWritten',
          node: n,
          inc: n.inc,
          time: this.now + ms,
          seq: 0,
          snap: checkpointed,
        });
        return;
      }
      this.recordSnapshot(n, checkpointed);
      return;
    }
    const captured = {
      index: n.sm.index,
      conf: copyConfState(n.sm.conf),
      data: encodeSnapshotData(n.sm, this.p.snapshotFillerMax),
    };
    if (n.core !== null && this.rng.chance(0.3)) {
      const ms = this.rng.range(10, 3 * this.p.electionTicks * this.p.tickMs);
      this.traceEvent(() => `${n.id} slow snapshot@${captured.index}: written in ${ms}ms, apply goes on`);
      this.schedule({ kind: 'snapshotWritten', node: n, inc: n.inc, time: this.now + ms, seq: 0, snap: captured });
      return;
    }
    this.recordSnapshot(n, captured);
  }

  private recordSnapshot(n: SimNode, snap: CapturedSnapshot): void {
    if (!supersedes(snap.index, snap.data !== null, n.disk.snapshot())) return;
    n.disk.createSnapshot(snap.index, snap.conf, snap.data);
    this.stats.snapshotsCreated++;
    // Compact, sometimes keeping a few entries behind the snapshot for slow followers.
    const keep = this.rng.chance(0.5) ? 0 : this.rng.int(20);
    const upTo = Math.max(snap.index - keep, 0);
    if (upTo >= n.disk.firstIndex()) n.disk.compact(upTo);
    this.traceEvent(() => `${n.id} snapshot@${snap.index} compact<=${upTo}`);
  }

  // ---------------------------------------------------------------- liveness

  private endChaos(): void {
    this.phase = 'liveness';
    this.blocked = new Set();
    for (const n of this.nodes) if (!n.alive && !n.stopped) this.start(n);
    this.retireRemoved();
    // Bound: elections settle within LIVENESS_ELECTION_TIMEOUTS; on top, a quorum member may have to fetch
    // the whole log one window of appends per round trip.
    const p = this.p;
    this.firstLivenessPid = this.nextPid;
    this.livenessDeadline = this.now + LIVENESS_ELECTION_TIMEOUTS * p.electionTicks * p.tickMs + this.catchUpMs();
    this.traceEvent(() => `END OF CHAOS: healed, restarted; liveness deadline ${this.livenessDeadline}`);
    this.schedule({ kind: 'liveness', time: this.now + this.p.tickMs, seq: 0 });
  }

  /**
   * Worst-case time for a member to fetch the whole log under the seed's flow control (one window of appends
   * per round trip), or a snapshot (one window of chunks per round trip), and to apply it (entries per Ready,
   * one disk write each). Matters only for seeds with tiny messages and windows.
   */
  private catchUpMs(): number {
    const p = this.p;
    let lastIndex = 0;
    for (const n of this.nodes) if (!n.stopped) lastIndex = Math.max(lastIndex, n.disk.lastIndex());
    const entryBytes = ENTRY_OVERHEAD_BYTES + 4 + p.proposalPadMax;
    const entriesPerMsg = Math.max(1, Math.floor(p.maxMsgBytes / entryBytes));
    const roundTripMs = 2 * (p.delayMaxMs + p.diskMaxMs + p.tickMs);
    const fetchMs = Math.ceil(lastIndex / (entriesPerMsg * p.maxInflightMsgs)) * roundTripMs;
    const snapshotChunks = Math.ceil((16 + p.snapshotFillerMax) / p.snapshotChunkBytes);
    const snapshotMs = Math.ceil(snapshotChunks / p.maxInflightMsgs) * roundTripMs;
    const entriesPerReady = Math.max(1, Math.floor(p.maxCommittedBytesPerReady / entryBytes));
    const applyMs = Math.ceil(lastIndex / entriesPerReady) * (p.diskMaxMs + 1);
    return fetchMs + snapshotMs + applyMs;
  }

  /** A fresh proposal was acknowledged: stop proposing and wait for every member to apply everything. */
  private beginConvergence(): void {
    const p = this.p;
    this.phase = 'convergence';
    this.convergenceStartMs = this.now;
    this.convergenceDeadline = this.now + CONVERGENCE_ELECTION_TIMEOUTS * p.electionTicks * p.tickMs + this.catchUpMs();
    this.traceEvent(
      () => `CONVERGENCE: members must apply up to ${this.ackedMaxIndex} by ${this.convergenceDeadline} ms`,
    );
  }

  /**
   * The operator shuts removed members down, but only once every member of the configuration that removed
   * them has applied it: until then the survivors may need their votes (a removed leader steps down at once,
   * and with one or two voters left, or a joint configuration, the others cannot elect a leader without it).
   */
  /**
   * The operator stops the members a committed change removed, once every member of the latest configuration is
   * up: those in no configuration from the one in effect at the least applied index among these members on (a
   * member that has not applied the latest configuration yet may still need the others — e.g. the outgoing half of
   * a joint configuration it has to leave — and a removed member kept meanwhile may go on disrupting elections).
   */
  private retireRemoved(): void {
    const inConf = confMembers(this.latestConf.conf);
    let minApplied = this.latestConf.index;
    for (const id of inConf) {
      const m = this.byId.get(id);
      if (!m?.alive) return;
      minApplied = Math.min(minApplied, m.sm.index);
    }
    const keep = new Set<NodeId>();
    for (let i = this.confHistory.length - 1; i >= 0; i--) {
      const c = this.confHistory[i]!;
      for (const id of confMembers(c.conf)) keep.add(id);
      if (c.index <= minApplied) break;
    }
    for (const n of this.nodes) {
      if (n.stopped || !this.everMember.has(n.id) || keep.has(n.id)) continue;
      this.traceEvent(() => `${n.id} removed: stopped by the operator`);
      if (n.alive) this.crash(n);
      n.stopped = true;
    }
  }

  /** Members of the final configuration that have not applied every acknowledged entry yet. */
  private laggingMembers(): NodeId[] {
    const lagging: NodeId[] = [];
    for (const id of confMembers(this.latestConf.conf)) {
      const n = this.byId.get(id);
      if (!n?.alive || n.sm.index < this.ackedMaxIndex) lagging.push(id);
    }
    return lagging.sort();
  }

  private convergenceProbe(): void {
    if (this.laggingMembers().length > 0) return;
    for (const id of confMembers(this.latestConf.conf)) {
      const n = this.byId.get(id) as SimNode;
      this.checker.checkConverged(id, n.sm.index, n.sm.hash, this.ackedMaxIndex);
    }
    const p = this.p;
    this.stats.convergenceElectionTimeouts = (this.now - this.convergenceStartMs) / (p.electionTicks * p.tickMs);
    this.traceEvent(() => `CONVERGED at ${this.now} ms`);
    this.phase = 'done';
  }

  private livenessProbe(): void {
    // Keep one proposal in flight on the current leader; a proposal lost to a leader change is retried.
    const leaders = this.leaders();
    for (const l of leaders) {
      const term = this.coreOf(l).basicStatus().term;
      let pendingInTerm = false;
      for (const pp of l.proposals.values())
        if (pp.term === term && pp.pid >= this.firstLivenessPid) pendingInTerm = true;
      for (const h of l.held) if (h.pid >= this.firstLivenessPid) pendingInTerm = true;
      if (!pendingInTerm) this.propose(l);
    }
  }

  // ---------------------------------------------------------------- trace

  private traceEvent(line: () => string): void {
    if (this.opts.verbose) this.opts.verbose(`[${this.now}] ${line()}`);
    if (!this.opts.trace) return;
    this.traceLines.push(`[${this.now}] ${line()}`);
    if (this.traceLines.length > TRACE_LINES) this.traceLines.shift();
  }
}

function describe(m: Message): string {
  let s = `${m.from}->${m.to} ${m.type} t=${m.term}`;
  if (m.type === 'append') s += ` prev=(${m.index},${m.logTerm}) n=${m.entries.length} commit=${m.commit}`;
  else if (m.type === 'appendResp')
    s += ` index=${m.index}${m.reject ? ` REJECT hint=${m.rejectHint}/${m.rejectTerm}` : ''}`;
  else if (m.type === 'vote' || m.type === 'preVote') s += ` last=(${m.index},${m.logTerm})`;
  else if (m.type === 'voteResp' || m.type === 'preVoteResp') s += m.reject ? ' REJECT' : ' GRANT';
  else if (m.type === 'heartbeat') s += ` commit=${m.commit}`;
  else if (m.type === 'snapshot' && m.snapshot)
    s += ` snap@${m.snapshot.meta.index} off=${m.snapshot.offset_bytes} len=${m.snapshot.data.byteLength}${m.snapshot.done ? ' done' : ''}`;
  else if (m.type === 'snapshotResp') s += ` bytes=${m.rejectHint}${m.reject ? ' REJECT' : ''}`;
  else if (m.type === 'readIndexResp') s += ` index=${m.index}`;
  return s;
}

/** Runs one seed. Never throws for a protocol violation: the result says what went wrong. */
export function runSimulation(opts: SimOptions): SimResult {
  const sim = new Simulation(opts);
  let violation: string | null = null;
  let kind: string | null = null;
  try {
    sim.run();
  } catch (err) {
    if (err instanceof SimViolation) {
      kind = err.kind;
      violation = err.message;
    } else {
      kind = 'exception';
      violation = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    }
  }
  return {
    seed: opts.seed,
    ok: violation === null,
    violation,
    kind,
    stats: sim.stats,
    params: sim.params,
    trace: sim.trace,
  };
}
