/**
 * RaftNode: the driver that runs a RaftCore against a durable log, a transport and the application's state
 * machine.
 *
 * Ready processing, one Ready at a time (the next Ready is taken only after advance()):
 *   1. persist snapshot + entries + hard state in one synced write (group commit: every proposal that arrived
 *      while the previous write was in flight lands in this Ready, so one fsync covers them all). A leader's
 *      appends, heartbeats and snapshot chunks leave before this write starts (core/early-send.ts): the core
 *      counts the leader's own entries only once advance() reports them durable, so the leader's fsync overlaps
 *      its followers';
 *   2. send the other messages (votes, acknowledgements, read answers: only after step 1 is durable);
 *   3. apply: install a snapshot if any, then membership changes (recorded in the log before the application
 *      sees the entries), then the committed entries through StateMachine.apply;
 *   4. advance; settle proposals and reads; every `snapshotEvery_entries` applied entries, start a snapshot +
 *      compaction in the background (the state machine captures its state at once; its chunks are written to the
 *      log as it encodes them while the loop goes on persisting, sending and applying).
 *
 * Failures: a malformed message from a peer is dropped (onError). Anything else the core throws — in step, tick,
 * ready/advance or a proposal — and any log or state-machine failure stops the node (onFatal; pending work is
 * rejected `fatal`): the core may be half-changed, and memory and disk may disagree.
 */
import { randomInt } from 'node:crypto';
import { bootstrapEntries } from './core/bootstrap.js';
import { durableCommitted, splitMessages } from './core/early-send.js';
import { decodeConfChange, encodeConfChange, RaftCore } from './core/raft.js';
import { CatchUpWaiters, type LeaderView } from './node/catch-up.js';
import { decodeAddresses, encodeAddresses } from './node/conf-context.js';
import { RaftError } from './node/errors.js';
import { Listeners } from './node/events.js';
import { PendingProposals, type ProposalResult } from './node/proposals.js';
import { ReadBarrier } from './node/reads.js';
import { planSnapshotAt } from './node/snapshot-plan.js';
import { SnapshotSender } from './node/snapshot-sender.js';
import { restoreSnapshot, takeSnapshot } from './node/snapshot-stream.js';
import type { StateMachine } from './node/state-machine.js';
import { malformedReason } from './node/validate.js';
import { confMembers, type DurableLog, snapshotAddresses, supersedes } from './storage/durable-log.js';
import { SnapshotSupersededError } from './storage/errors.js';
import { MESSAGE_OVERHEAD_BYTES } from './transport/codec.js';
import type { PeerStats, Transport } from './transport/transport.js';
import {
  type ConfChange,
  type ConfState,
  ENTRY_OVERHEAD_BYTES,
  type Entry,
  type Message,
  type NodeId,
  ProposalDroppedError,
  type Random,
  type Ready,
  type Role,
} from './types.js';

export { RaftError, type RaftErrorCode } from './node/errors.js';
export type { ProposalResult } from './node/proposals.js';
export type { SnapshotChunks, StateMachine } from './node/state-machine.js';

export interface RaftNodeOptions {
  id: NodeId;
  log: DurableLog;
  transport: Transport;
  stateMachine: StateMachine;
  /** Index the application has already applied (it tracks its own applied index durably). */
  applied: number;
  /** Transport addresses known at start (e.g. from configuration). Merged with those recorded in the log. */
  peers?: Record<NodeId, string>;
  /** For a brand-new cluster: the initial voters, used only when the log is empty. A joining node omits it. */
  bootstrap?: { voters: NodeId[] };
  /** Length of one core tick. Default 100 ms. */
  tick_ms?: number;
  electionTicks?: number;
  heartbeatTicks?: number;
  preVote?: boolean;
  checkQuorum?: boolean;
  /**
   * Max bytes of entries in one append message (entrySizeBytes). Also the cap on one proposal: a larger entry
   * could never be sent, so propose() rejects it (`too-large`). With its framing it must fit the transport's
   * maxPayload_bytes (checked at start). Default 1 MiB.
   */
  maxMsgBytes?: number;
  maxInflightMsgs?: number;
  maxUncommittedBytes?: number;
  /** Bytes per streamed snapshot chunk; with its framing it must fit the transport's maxPayload_bytes. Default 1 MiB. */
  snapshotChunkBytes?: number;
  /**
   * Snapshot chunks in flight to one follower (each read from the log as it is sent, so this bounds the memory a
   * snapshot stream holds: chunks × snapshotChunkBytes). Default 4.
   */
  maxInflightSnapshotChunks?: number;
  /** Bound on proposals waiting to be applied; beyond it propose() rejects at once. Default 10 000. */
  maxPendingProposals?: number;
  /**
   * One batch in flight: proposals made while this leader holds appended entries not yet committed wait (in the
   * turn's batch, bounded like it) until those commit, and are then appended together. Under a load that keeps
   * many proposals outstanding this makes fewer, larger batches (fewer synced writes, appends and
   * acknowledgements per entry on every member); a proposal made while everything is committed is appended at
   * the end of its turn as always. Held proposals are refused if the node stops leading or stops. Default false.
   */
  holdWhileCommitting?: boolean;
  /** Bound on linearizable reads waiting. Default 10 000. */
  maxPendingReads?: number;
  /** A read index not confirmed within this bound is rejected. Default 4 election timeouts. */
  readTimeout_ms?: number;
  /** Take a snapshot and compact the log every N applied entries. Default 10 000; 0 disables. */
  snapshotEvery_entries?: number;
  /**
   * Stagger the members' snapshots: this node snapshots when its applied index crosses a multiple of
   * `snapshotEvery_entries` shifted by its phase, rank × N ÷ voters (its rank among the voters' ids in order), so
   * the members of a 3-voter cluster snapshot a third of an interval apart and a quorum stays free of the
   * snapshot's encoding and writes. Off by default: every node snapshots N entries after its last snapshot.
   */
  snapshotStagger?: boolean;
  /**
   * Deferred snapshots (the state machine must implement checkpoint): every `snapshotEvery_entries` applied
   * entries the node makes the state machine durable (checkpoint) and records a snapshot of its metadata only,
   * then compacts the log: no copy of the state, so a snapshot's cost does not grow with the state. Only when a
   * follower needs a snapshot (its next entry was compacted) is one with bytes taken (snapshot/snapshotStream) and
   * streamed. The state machine's own durable storage must then survive restarts: start() refuses a machine behind
   * the log's deferred snapshot. Off by default.
   */
  snapshotDeferred?: boolean;
  /** Entries kept below the snapshot index for slow followers. Default 1 000. */
  snapshotKeep_entries?: number;
  /**
   * promote(): the learner must be replicating steadily with its match index at most this many entries behind
   * the leader's last index before the change to voter is proposed. Default 1 000.
   */
  promoteMaxLag_entries?: number;
  /** promote(): how long to wait for the learner to catch up before rejecting `not-caught-up`. Default 10 election timeouts. */
  promoteTimeout_ms?: number;
  random?: Random;
}

export interface NodeStatus {
  id: NodeId;
  term: number;
  role: Role;
  leader: NodeId | null;
  commit: number;
  applied: number;
  firstIndex: number;
  lastIndex: number;
  snapshotIndex: number;
  conf: ConfState;
  pendingProposals: number;
  pendingReads: number;
  peers: PeerStats[];
  stopped: boolean;
}

