import { Deadline, DeadlineQueue } from '../../http/deadlines.js';
import { RaftError, type RaftNode } from '../../raft/index.js';
import { encodeCommand } from '../../storage/command-codec.js';
import { ProposalError, type Proposer } from '../../storage/proposer.js';
import { assert, type Command, type CommandResult } from '../../storage/types.js';
import { encodeLoggedBytes } from './codec.js';
import type { ForwardResult } from './peer-api.js';
import type { StoreStateMachine, Waiter } from './state-machine.js';

export interface RaftProposerOptions {
  /** How long a proposal waits for a leader to appear before 503 `no-leader`. */
  leaderWait_ms: number;
  /**
   * A proposal's whole budget (finding the leader, forwarding, waiting for its entry to be applied here); past it
   * the answer is `unknown-outcome`. Below the HTTP layer's 10 s handler timeout, so the client gets this answer.
   */
  applyTimeout_ms: number;
  /** Bound on submission attempts (a leader that moves, or refuses while it hands leadership over). */
  maxAttempts: number;
}

export const DEFAULT_RAFT_PROPOSER_OPTIONS: RaftProposerOptions = {
  leaderWait_ms: 3_000,
  applyTimeout_ms: 8_000,
  maxAttempts: 200,
};

/**
 * Sends a proposal's bytes to `leader`, addressed to it as the leader of `term` (the forward channel: it proposes
 * them only while it leads in exactly that term); rejects when the outcome is unknown.
 */
export type Forwarder = (leader: string, term: number, data: Uint8Array) => Promise<ForwardResult>;

/** Bound on sending one command again after its earlier copy was shown never to commit. */
const MAX_RESENDS = 3;
/** How often a forward in flight checks whether this node still follows the leader it was sent to. */
const LEADER_CHECK_MS = 25;

/** A proposal's budget is never shorter than this (applyTimeout_ms below it is raised to it). */
const MIN_APPLY_WAIT_MS = 500;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

/** One proposal of this node: settled once, by its entry's result here, a definite refusal, or its budget. */
class Write extends Deadline {
  done = false;
  readonly promise: Promise<CommandResult>;
  resolve!: (r: CommandResult) => void;
  reject!: (err: unknown) => void;

  constructor(
    readonly rid: string,
    readonly waiter: Waiter,
  ) {
    super();
    this.promise = new Promise<CommandResult>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }
}

type Refusal = Exclude<ForwardResult, { ok: true }>;

/** propose()'s own attempt, when it did not simply succeed: to `leader` of `term`, refused, or sent without an answer. */
interface Attempt {
  leader: string;
  term: number;
  /** The refusal (nothing proposed), or null: sent without an answer (the outcome is unknown). */
  answer: Refusal | null;
}

/**
 * What one attempt (send) resolves with, as it arrives: this node's offer (its one slot: null when appended, else
 * Raft's refusal), or a forward's answer (null: none came, the outcome is unknown). answerOf reads it where it is
 * used rather than in a promise of its own: this is the path of every write.
 */
type Sent = Array<RaftError | null> | ForwardResult | null;

interface InFlightForward {
  leader: string;
  term: number;
  resolve: (answer: ForwardResult | null) => void;
}

/**
 * The cluster's proposer. A command is encoded (msgpackr) with a request id, proposed to Raft — directly on the
 * leader, forwarded over the peer API from a follower — and the proposal resolves with the result recorded when
 * the entry is applied *on this node*, so the caller reads its own write here.
 *
 * A forward is sent once. When the leader refuses it (nothing proposed: not the leader any more, queue full) the
 * refusal is definite and the command is sent again to the new leader or rejected; when the outcome is unknown (the
 * connection dropped, the leader stepped down after accepting it) the proposal only waits for the entry to show up
 * here, and answers `unknown-outcome` after `applyTimeout_ms`: never a second copy of the command.
 */
export class RaftProposer implements Proposer {
  readonly syncWrites = true;
  private seq = 0;
  private closed = false;
  private readonly boot = Date.now().toString(36);
  /** Every proposal's budget (applyTimeout_ms): past it, `unknown-outcome`. */
  private readonly budgets: DeadlineQueue<Write>;
  /** Forwards sent and not answered yet (watchForwards). */
  private readonly inFlight = new Set<InFlightForward>();
  private forwardWatch: NodeJS.Timeout | null = null;

