/**
 * Test support (never used in production): a Transport wrapper that checks, when a message is sent, that what the
 * message asserts is already durable at its sender — the driver's "persist before send" rule, seen from outside.
 * The simulator checks the same rule for its own driver loop; this one watches RaftNode.
 *
 * `durable` must show only what the sender's log has made durable: MemoryDurableLog and LevelLog update their
 * in-memory view once a write has completed, and term and vote changes are always synced.
 *
 * Rules, per message `m` sent by node S:
 * - any message of term T (except pre-votes, which speak of a term S has not entered): S durably reached T;
 * - `vote` (a request): S durably voted for itself in T (or moved past T);
 * - a granted `voteResp`: S durably voted for the candidate in T (or moved past T);
 * - an `appendResp` acknowledging index i: S durably holds i (in its log or a snapshot), with the term of the
 *   entry the leader sent at i when S received it in an append of that term;
 * - an `append` carrying entries: unless `leaderAppendsBeforePersist`, S durably holds the last one. With it (a
 *   core that counts the leader's own match only once durable), a leader may send entries it is still writing.
 */
import type { HardState, LogView, Message, NodeId } from '../types.js';
import type { MessageHandler, PeerStats, Transport, UnreachableHandler } from './transport.js';

/** Bound on remembered (leader, term, index) → entry term expectations per node. */
const MAX_EXPECTATIONS = 4096;

export interface PersistCheckOptions {
  /** The leader may send its own entries before they are durable (its match counts only once they are). */
  leaderAppendsBeforePersist: boolean;
}

export class PersistCheckingTransport implements Transport {
  readonly id: NodeId;
  readonly maxPayload_bytes: number;
  /** `${leader} ${term} ${index}` → term of the entry at index that leader sent in that term. */
  private readonly expected = new Map<string, number>();

  constructor(
    private readonly inner: Transport,
    private readonly durable: LogView,
    /** Violations found so far (shared between the nodes of a test); the test asserts it stays empty. */
    private readonly violations: string[],
    private readonly opts: PersistCheckOptions,
  ) {
    this.id = inner.id;
    this.maxPayload_bytes = inner.maxPayload_bytes;
  }

  send(msgs: Message[]): void {
    for (const m of msgs) {
      const problem = this.check(m);
      if (problem !== null) this.violations.push(`${m.from}→${m.to} ${m.type} term ${m.term}: ${problem}`);
    }
    this.inner.send(msgs);
  }

  onMessage(handler: MessageHandler): void {
    this.inner.onMessage((m) => {
      if (m.type === 'append' && m.entries.length > 0) this.remember(m);
      handler(m);
    });
  }

  onUnreachable(handler: UnreachableHandler): void {
    this.inner.onUnreachable(handler);
  }

  addPeer(id: NodeId, address: string): void {
    this.inner.addPeer(id, address);
  }

  removePeer(id: NodeId): void {
    this.inner.removePeer(id);
  }

  peers(): PeerStats[] {
    return this.inner.peers();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private remember(m: Message): void {
    for (const e of m.entries) {
      // An entry of a term above its message's is malformed (a leader only sends entries of its term or earlier):
      // the receiver drops it, so it sets no expectation (a forged one would otherwise replace the real entry's).
      if (e.term > m.term) continue;
      if (this.expected.size >= MAX_EXPECTATIONS) this.expected.delete(this.expected.keys().next().value as string);
      this.expected.set(`${m.from} ${m.term} ${e.index}`, e.term);
    }
  }

  /** What `m` asserts that is not durable yet, or null. */
  private check(m: Message): string | null {
    const hs: HardState = this.durable.initialState().hardState;
    if (m.type !== 'preVote' && m.type !== 'preVoteResp' && m.term > hs.term) {
      return `durable term is ${hs.term}`;
    }
    switch (m.type) {
      case 'vote':
        if (hs.term === m.term && hs.vote !== m.from) return `durable vote in term ${hs.term} is ${hs.vote}`;
        return null;
      case 'voteResp':
        if (!m.reject && hs.term === m.term && hs.vote !== m.to) return `durable vote in term ${hs.term} is ${hs.vote}`;
        return null;
      case 'appendResp': {
        if (m.reject) return null;
        const want = this.expected.get(`${m.to} ${m.term} ${m.index}`);
        return this.holds(m.index, want);
      }
      case 'append': {
        const last = m.entries[m.entries.length - 1];
        if (last === undefined || this.opts.leaderAppendsBeforePersist) return null;
        return this.holds(last.index, last.term);
      }
      default:
        return null;
    }
  }

  /** Null when the durable log holds `index` (with `term`, when known), else what it holds. */
  private holds(index: number, term: number | undefined): string | null {
    const snapIndex = this.durable.snapshot()?.meta.index ?? 0;
    if (index <= snapIndex) return null;
    const last = this.durable.lastIndex();
    if (index > last) return `index ${index} is beyond the durable last index ${last}`;
    if (index < this.durable.firstIndex()) return null; // compacted: it was durable
    const t = this.durable.term(index);
    if (term !== undefined && t !== term) return `durable term at ${index} is ${t}, the leader sent ${term}`;
    return null;
  }
}