const cryptoRandom: Random = { int: (n) => randomInt(n) };
const DEFAULT_MAX_MSG_BYTES = 1 << 20;
const DEFAULT_SNAPSHOT_CHUNK_BYTES = 1 << 20;
const DEFAULT_INFLIGHT_SNAPSHOT_CHUNKS = 4;
/** Ticks without a connection to the leader before a follower stops waiting for it (see checkLeaderConnection). */
const LEADER_DOWN_TICKS = 2;
/** Bound on the peers heardRecently() keeps a time for (a cluster has a handful; ids come from authenticated links). */
const MAX_HEARD_PEERS = 1024;
/** Bound on the messages whileWriting() acts on during one Ready's write (then it only waits for the write). */
const MAX_WRITE_ROUNDS = 10_000;
/** Bound on promote() calls waiting for their learner at once. */
const MAX_WAITING_PROMOTIONS = 64;

/** Every message the core can emit must fit the transport's frame limit, else it is dropped forever. */
function checkMessageLimits(maxMsgBytes: number, snapshotChunkBytes: number, maxPayload_bytes: number): void {
  for (const [name, bytes] of [
    ['maxMsgBytes', maxMsgBytes],
    ['snapshotChunkBytes', snapshotChunkBytes],
  ] as const) {
    if (!(Number.isSafeInteger(bytes) && bytes >= 1)) throw new RangeError(`raft: ${name} must be a positive integer`);
    if (bytes + MESSAGE_OVERHEAD_BYTES > maxPayload_bytes) {
      throw new RangeError(
        `raft: ${name} ${bytes} + ${MESSAGE_OVERHEAD_BYTES} bytes of framing exceeds the transport's ` +
          `maxPayload_bytes ${maxPayload_bytes}`,
      );
    }
  }
}

/** Where proposeBatched reports what became of one queued proposal (`slot`: its place in its caller's list). */
interface BatchSink {
  /** The core appended it at `index` in `term`. */
  taken(slot: number, index: number, term: number): void;
  /** Refused: nothing appended. */
  refused(slot: number, err: RaftError): void;
}

/** One proposal of this turn of the event loop, proposed together with the others at its end (proposeBatched). */
interface Batched {
  data: Uint8Array;
  /** The term it must be appended in (propose's fence), or undefined. */
  term: number | undefined;
  sink: BatchSink;
  slot: number;
}

/** propose(): an appended entry is followed until applied (PendingProposals) and settles the caller's promise. */
class Tracked implements BatchSink {
  constructor(
    private readonly proposals: PendingProposals,
    private readonly resolve: (r: ProposalResult) => void,
    private readonly reject: (err: Error) => void,
  ) {}

  taken(_slot: number, index: number, term: number): void {
    this.proposals.add(index, term).then(this.resolve, this.reject);
  }

  refused(_slot: number, err: RaftError): void {
    this.reject(err);
  }
}

/** offer(): one slot per item, null once appended or the refusal; resolves when every slot is known. */
class Offered implements BatchSink {
  private readonly results: Array<RaftError | null>;
  private remaining: number;

  constructor(
    count: number,
    private readonly resolve: (results: Array<RaftError | null>) => void,
  ) {
    this.results = new Array<RaftError | null>(count).fill(null);
    this.remaining = count;
    if (count === 0) resolve(this.results);
  }

  taken(slot: number): void {
    this.settle(slot, null);
  }

  refused(slot: number, err: RaftError): void {
    this.settle(slot, err);
  }

  private settle(slot: number, result: RaftError | null): void {
    if (!(this.remaining > 0)) throw new Error('raft: an offered proposal was settled twice');
    this.results[slot] = result;
    if (--this.remaining === 0) this.resolve(this.results);
  }
}

/** A received snapshot chunk with the member addresses its context carries (validated) in its metadata. */
function withReceivedAddresses(m: Message): Message {
  const c = m.snapshot!;
  const addresses = decodeAddresses(m.context);
  return { ...m, snapshot: { ...c, meta: { ...c.meta, addresses } } };
}

export class RaftNode {
  readonly id: NodeId;
  private readonly core: RaftCore;
  private readonly log: DurableLog;
  private readonly transport: Transport;
  private readonly sm: StateMachine;
  private readonly opts: RaftNodeOptions;
  private readonly proposals: PendingProposals;
  private readonly reads: ReadBarrier;
  private readonly tick_ms: number;
  private readonly electionTicks: number;
  private readonly readTimeout_ms: number;
  private readonly snapshotEvery: number;
  private readonly snapshotKeep: number;
  private readonly maxMsgBytes: number;
  private readonly promoteTimeout_ms: number;
  private readonly catchUp: CatchUpWaiters;
  private readonly snapshotSender: SnapshotSender;
  private tickTimer: NodeJS.Timeout | null = null;
  /** Consecutive ticks this follower's transport has had no open connection to its leader. */
  private leaderDownTicks = 0;
  private applied: number;
  private role: Role = 'follower';
  private leader: NodeId | null = null;
  private lastSnapshotIndex: number;
  /** The applied index at which the next snapshot is due (planSnapshot), or -1: not planned yet. */
  private snapshotAt = -1;
  /** The term on disk (term changes are always synced): a leader's messages of this term may leave early. */
  private durableTerm: number;
  private loopRunning = false;
  private loopScheduled = false;
  private loopIdle: Promise<void> = Promise.resolve();
  /** Resumes whileWriting() after a message was stepped or a tick. */
  private wake: (() => void) | null = null;
  /** A tick happened since whileWriting() last sent (a leader's heartbeats may be queued). */
  private ticked = false;
  /** Proposals of this turn of the event loop, proposed together at its end (proposeBatched). */
  private batched: Batched[] = [];
  /** holdWhileCommitting: whether the turn's batch waits for the leader's appended entries to commit. */
  private readonly holdWhileCommitting: boolean;
  private holding = false;
  /**
   * The snapshot being taken in the background (maybeSnapshot), or null: the state machine's state captured at
   * once, written to the log chunk by chunk while this node goes on persisting, sending and applying.
   */
  private snapshotting: Promise<void> | null = null;
  /** A follower needs a snapshot with bytes while the log's is deferred (core.takeSnapshotRequest). */
  private snapshotWanted = false;
  /** Ticks since start (see tick()). */
  private ticks = 0;
  /** The tick at which the last snapshot with bytes taken for a follower was recorded (-Infinity: none). */
  private bytesSnapshotTick = Number.NEGATIVE_INFINITY;
  private stopped = false;
  /** stop() was called: the transport and the log are (being) closed. */
  private closing = false;
  private failure: RaftError | null = null;
  private readonly leaderWaiters = new Set<{ to: NodeId; resolve: () => void; reject: (err: Error) => void }>();
  private readonly leaderChange = new Listeners<[leader: NodeId | null, term: number]>();
  private readonly applyListeners = new Listeners<[entries: Entry[]]>();
  private readonly fatalListeners = new Listeners<[err: Error]>();
  private readonly removedListeners = new Listeners<[index: number]>();
  /** When a well-formed message last came from each peer (performance.now(): monotonic); at most MAX_HEARD_PEERS. */
  private readonly heardAt = new Map<NodeId, number>();
  private readonly errorListeners = new Listeners<[err: Error]>();