  constructor(
    private readonly node: RaftNode,
    private readonly sm: StoreStateMachine,
    private readonly forward: Forwarder,
    private readonly log: (msg: string, extra: Record<string, unknown>) => void = () => {},
    private readonly opts: RaftProposerOptions = DEFAULT_RAFT_PROPOSER_OPTIONS,
    /** A refusal of `cmd` before anything is proposed (a command the cluster's state-machine version lacks), or null. */
    private readonly gate: (cmd: Command) => ProposalError | null = () => null,
  ) {
    this.budgets = new DeadlineQueue<Write>(Math.max(MIN_APPLY_WAIT_MS, opts.applyTimeout_ms), (w) => {
      this.log('write not applied in time: outcome unknown', { rid: w.rid });
      this.settle(
        w,
        undefined,
        new ProposalError('unknown-outcome', 'the write was not applied in time; its outcome is unknown'),
      );
    });
  }

  propose(cmd: Command): Promise<CommandResult> {
    if (this.closed) return Promise.reject(new ProposalError('stopped', 'this node is stopping'));
    const refused = this.gate(cmd);
    if (refused !== null) return Promise.reject(refused);
    // the round trip every command takes (storage/command-codec.ts): one that would not read back as written fails
    // alone here, before it reaches the log
    const encoded = encodeCommand(cmd);
    if (!encoded.ok) return Promise.resolve(encoded.result);
    const rid = `${this.node.id}:${this.boot}:${++this.seq}`;
    const data = encodeLoggedBytes(rid, encoded.bytes);
    const waiter = this.sm.wait(rid);
    if (waiter === null) return Promise.reject(new ProposalError('overloaded', 'too many writes waiting on this node'));
    const w = new Write(rid, waiter);
    this.budgets.add(w);
    waiter.promise.then((r) => this.settle(w, r, undefined));
    // The common cases — this node leads, or follows a known leader — take their first attempt at once, without the
    // retry machinery (drive): once accepted, nothing more to do than wait for the entry (the waiter) or the budget
    // (the deadline). Anything else goes to drive, this attempt counted as the first.
    const leader = this.node.leaderId();
    const term = this.node.term();
    if (leader === null) {
      void this.drive(w, data, null);
    } else {
      this.send(leader, term, data).then((sent) => {
        let answer: ForwardResult | null;
        try {
          answer = answerOf(sent);
        } catch (err) {
          // an invariant failure (a refusal offer never gives): the write fails with it, as in drive
          this.settle(w, undefined, err);
          return;
        }
        if (answer === null || !answer.ok) void this.drive(w, data, { leader, term, answer });
      });
    }
    return w.promise;
  }

  /** Settles `w` once (a result, or an error): its waiter and its deadline go. */
  private settle(w: Write, result: CommandResult | undefined, err: unknown): void {
    if (w.done) return;
    w.done = true;
    this.budgets.cancel(w);
    w.waiter.cancel();
    if (result !== undefined) w.resolve(result);
    else w.reject(err);
  }

  /**
   * Everything but the leader's accepted offer: finding the leader, forwarding, and — when a forward's outcome is
   * unknown — waiting for the entry, sending it again only once a later leader shows it was never committed.
   * `first`: the attempt propose() already made (refused, or sent without an answer), counted as the first.
   */
  private async drive(w: Write, data: Uint8Array, first: Attempt | null): Promise<void> {
    try {
      for (let round = 0; round < MAX_RESENDS && !w.done; round++) {
        const { leader, term, unknown } = await this.submit(data, w, round === 0 ? first : null);
        if (!unknown || w.done) return;
        // Sent to the leader of `term`, no answer. Wait for the entry; if instead a leader of a later term confirms
        // a read index and the entry has not been applied here by then, it was never committed and never will be,
        // so sending it again is safe:
        // - the forward was fenced on `term`: the leader it went to appends it only while it leads in exactly that
        //   term (RaftNode.propose checks it as the core takes the proposal), never in a later term, however long
        //   the frame was delayed (a socket buffer across two elections, the same node leading again);
        // - an entry of `term` that the later term's leader did not hold when it won can never commit: it committed
        //   an entry of its own term (the read index) on a majority, which no leader of `term` can reach any more,
        //   and no log holding the stale entry can win an election again without first dropping it;
        // - what that leader held when it won lies at or below the read index, which this node has applied.
        if (!(await this.notCommitted(term, w))) return;
        this.log('a forward without an answer was not committed: sending it again', { rid: w.rid, leader });
      }
    } catch (err) {
      this.settle(w, undefined, err);
    }
  }