  private constructor(opts: RaftNodeOptions, applied: number) {
    this.opts = opts;
    this.id = opts.id;
    this.log = opts.log;
    this.transport = opts.transport;
    this.sm = opts.stateMachine;
    this.applied = applied;
    this.tick_ms = opts.tick_ms ?? 100;
    this.electionTicks = opts.electionTicks ?? 10;
    this.readTimeout_ms = opts.readTimeout_ms ?? 4 * this.electionTicks * this.tick_ms;
    this.snapshotEvery = opts.snapshotEvery_entries ?? 10_000;
    this.snapshotKeep = opts.snapshotKeep_entries ?? 1_000;
    this.lastSnapshotIndex = Math.max(applied, opts.log.snapshot()?.meta.index ?? 0);
    this.durableTerm = opts.log.initialState().hardState.term;
    this.maxMsgBytes = opts.maxMsgBytes ?? DEFAULT_MAX_MSG_BYTES;
    this.promoteTimeout_ms = opts.promoteTimeout_ms ?? 10 * this.electionTicks * this.tick_ms;
    if (!(this.tick_ms > 0)) throw new RangeError('raft: tick_ms must be positive');
    if (!(this.promoteTimeout_ms >= 0)) throw new RangeError('raft: promoteTimeout_ms must be non-negative');
    if (this.transport.id !== this.id)
      throw new Error(`raft: transport is for ${this.transport.id}, node is ${this.id}`);
    this.proposals = new PendingProposals(opts.maxPendingProposals ?? 10_000);
    this.holdWhileCommitting = opts.holdWhileCommitting ?? false;
    this.reads = new ReadBarrier(opts.maxPendingReads ?? 10_000, (ctx) => this.requestReadIndex(ctx));
    this.catchUp = new CatchUpWaiters(MAX_WAITING_PROMOTIONS, opts.promoteMaxLag_entries ?? 1_000);
    this.core = new RaftCore({
      id: opts.id,
      storage: opts.log,
      random: opts.random ?? cryptoRandom,
      electionTicks: this.electionTicks,
      heartbeatTicks: opts.heartbeatTicks ?? 1,
      preVote: opts.preVote ?? true,
      checkQuorum: opts.checkQuorum ?? true,
      maxMsgBytes: this.maxMsgBytes,
      maxInflightMsgs: opts.maxInflightMsgs ?? 256,
      maxUncommittedBytes: opts.maxUncommittedBytes ?? 64 << 20,
      snapshotChunkBytes: opts.snapshotChunkBytes ?? DEFAULT_SNAPSHOT_CHUNK_BYTES,
      maxInflightSnapshotChunks: opts.maxInflightSnapshotChunks ?? DEFAULT_INFLIGHT_SNAPSHOT_CHUNKS,
      applied,
    });
    this.snapshotSender = new SnapshotSender({
      read: (meta, offset_bytes, max_bytes) => this.log.readSnapshot(meta, offset_bytes, max_bytes),
      chunk_bytes: opts.snapshotChunkBytes ?? DEFAULT_SNAPSHOT_CHUNK_BYTES,
      send: (m) => {
        if (!this.stopped) this.transport.send([this.withAddresses(m)]);
      },
      gone: (to) => {
        if (this.stopped) return;
        // The snapshot was replaced by a newer one: the stream starts over with it.
        this.guard(() => this.core.reportSnapshot(to, false));
        this.schedule();
      },
      failed: (err) => {
        if (!this.stopped) this.fail(err);
      },
    });
  }

  /**
   * Starts a node: bootstraps an empty log if asked, restores the state machine from the log's snapshot when
   * the application is behind it, connects to known peers and starts ticking.
   */
  static async start(opts: RaftNodeOptions): Promise<RaftNode> {
    const { log } = opts;
    if (opts.snapshotDeferred === true && opts.stateMachine.checkpoint === undefined)
      throw new Error('raft: snapshotDeferred needs a state machine with checkpoint()');
    checkMessageLimits(
      opts.maxMsgBytes ?? DEFAULT_MAX_MSG_BYTES,
      opts.snapshotChunkBytes ?? DEFAULT_SNAPSHOT_CHUNK_BYTES,
      opts.transport.maxPayload_bytes,
    );
    if (log.isEmpty() && opts.bootstrap !== undefined) {
      if (!opts.bootstrap.voters.includes(opts.id)) throw new Error(`raft: bootstrap voters must include ${opts.id}`);
      // The initial membership goes into the log as committed conf entries (term 1, indexes 1..n), each carrying
      // its voter's address, so that a member joining later learns it by replaying the log like any other change.
      const voters = opts.bootstrap.voters;
      const { entries, hardState } = bootstrapEntries(voters);
      const withAddresses = entries.map((e, i) => {
        const node = voters[i]!;
        const address = opts.peers?.[node];
        if (address === undefined) return e;
        const context = encodeAddresses({ [node]: address });
        return { ...e, data: encodeConfChange({ changes: [{ type: 'addVoter' as const, node }], context }) };
      });
      await log.persist({ snapshot: null, entries: withAddresses, hardState });
    }
    let applied = opts.applied;
    if (!(Number.isSafeInteger(applied) && applied >= 0))
      throw new RangeError('raft: applied must be a non-negative integer');
    const snap = log.snapshot();
    if (snap !== null && snap.meta.index > applied) {
      if (snap.deferred === true) {
        // The machine's own storage is that snapshot: it lost state it had made durable (checkpoint).
        throw new Error(
          `raft: the state machine is at ${applied}, behind the log's deferred snapshot at ${snap.meta.index}`,
        );
      }
      await restoreSnapshot(opts.stateMachine, snap.meta, log.snapshotChunks());
      applied = snap.meta.index;
    }
    const hs = log.initialState().hardState;
    if (applied > hs.commit) {
      // The commit index is written without fsync when nothing else changes, so a crash can leave it behind
      // what the application applied. Entries are fsynced before they are applied, so the log holds them.
      if (applied > log.lastIndex()) {
        throw new Error(`raft: application applied ${applied} beyond the log's last index ${log.lastIndex()}`);
      }
      await log.setHardState({ ...hs, commit: applied });
    }
    const node = new RaftNode(opts, applied);
    node.connect();
    return node;
  }

  // ---- public API ---------------------------------------------------------------------------------------

  /**
   * Proposes `data`; resolves once the entry is applied locally, with its index and term. Rejects with a
   * RaftError: `not-leader` (with `leader`, the leader to forward to), `too-large`, `too-many-pending`,
   * `leadership-lost`, `overwritten`, `stopped` or `fatal`. The entry is appended at the end of this turn of the
   * event loop, together with every other proposed in it (proposeBatched): a refusal (`not-leader`,
   * `too-many-pending`, `too-large`, `stopped`) is settled by then — in a setImmediate callback queued before any
   * the caller queues after calling — and means nothing was appended. With holdWhileCommitting, a proposal made
   * while this leader's appended entries are uncommitted is held instead, and appended (or refused) once they
   * commit, or refused once the node stops leading or stops.
   *
   * `term` fences the proposal: when given, it is appended only if this node leads in exactly that term at the
   * moment the core takes it (checked here and again when the turn's proposals are handed to the core); otherwise
   * it is refused (`not-leader`). A forward addressed to the leader of term t can then never be appended by the
   * same node leading again in a later term (a frame delayed across elections).
   */
  propose(data: Uint8Array, term?: number): Promise<ProposalResult> {
    const err =
      this.checkProposable() ??
      this.checkTerm(term) ??
      this.checkSize(data.byteLength + ENTRY_OVERHEAD_BYTES, 'proposal');
    if (err !== null) return Promise.reject(err);
    if (this.batchFull()) return Promise.reject(this.batchFullError());
    return new Promise((resolve, reject) => this.enqueue(data, term, new Tracked(this.proposals, resolve, reject), 0));
  }

  /**
   * Proposes each of `items` as leader of `term` (the fence, as in propose()), without following the entries to
   * their application: resolves, one slot per item in order, once the core has taken or refused them all (at the
   * end of this turn of the event loop, proposeBatched): null when the entry was appended, else the refusal
   * (`not-leader`, `too-many-pending`, `too-large`, `stopped`; nothing appended); held items (holdWhileCommitting)
   * are answered once taken or refused, as in propose(). Whether an appended entry is
   * then committed is for the caller to learn elsewhere (the state machine): nothing here waits for it, so an
   * offered entry costs no pending-proposal slot; the core's uncommitted-bytes bound still applies.
   */
  offer(items: readonly Uint8Array[], term: number): Promise<Array<RaftError | null>> {
    return new Promise((resolve) => {
      const sink = new Offered(items.length, resolve);
      // the same for every item of this call (nothing in the loop changes the role, the term or the pending count)
      const refusal = this.checkProposable() ?? this.checkTerm(term);
      for (let i = 0; i < items.length; i++) {
        const data = items[i]!;
        const err =
          refusal ??
          this.checkSize(data.byteLength + ENTRY_OVERHEAD_BYTES, 'proposal') ??
          (this.batchFull() ? this.batchFullError() : null);
        if (err !== null) sink.refused(i, err);
        else this.enqueue(data, term, sink, i);
      }
    });
  }

  private batchFull(): boolean {
    return this.proposals.size + this.batched.length >= this.proposals.max;
  }

  private batchFullError(): RaftError {
    return new RaftError('too-many-pending', `${this.proposals.size} proposals pending`);
  }

  /** Queues one proposal for the end of this turn (proposeBatched). */
  private enqueue(data: Uint8Array, term: number | undefined, sink: BatchSink, slot: number): void {
    this.batched.push({ data, term, sink, slot });
    if (this.batched.length === 1) setImmediate(() => this.proposeBatched());
  }

  /**
   * Hands the proposals of one turn of the event loop to the core together, so that they travel in one append per
   * follower (and are acknowledged once) instead of one each. A proposal refused here (leadership moved, the node
   * stopped, the uncommitted-bytes bound) was never appended: a definite refusal, as from propose() itself.
   */
  private proposeBatched(): void {
    if (this.holdWhileCommitting && !this.stopped && this.batched.length > 0) {
      const st = this.core.basicStatus();
      if (st.role === 'leader' && st.lastIndex > st.commit) {
        // released by the apply that reaches the last index, a change of role, or halt (releaseHeld)
        this.holding = true;
        return;
      }
    }
    this.holding = false;
    const taken = this.batched;
    this.batched = [];
    if (taken.length === 0) return;
    const err = this.checkProposable();
    if (err !== null) {
      for (const p of taken) p.sink.refused(p.slot, err);
      return;
    }
    // the term fence, at the moment the core takes them: a proposal for another term is refused, never appended
    const batch: Batched[] = [];
    const datas: Uint8Array[] = [];
    for (const p of taken) {
      const fenced = this.checkTerm(p.term);
      if (fenced === null) {
        batch.push(p);
        datas.push(p.data);
      } else p.sink.refused(p.slot, fenced);
    }
    if (batch.length === 0) return;
    let ats: Array<{ index: number; term: number }>;
    try {
      ats = this.core.proposeMany(datas);
    } catch (e) {
      const refusal = this.refused(e, false);
      for (const p of batch) p.sink.refused(p.slot, refusal);
      return;
    }
    for (let i = 0; i < batch.length; i++) {
      const p = batch[i]!;
      const at = ats[i];
      if (at === undefined) {
        p.sink.refused(p.slot, new RaftError('too-many-pending', 'too many uncommitted bytes on the leader'));
      } else p.sink.taken(p.slot, at.index, at.term);
    }
    // This is a turn of its own (a setImmediate callback): when the loop is idle, the appends leave and the write
    // starts now rather than a turn later.
    if (ats.length > 0) this.runNow();
  }

  /** Hands a held batch to proposeBatched (which appends it, holds it again, or refuses it), a turn later. */
  private releaseHeld(): void {
    if (!this.holding) return;
    this.holding = false;
    setImmediate(() => this.proposeBatched());
  }

  /** Linearizable read barrier: resolves with the read index once the local applied index reaches it. */
  readIndex(): Promise<number> {
    if (this.stopped) return Promise.reject(this.stoppedError());
    const p = this.reads.wait(Date.now());
    this.guard(() => this.reads.pump());
    this.schedule();
    return p;
  }

  /** Asks the leader to hand leadership to `to` (from any member); resolves when `to` is seen as leader. */
  async transferLeadership(to: NodeId, timeout_ms = 3 * this.electionTicks * this.tick_ms): Promise<void> {
    if (this.stopped) throw this.stoppedError();
    if (this.leader === to) return;
    try {
      // On a follower the core forwards the request to the leader.
      this.core.transferLeadership(to);
    } catch (err) {
      if (!(err instanceof ProposalDroppedError)) {
        this.fail(err as Error);
        throw this.stoppedError();
      }
      throw new RaftError('not-leader', `cannot transfer leadership to ${to}: ${err.message}`, {
        leader: err.leader,
      });
    }
    this.schedule();
    await this.waitForLeader(to, timeout_ms);
  }

  /** Adds a non-voting member; resolves once the change is applied here. `address` reaches every member. */
  addLearner(id: NodeId, address?: string): Promise<ProposalResult> {
    return this.proposeConf({
      changes: [{ type: 'addLearner', node: id }],
      ...(address === undefined ? {} : { context: encodeAddresses({ [id]: address }) }),
    });
  }

  /**
   * Makes learner `id` a voter, once it has caught up: the change is proposed only when the leader replicates
   * to it steadily and its match index is within `promoteMaxLag_entries` of the leader's last index, waiting up
   * to `timeout_ms` (default `promoteTimeout_ms`); else rejects `not-caught-up`. A node that is not a learner is
   * refused the same way (add it with addLearner first; proposeConf adds a voter directly, without the check).
   * Leader only. Resolves once the change is applied here.
   */
  async promote(id: NodeId, address?: string, timeout_ms = this.promoteTimeout_ms): Promise<ProposalResult> {
    const err = this.checkProposable();
    if (err !== null) throw err;
    const conf = this.core.status({ progress: false }).conf;
    if (!conf.voters.includes(id)) {
      if (!conf.learners.includes(id)) {
        throw new RaftError('not-caught-up', `${id} is not a learner: add it with addLearner() first so it catches up`);
      }
      const caughtUp = this.catchUp.wait(id, Date.now(), timeout_ms);
      this.checkCatchUp();
      await caughtUp;
    }
    return this.proposeConf({
      changes: [{ type: 'addVoter', node: id }],
      ...(address === undefined ? {} : { context: encodeAddresses({ [id]: address }) }),
    });
  }