  /**
   * True once a leader of a term after `term` has confirmed a read index and this node has applied up to it
   * without applying the entry; false as soon as `w` is settled (its entry applied, its budget spent, the node
   * stopping) without that.
   */
  private async notCommitted(term: number, w: Write): Promise<boolean> {
    while (!w.done && !this.closed) {
      if (this.node.leaderId() !== null && this.node.term() > term) {
        try {
          await this.node.readIndex();
          return !w.done; // settled: applied (the waiter has the result), or its budget is spent
        } catch {
          // no confirmation yet: look again
        }
      }
      await sleep(LEADER_CHECK_MS);
    }
    return false;
  }

  /**
   * Hands the entry to the leader. Resolves once the leader accepted it (or its outcome became unknown: then
   * only waiting tells), with that leader and the term in which this node saw it lead (read together from the
   * core, so never a new term with the old leader); rejects with a definite ProposalError when nothing was proposed.
   * `first`: an attempt already made (propose's), handled as the first one's answer.
   */
  private async submit(
    data: Uint8Array,
    w: Write,
    first: Attempt | null,
  ): Promise<{ leader: string; term: number; unknown: boolean }> {
    const deadline = Date.now() + this.opts.leaderWait_ms;
    let attempt = 0;
    if (first !== null) {
      attempt++;
      if (first.answer === null) return { leader: first.leader, term: first.term, unknown: true };
      this.refuse(first.answer, first.leader);
      await sleep(LEADER_CHECK_MS);
    }
    while (attempt < this.opts.maxAttempts) {
      if (this.closed) throw new ProposalError('stopped', 'this node is stopping');
      if (w.done) return { leader: '', term: 0, unknown: false };
      // read together, in one synchronous step: the leader of exactly this term (RaftNode.leaderId/term)
      const leader = this.node.leaderId();
      const term = this.node.term();
      if (leader === null) {
        if (Date.now() >= deadline) throw new ProposalError('no-leader', 'the cluster has no leader', 2);
        await sleep(LEADER_CHECK_MS);
        continue;
      }
      attempt++;
      const r = answerOf(await this.send(leader, term, data));
      // sent, but no answer: the leader may have proposed it in `term` (see drive)
      if (r === null) return { leader, term, unknown: true };
      if (r.ok) return { leader, term, unknown: false };
      this.refuse(r, leader);
      if (Date.now() >= deadline) throw new ProposalError('no-leader', 'the cluster has no leader', 2);
      await sleep(LEADER_CHECK_MS);
    }
    throw new ProposalError('no-leader', 'the leader kept changing', 2);
  }

  /**
   * One attempt: `data` offered to Raft when this node is `leader` (of `term`), forwarded to `leader` otherwise.
   * Read its answer with answerOf.
   */
  private send(leader: string, term: number, data: Uint8Array): Promise<Sent> {
    return leader === this.node.id ? this.node.offer([data], term) : this.forwardWhileLeader(leader, term, data);
  }