  removeNode(id: NodeId): Promise<ProposalResult> {
    return this.proposeConf({ changes: [{ type: 'removeNode', node: id }] });
  }

  /** Proposes any membership change (e.g. a joint change of several members). */
  proposeConf(cc: ConfChange): Promise<ProposalResult> {
    const err =
      this.checkProposable() ?? this.checkSize(encodeConfChange(cc).byteLength + ENTRY_OVERHEAD_BYTES, 'conf change');
    if (err !== null) return Promise.reject(err);
    let at: { index: number; term: number };
    try {
      at = this.core.proposeConfChange(cc);
    } catch (e) {
      return Promise.reject(this.refused(e, true));
    }
    this.schedule();
    return this.proposals.add(at.index, at.term);
  }

  status(): NodeStatus {
    const s = this.core.status();
    return {
      id: this.id,
      term: s.term,
      role: s.role,
      leader: s.leader,
      commit: s.commit,
      applied: this.applied,
      firstIndex: this.log.firstIndex(),
      lastIndex: this.log.lastIndex(),
      snapshotIndex: this.log.snapshot()?.meta.index ?? 0,
      conf: s.conf,
      pendingProposals: this.proposals.size,
      pendingReads: this.reads.size,
      peers: this.transport.peers(),
      stopped: this.stopped,
    };
  }

  /**
   * Whether a message came from peer `id` within an election timeout: a leader hears every live follower at each
   * heartbeat, so a peer silent that long is down or cut off, even while its connection still looks open.
   */
  heardRecently(id: NodeId): boolean {
    const at = this.heardAt.get(id);
    return at !== undefined && performance.now() - at <= this.electionTicks * this.tick_ms;
  }

  /** The current term (cheap: for callers that check it per request). */
  term(): number {
    return this.core.currentTerm();
  }

  isLeader(): boolean {
    return this.role === 'leader' && !this.stopped;
  }

  /**
   * The leader as the core knows it now, consistent with term(): not the one of the last Ready processed, which
   * lags while the loop is busy writing (a caller pairing the two, like the proposer's "a later term's leader"
   * check, must not see an old term's leader with a new term).
   */
  leaderId(): NodeId | null {
    return this.core.knownLeader();
  }

  appliedIndex(): number {
    return this.applied;
  }

  onLeaderChange(fn: (leader: NodeId | null, term: number) => void): () => void {
    return this.leaderChange.add(fn);
  }

  /** Entries just applied to the state machine (after StateMachine.apply returned). */
  onApply(fn: (entries: Entry[]) => void): () => void {
    return this.applyListeners.add(fn);
  }

  /** The node stopped itself because the log or the state machine failed. */
  onFatal(fn: (err: Error) => void): () => void {
    return this.fatalListeners.add(fn);
  }

  /**
   * This node applied a membership change (at `index`) that leaves it out of the configuration: it was a member
   * and is no longer one. Raft goes on (a removed node is not sent the log any more); what to do is the
   * application's choice (etcd's server stops).
   */
  onRemoved(fn: (index: number) => void): () => void {
    return this.removedListeners.add(fn);
  }

  /** Non-fatal problems (a malformed message dropped, a skipped snapshot). */
  onError(fn: (err: Error) => void): () => void {
    return this.errorListeners.add(fn);
  }

  /**
   * Stops the node: optionally hands leadership to the most up-to-date voter first, finishes the Ready being
   * processed, rejects everything pending, closes the transport and the log.
   */
  async stop(opts: { transferLeadership?: boolean; timeout_ms?: number } = {}): Promise<void> {
    // After a fatal failure the node is halted but still holds its log: stop() releases it.
    if (this.closing) return;
    this.closing = true;
    if (!this.stopped && opts.transferLeadership === true && this.role === 'leader') {
      const target = this.transferTarget();
      if (target !== null) {
        try {
          await this.transferLeadership(target, opts.timeout_ms);
        } catch {
          // Stopping anyway: the others elect a leader after an election timeout.
        }
      }
    }
    this.halt(this.stoppedError());
    await this.idle();
    await this.transport.close();
    await this.log.close();
  }

  /**
   * Emulates a crash for tests: stops timers and the transport at once, without finishing or waiting for
   * anything. The durable log keeps exactly what was synced. The caller closes the log when it wants to.
   */
  async kill(): Promise<void> {
    this.halt(this.stoppedError());
    await this.transport.close();
  }

  /**
   * Resolves when the Ready being processed and the snapshot being taken (if any) are done; for tests that kill
   * then reopen a log.
   */
  async idle(): Promise<void> {
    await this.loopIdle;
    await this.snapshotting;
  }

  // ---- wiring -------------------------------------------------------------------------------------------

  private connect(): void {
    const addresses = { ...this.log.appliedConf().addresses, ...(this.opts.peers ?? {}) };
    for (const [id, address] of Object.entries(addresses)) if (id !== this.id) this.transport.addPeer(id, address);
    this.transport.onMessage((m) => this.receive(m));
    this.transport.onUnreachable((peer, dropped) => {
      if (this.stopped) return;
      this.guard(() => {
        this.core.reportUnreachable(peer);
        if (dropped.some((m) => m.type === 'snapshot')) this.core.reportSnapshot(peer, false);
      });
      this.schedule();
    });
    this.tickTimer = setInterval(() => this.tick(), this.tick_ms);
    this.schedule();
  }

  private tick(): void {
    if (this.stopped) return;
    this.guard(() => {
      this.checkLeaderConnection();
      this.core.tick();
      this.ticks++;
      const now = Date.now();
      this.reads.expire(now, this.readTimeout_ms);
      this.reads.pump();
      this.checkCatchUp(now);
    });
    this.ticked = true;
    this.wakeWriter();
    this.schedule();
  }

  /** Resumes whileWriting() (if it waits) to look at what the last step or tick changed. */
  private wakeWriter(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  /**
   * A follower whose transport lost its connection to the leader for LEADER_DOWN_TICKS ticks in a row (the leader's
   * process died: kill -9 closes its sockets at once) tells the core, which campaigns after a short delay instead of
   * a whole election timeout (RaftCore.leaderUnreachable). A leader that is only slow keeps its connections.
   */
  private checkLeaderConnection(): void {
    const lead = this.leader;
    if (this.role !== 'follower' || lead === null || lead === this.id) {
      this.leaderDownTicks = 0;
      return;
    }
    const state = this.transport.peers().find((p) => p.id === lead)?.state;
    if (state === undefined || state === 'connected') {
      this.leaderDownTicks = 0;
      return;
    }
    if (++this.leaderDownTicks < LEADER_DOWN_TICKS) return;
    this.leaderDownTicks = 0;
    this.core.leaderUnreachable();
  }

  /**
   * A message from a peer. A malformed one is dropped (no peer may stop this node); anything the core throws on
   * a well-formed one — a violated invariant, a failing log read — leaves the core in an unknown state: fatal.
   */
  private receive(m: Message): void {
    if (this.stopped) return;
    const bad = malformedReason(m, this.id);
    if (bad !== null) {
      this.errorListeners.emit(new Error(`raft: dropped a malformed ${m.type} from ${m.from}: ${bad}`));
      return;
    }
    if (this.heardAt.has(m.from) || this.heardAt.size < MAX_HEARD_PEERS) this.heardAt.set(m.from, performance.now());
    const stepped = m.type === 'snapshot' && m.context !== undefined ? withReceivedAddresses(m) : m;
    this.guard(() => this.core.step(stepped));
    this.wakeWriter();
    this.schedule();
  }

  /** Runs `fn`; anything it throws stops the node (fatal). */
  private guard(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.fail(err as Error);
    }
  }

  private schedule(): void {
    if (this.loopRunning || this.loopScheduled || this.stopped) return;
    this.loopScheduled = true;
    setImmediate(() => {
      this.loopScheduled = false;
      if (this.loopRunning || this.stopped) return;
      this.loopIdle = this.runLoop();
    });
  }

  /**
   * Starts the loop at once when it is idle (else it picks the work up itself). Only for callers that run in a
   * turn of their own, with no core call on the stack: the loop's first Ready is taken synchronously.
   */
  private runNow(): void {
    if (this.loopRunning || this.stopped) return;
    this.loopIdle = this.runLoop();
  }

  private async runLoop(): Promise<void> {
    this.loopRunning = true;
    try {
      while (!this.stopped && this.core.hasReady()) {
        const rd = this.core.ready();
        await this.handleReady(rd);
        if (this.stopped) return;
        this.core.advance(rd);
        this.afterAdvance();
        this.maybeSnapshot();
      }
    } catch (err) {
      this.fail(err as Error);
    } finally {
      this.loopRunning = false;
    }
    if (!this.stopped && this.core.hasReady()) this.schedule();
  }

  private async handleReady(rd: Ready): Promise<void> {
    // the commit index the Ready's messages carry (whileWriting tells the followers of a newer one)
    const toldCommit = this.core.committedIndex();
    if (rd.softState !== null) this.onSoftState(rd.softState.role, rd.softState.leader);

    // 1. Persist (one synced batch); a leader's replication traffic leaves first, overlapping the fsyncs.
    const { beforePersist, afterPersist } = splitMessages(rd, this.durableTerm);
    this.send(beforePersist);
    // Chunks of a snapshot being received go to the log's chunk records before anything acknowledges them; the
    // snapshot they complete is recorded by the persist below.
    if (rd.snapshotChunks.length > 0) {
      await this.log.receiveSnapshot(rd.snapshotChunks);
      if (this.stopped) return;
    }
    let committed = rd.committed;
    if (rd.snapshot !== null || rd.entries.length > 0 || rd.hardState !== null) {
      // A leader overlaps its write with the acknowledgements and applies below; a follower's acknowledgement
      // waits for the write, so its log may write it on this thread (inline): no worker hand-off, no wake-up.
      const write = this.log.persist({
        snapshot: rd.snapshot,
        entries: rd.entries,
        hardState: rd.hardState,
        inline: this.role !== 'leader',
      });
      write.catch(() => {}); // awaited below: a failure while the apply runs is not an unhandled rejection
      // While it runs, apply the committed entries this log holds durably already (etcd applies while its WAL
      // write runs): a write committed by the acknowledgements of the previous Ready is answered now, not one
      // fsync later. Entries of this very Ready (a follower's, committed as they arrive), a snapshot and
      // membership changes (recorded in the log, which is busy) wait for the write, as below.
      const early = durableCommitted(rd);
      try {
        if (early > 0) {
          await this.applyCommitted(committed.slice(0, early));
          committed = committed.slice(early);
        }
        if (committed.length === 0) await this.whileWriting(write, toldCommit);
      } catch (err) {
        await write.catch(() => {}); // settled before the node stops and closes the log; the apply's failure is reported
        throw err;
      }
      await write;
      if (this.stopped) return;
      if (rd.hardState !== null) {
        if (rd.hardState.term < this.durableTerm) {
          throw new Error(`raft: persisted term ${rd.hardState.term} below the durable term ${this.durableTerm}`);
        }
        this.durableTerm = rd.hardState.term;
      }
    }

    // 2. Send the rest, only now that everything they depend on is durable.
    this.send(afterPersist);

    // 3. Apply.
    if (rd.snapshot !== null && rd.snapshot.meta.index > this.applied) {
      // This node's own snapshot may still be being written meanwhile: it encodes the state it captured (not this
      // one), and the log refuses it once this newer one is recorded (SnapshotSupersededError: skipped).
      await restoreSnapshot(this.sm, rd.snapshot.meta, this.log.snapshotChunks());
      this.applied = rd.snapshot.meta.index;
      this.lastSnapshotIndex = this.applied;
      this.snapshotAt = -1;
      this.proposals.skippedThrough(this.applied);
      this.syncPeers();
      if (this.stopped) return;
    }
    await this.applyCommitted(committed);
    for (const rs of rd.readStates) this.reads.answered(rs.context, rs.index);
  }

  /**
   * Until `write` (the outstanding Ready's) settles, every message stepped meanwhile may have moved the commit index
   * (acknowledgements arriving while the leader writes its next batch): the entries it committed that this log holds
   * durably are applied at once (their proposals answered), and when the commit moved, the replication messages
   * queued since the Ready (core/early-send.ts rules) leave at once to tell the followers, instead of one fsync
   * later; so do those queued by a tick (a leader's heartbeats: a slow write does not silence it). Proposals alone
   * wait for the next Ready, where they travel together. Bounded by MAX_WRITE_ROUNDS steps and ticks.
   */
  private async whileWriting(write: Promise<void>, toldCommit: number): Promise<void> {
    let done = false;
    // the write's end wakes the loop below as a stepped message does (one promise per round, no race)
    const end = () => {
      done = true;
      this.wake?.();
    };
    const settled = write.then(end, end);
    let told = toldCommit;
    this.ticked = false;
    for (let round = 0; round < MAX_WRITE_ROUNDS && !done && !this.stopped; round++) {
      const commit = this.core.committedIndex();
      const send = commit > told || this.ticked;
      this.ticked = false;
      const { messages, committed } = this.core.takeEarly(this.durableTerm, send);
      if (messages.length > 0) {
        told = commit;
        this.send(messages);
      }
      if (committed.length > 0) {
        await this.applyCommitted(committed);
        this.core.appliedTo(committed[committed.length - 1]!.index);
        continue; // messages may have been stepped meanwhile
      }
      if (done) break;
      await new Promise<void>((r) => (this.wake = r));
      this.wake = null;
    }
    await settled;
  }

  /**
   * Applies committed entries in order (membership changes recorded in the log first), skipping any at or below
   * the applied index, and settles the proposals they carry.
   */
  private async applyCommitted(entries: Entry[]): Promise<void> {
    let committed = entries;
    if (committed.length > 0 && committed[0]!.index <= this.applied) {
      committed = committed.filter((e) => e.index > this.applied);
    }
    if (committed.length === 0 || this.stopped) return;
    const first = committed[0]!.index;
    if (first !== this.applied + 1) {
      throw new Error(`raft: committed entries start at ${first}, applied index is ${this.applied}`);
    }
    for (const e of committed) if (e.type === 'conf') await this.applyConf(e);
    await this.sm.apply(committed);
    const last = committed[committed.length - 1]!.index;
    this.applied = last;
    if (this.holding && last >= this.core.basicStatus().lastIndex) this.releaseHeld();
    this.proposals.applied(first, last, (i) => committed[i - first]?.term);
    this.applyListeners.emit(committed);
  }