  /**
   * The forward: its answer, or null when it got none — it failed after being sent, or was given up as soon as this
   * node follows another leader (a dead leader's socket may not report its death before the forward's own timeout,
   * while the election already moved on). One timer checks every forward in flight (watchForwards), not one per
   * forward.
   */
  private forwardWhileLeader(leader: string, term: number, data: Uint8Array): Promise<ForwardResult | null> {
    return new Promise<ForwardResult | null>((resolve) => {
      const f: InFlightForward = { leader, term, resolve };
      this.inFlight.add(f);
      if (this.inFlight.size === 1) this.watchForwards();
      let answer: Promise<ForwardResult>;
      try {
        answer = this.forward(leader, term, data);
      } catch (err) {
        answer = Promise.reject(err); // a forwarder that throws: as a forward that failed (this promise never rejects)
      }
      answer.then(
        (r) => {
          this.inFlight.delete(f);
          resolve(r);
        },
        (err: unknown) => this.unanswered(f, err),
      );
    });
  }

  /** Gives up forward `f` without an answer: the leader may have proposed it (see drive). */
  private unanswered(f: InFlightForward, err: unknown): void {
    this.inFlight.delete(f);
    this.log('forward without an answer: waiting for the entry', { leader: f.leader, term: f.term, err: String(err) });
    f.resolve(null);
  }

  /** While forwards are in flight, every LEADER_CHECK_MS: gives up those sent to a leader this node no longer follows. */
  private watchForwards(): void {
    if (this.forwardWatch !== null) return;
    const check = () => {
      this.forwardWatch = null;
      const now = this.node.leaderId();
      if (now !== null) {
        for (const f of this.inFlight) {
          if (f.leader !== now) this.unanswered(f, new Error(`leadership moved from ${f.leader} to ${now}`));
        }
      }
      if (this.inFlight.size > 0) this.forwardWatch = setTimeout(check, LEADER_CHECK_MS).unref();
    };
    this.forwardWatch = setTimeout(check, LEADER_CHECK_MS).unref();
  }

  /** Throws the definite errors of a refusal; returns when it only says "not the leader" (try the next one). */
  private refuse(r: Refusal, leader: string): void {
    if (r.code === 'overloaded') throw new ProposalError('overloaded', 'the leader has too many writes pending');
    if (r.code === 'too-large') throw new ProposalError('overloaded', 'the command is too large to replicate');
    if (r.code === 'stopped' && leader === this.node.id) throw new ProposalError('stopped', 'this node stopped');
    // not-leader (or a leader that is stopping, or one leading in another term than the forward's): nothing was
    // proposed, so trying the next leader is safe.
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

/**
 * Proposes each of `items` on this node as leader of `term`, in order; resolves, one result per item, as soon as the
 * leader accepted or refused each (not when applied). A refusal (`not-leader`, `too-many-pending`, `too-large`,
 * `stopped`) is definite: nothing was proposed. This node leading in any other term than `term` (a forward
 * addressed to it in an earlier term, delayed) is a `not-leader` refusal: the term is checked as Raft takes each
 * proposal (RaftNode.offer). Later failures (leadership lost, overwritten) leave the outcome to the waiting
 * proposer.
 */
export async function proposeOnLeader(node: RaftNode, items: Uint8Array[], term: number): Promise<ForwardResult[]> {
  const refusals = await node.offer(items, term);
  return refusals.map(resultOf);
}

const ACCEPTED: ForwardResult = Object.freeze({ ok: true });

/** An attempt's answer (Sent): accepted, a refusal (nothing proposed), or null (sent without an answer). */
function answerOf(sent: Sent): ForwardResult | null {
  if (!Array.isArray(sent)) return sent;
  return resultOf(sent[0]!);
}

/** What an offer's answer for one item means: null accepted, else its refusal. */
function resultOf(err: RaftError | null): ForwardResult {
  return err === null ? ACCEPTED : refusal(err);
}

function refusal(err: unknown): ForwardResult {
  if (err instanceof RaftError) {
    switch (err.code) {
      case 'not-leader':
        return { ok: false, code: 'not-leader', leader: err.leader ?? null };
      case 'too-many-pending':
        return { ok: false, code: 'overloaded' };
      case 'too-large':
        return { ok: false, code: 'too-large' };
      case 'stopped':
      case 'fatal':
        return { ok: false, code: 'stopped' };
      default:
        // offer refuses with the codes above only; any other would leave the outcome unknown, never "accepted"
        assert(false, `RaftNode.offer refused with ${err.code}`);
    }
  }
  throw err;
}