  private send(messages: Message[]): void {
    if (messages.length === 0) return;
    let chunks = 0;
    for (const m of messages) {
      if (m.to === this.id || m.from !== this.id) throw new Error(`raft: core emitted ${m.type} ${m.from}→${m.to}`);
      if (m.type === 'snapshot') chunks++;
    }
    if (chunks === 0) {
      this.transport.send(messages);
      return;
    }
    // Snapshot chunks leave without their bytes: the sender reads them from the log as it sends them.
    for (const m of messages) if (m.type === 'snapshot') this.snapshotSender.enqueue(m);
    const others = messages.filter((m) => m.type !== 'snapshot');
    if (others.length > 0) this.transport.send(others);
  }

  private afterAdvance(): void {
    this.reads.applied(this.applied);
    this.reads.pump();
    this.checkCatchUp();
  }

  /** Asks the core for a read index; false when it cannot be asked yet (no leader, queue full). */
  private requestReadIndex(ctx: Uint8Array): boolean {
    try {
      this.core.readIndex(ctx);
      return true;
    } catch (err) {
      if (err instanceof ProposalDroppedError) return false;
      throw err;
    }
  }

  private checkCatchUp(now_ms = Date.now()): void {
    if (this.catchUp.size === 0) return;
    const s = this.core.status();
    const view: LeaderView =
      s.role === 'leader' && s.progress !== undefined
        ? {
            leading: true,
            lastIndex: s.lastIndex,
            progress: (id) => {
              const pr = s.progress?.[id];
              return pr === undefined ? null : { match: pr.match, state: pr.state };
            },
          }
        : { leading: false, leader: s.leader };
    this.catchUp.check(now_ms, view);
  }

  private onSoftState(role: Role, leader: NodeId | null): void {
    const wasLeader = this.role === 'leader';
    const leaderChanged = leader !== this.leader;
    this.role = role;
    this.leader = leader;
    if (role !== 'leader') this.releaseHeld();
    if (wasLeader && role !== 'leader') {
      const commit = this.core.status({ progress: false }).commit;
      this.proposals.rejectAbove(
        commit,
        new RaftError(
          'leadership-lost',
          `${this.id} lost leadership; the entry may still be committed by the new leader`,
        ),
      );
    }
    if (leaderChanged) {
      this.reads.requeueUnanswered();
      this.leaderChange.emit(leader, this.core.status({ progress: false }).term);
      for (const w of [...this.leaderWaiters]) if (w.to === leader) w.resolve();
    }
  }

  /** Applies a committed membership change in the core and records it durably before the application sees it. */
  private async applyConf(e: Entry): Promise<void> {
    const recorded = this.log.appliedConf();
    if (e.index <= recorded.index) return; // Recorded before a restart: the core started with it.
    const cc = decodeConfChange(e.data);
    const conf = this.core.applyConfChange(cc);
    const addresses = { ...recorded.addresses };
    const announced = decodeAddresses(cc.context);
    for (const ch of cc.changes) {
      if (ch.type === 'removeNode') delete addresses[ch.node];
      else if (announced[ch.node] !== undefined) addresses[ch.node] = announced[ch.node]!;
    }
    await this.log.setConf({ index: e.index, conf, addresses });
    this.snapshotAt = -1; // a staggered snapshot's phase follows the voters
    const members = confMembers(conf);
    for (const ch of cc.changes) {
      if (ch.node === this.id) continue;
      if (ch.type === 'removeNode' && !members.has(ch.node)) this.transport.removePeer(ch.node);
      else if (addresses[ch.node] !== undefined) this.transport.addPeer(ch.node, addresses[ch.node]!);
    }
    if (confMembers(recorded.conf).has(this.id) && !members.has(this.id)) this.removedListeners.emit(e.index);
  }

  private addPeersOf(addresses: Record<string, string>): void {
    for (const [id, address] of Object.entries(addresses)) if (id !== this.id) this.transport.addPeer(id, address);
  }

  /**
   * After a snapshot is installed: the transport's peers become exactly the applied configuration's members, at
   * the addresses recorded with it. A member the snapshot's configuration no longer holds (removed by entries this
   * node never applied) is dropped, so its connections and messages are refused like any stranger's.
   */
  private syncPeers(): void {
    const applied = this.log.appliedConf();
    const members = confMembers(applied.conf);
    for (const p of this.transport.peers()) if (!members.has(p.id)) this.transport.removePeer(p.id);
    this.addPeersOf(applied.addresses);
  }

  /**
   * A snapshot chunk leaves with the addresses of its configuration's members, as this node knows them, in the
   * message's context (encoded as a membership change's; a receiver of an earlier version ignores it): the entries
   * that announced them may be compacted away, and the receiver needs them to reach its peers, also after a restart.
   * The receiver reads them into SnapshotMeta.addresses (withReceivedAddresses).
   */
  private withAddresses(m: Message): Message {
    const c = m.snapshot;
    if (c === undefined) return m;
    return { ...m, context: encodeAddresses(snapshotAddresses(c.meta, this.log.appliedConf().addresses)) };
  }

  /**
   * Every `snapshotEvery_entries` applied entries, takes a snapshot in the background: the state machine captures
   * its state at once (StateMachine.snapshot's contract) and hands it over chunk by chunk, each written to the log's
   * chunk records as it comes (no whole-snapshot buffer), while this loop goes on persisting, sending and applying —
   * the capture keeps the snapshot consistent at its index however far application moves on meanwhile. The log is
   * compacted behind it once it is recorded. One at a time. A snapshot overtaken meanwhile (a newer one received
   * from the leader, a membership change applied past it) is skipped.
   */
  private maybeSnapshot(): void {
    if (this.core.takeSnapshotRequest()) this.snapshotWanted = true;
    if (this.snapshotting !== null || this.stopped) return;
    // Only a deferred snapshot makes the core ask; once one with bytes is recorded, the request is answered.
    if (this.snapshotWanted && this.log.snapshot()?.deferred !== true) this.snapshotWanted = false;
    let take: () => Promise<void>;
    if (this.snapshotWanted) {
      // Costs a pass over the whole state: worth a word in the log.
      this.errorListeners.emit(
        new Error(`raft: a follower needs entries compacted away: taking a snapshot with bytes at ${this.applied}`),
      );
      take = async () => {
        await this.snapshot();
        this.bytesSnapshotTick = this.ticks;
      };
    } else {
      if (!this.snapshotDue()) return;
      if (this.opts.snapshotDeferred === true) {
        // Not while a snapshot streams to a live follower (a deferred one recorded now would replace it mid-stream),
        // nor for two election timeouts after a snapshot with bytes was taken for one (its stream starts with the
        // follower's next answer, within a heartbeat): postponed, not skipped. A follower gone silent holds
        // neither for longer than that.
        const fresh = this.ticks - this.bytesSnapshotTick < 2 * this.electionTicks;
        if (fresh || this.core.snapshotStreamActive()) return;
        take = () => this.checkpointSnapshot();
      } else {
        take = () => this.snapshot();
      }
    }
    this.lastSnapshotIndex = this.applied;
    this.snapshotAt = -1;
    this.snapshotting = take().then(
      () => {
        this.snapshotting = null;
      },
      (err: unknown) => {
        this.snapshotting = null;
        if (!this.stopped) this.fail(err as Error);
      },
    );
  }

  /** Whether a snapshot is due (see snapshotEvery_entries and snapshotStagger). */
  private snapshotDue(): boolean {
    const every = this.snapshotEvery;
    if (every <= 0) return false;
    if (this.snapshotAt < 0) {
      this.snapshotAt = planSnapshotAt({
        every,
        last: this.lastSnapshotIndex,
        applied: this.applied,
        stagger: this.opts.snapshotStagger === true,
        self: this.id,
        voters: this.opts.snapshotStagger === true ? this.core.status({ progress: false }).conf.voters : [],
      });
    }
    return this.applied >= this.snapshotAt;
  }

  /** A snapshot with bytes: the state machine's state, captured now and written to the log as it streams it. */
  private async snapshot(): Promise<void> {
    const { index, data } = await takeSnapshot(this.sm);
    if (this.stopped) return;
    await this.recordSnapshot(index, data);
  }

  /**
   * A deferred snapshot (snapshotDeferred): the state machine made durable, its index recorded. The machine may
   * report an index past this node's applied one (entries of a Ready still being applied): what is recorded is the
   * lower of the two, durable either way.
   */
  private async checkpointSnapshot(): Promise<void> {
    const durable = await this.sm.checkpoint!();
    if (this.stopped) return;
    if (!(Number.isSafeInteger(durable) && durable >= 0))
      throw new Error(`raft: state machine checkpoint at ${durable}`);
    await this.recordSnapshot(Math.min(durable, this.applied), null);
  }

  /** Records a snapshot at `index` (bytes, or deferred when null) unless one overtook it, then compacts the log. */
  private async recordSnapshot(index: number, data: Uint8Array | AsyncIterable<Uint8Array> | null): Promise<void> {
    if (!(Number.isSafeInteger(index) && index >= 0 && index <= this.applied))
      throw new Error(`raft: state machine snapshot at ${index} beyond applied ${this.applied}`);
    const recorded = this.log.appliedConf();
    const current = this.log.snapshot();
    if (index < recorded.index || !supersedes(index, data !== null, current)) {
      this.errorListeners.emit(
        new Error(
          `raft: skipped snapshot at ${index} (conf at ${recorded.index}, last snapshot ${current?.meta.index ?? 0})`,
        ),
      );
      return;
    }
    try {
      await this.log.createSnapshot(index, recorded.conf, data);
    } catch (err) {
      if (!(err instanceof SnapshotSupersededError)) throw err;
      // A newer snapshot was received from the leader meanwhile.
      this.errorListeners.emit(new Error(`raft: skipped snapshot at ${index}: ${err.message}`));
      return;
    }
    const compactTo = index - this.snapshotKeep;
    if (compactTo >= this.log.firstIndex()) await this.log.compact(compactTo);
  }

  private checkProposable(): RaftError | null {
    if (this.stopped) return this.stoppedError();
    if (this.role !== 'leader')
      return new RaftError('not-leader', `${this.id} is not the leader (leader: ${this.leader})`, {
        leader: this.leader,
      });
    if (this.proposals.isFull()) return new RaftError('too-many-pending', `${this.proposals.size} proposals pending`);
    return null;
  }

  /** Refuses (`not-leader`) a proposal fenced on a term other than this node's current one. */
  private checkTerm(term: number | undefined): RaftError | null {
    if (term === undefined) return null;
    const now = this.core.currentTerm();
    if (term === now) return null;
    return new RaftError('not-leader', `proposal for term ${term}, ${this.id} is in term ${now}`, {
      leader: this.core.knownLeader(),
    });
  }

  /** An entry larger than maxMsgBytes could never be sent to a follower: it would stall replication for good. */
  private checkSize(entry_bytes: number, what: string): RaftError | null {
    if (entry_bytes <= this.maxMsgBytes) return null;
    return new RaftError('too-large', `${what} of ${entry_bytes} bytes exceeds maxMsgBytes ${this.maxMsgBytes}`);
  }

  /**
   * Maps the core's refusal of a proposal to a RaftError. ProposalDroppedError is a refusal: `not-leader` (also
   * while handing leadership over, or when this leader was removed), `too-many-pending` (the uncommitted-bytes
   * bound), `conf-change-refused`. Anything else the core throws is a violated invariant: fatal.
   */
  private refused(err: unknown, conf: boolean): RaftError {
    if (!(err instanceof ProposalDroppedError)) {
      this.fail(err as Error);
      return this.stoppedError();
    }
    const s = this.core.status({ progress: false });
    const hint = err.leader === this.id ? null : err.leader;
    if (s.role !== 'leader') return new RaftError('not-leader', err.message, { leader: s.leader });
    if (/uncommitted bytes/.test(err.message)) return new RaftError('too-many-pending', err.message);
    if (conf && !/leadership transfer|removed from the configuration/.test(err.message)) {
      return new RaftError('conf-change-refused', err.message);
    }
    return new RaftError('not-leader', err.message, { leader: hint });
  }

  /**
   * Waits until `to` is seen as leader. The core abandons a transfer after an election timeout (e.g. when the
   * target had not yet applied the change that made it a voter, it ignores timeoutNow), so while this node
   * still leads the request is re-issued once per election timeout until the deadline.
   */
  private waitForLeader(to: NodeId, timeout_ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        clearInterval(retry);
        this.leaderWaiters.delete(w);
      };
      const w = {
        to,
        resolve: () => {
          done();
          resolve();
        },
        reject: (err: Error) => {
          done();
          reject(err);
        },
      };
      const timer = setTimeout(() => {
        done();
        reject(new RaftError('timeout', `leadership did not move to ${to} within ${timeout_ms} ms`));
      }, timeout_ms);
      const retry = setInterval(() => {
        if (this.stopped || this.role !== 'leader' || this.leader === to) return;
        try {
          this.core.transferLeadership(to);
          this.schedule();
        } catch {
          // Not a voter (any more): the deadline reports it.
        }
      }, this.electionTicks * this.tick_ms);
      this.leaderWaiters.add(w);
    });
  }

  /**
   * On a leader, the voter other than itself whose log matches the most of its own (the one a leadership transfer
   * completes soonest for); null when there is none, or on a follower (which tracks no progress).
   */
  bestTransferTarget(): NodeId | null {
    return this.role === 'leader' ? this.transferTarget() : null;
  }

  private transferTarget(): NodeId | null {
    const s = this.core.status() as { conf: ConfState; progress?: Record<string, { match?: number }> };
    let best: NodeId | null = null;
    let bestMatch = -1;
    for (const v of s.conf.voters) {
      if (v === this.id) continue;
      const match = s.progress?.[v]?.match ?? 0;
      if (match > bestMatch) {
        best = v;
        bestMatch = match;
      }
    }
    return best;
  }

  private stoppedError(): RaftError {
    return this.failure ?? new RaftError('stopped', `node ${this.id} is stopped`);
  }

  private halt(err: RaftError): void {
    if (this.stopped) return;
    this.stopped = true;
    this.releaseHeld();
    this.snapshotSender.stop();
    if (this.tickTimer !== null) clearInterval(this.tickTimer);
    this.tickTimer = null;
    this.proposals.rejectAll(err);
    this.reads.rejectAll(err);
    this.catchUp.rejectAll(err);
    for (const w of [...this.leaderWaiters]) w.reject(err);
  }

  private fail(err: Error): void {
    if (this.stopped) return;
    this.failure = new RaftError('fatal', `node ${this.id} stopped after a failure: ${err.message}`, { cause: err });
    this.halt(this.failure);
    void this.transport.close();
    this.fatalListeners.emit(err);
  }
}
