import { withTimeout } from '../util/timeout.js';
import type { MemberInfo, MemberStatus, PeerClient } from './peer-api.js';
import type { DialRefusal } from './peer-protocol.js';

/**
 * What this node knows about one member, for the controllers list, the JWTs' `ctrls` and the fabric cluster API
 * (which adds the member's peer-link refusal, MemberMonitor.refusal).
 */
export interface MemberView extends MemberInfo {
  leader: boolean;
  /** Answered the last status poll (this node itself: always). */
  online: boolean;
  /** When this node last saw it come online (ISO); null when never seen. */
  lastJoinedAt: string | null;
  /** When this node first listed it among the members (ISO): a stable date for one it never saw online. */
  listedAt: string;
  /** Its last answered status (API addresses, version, applied index), null when never reached. */
  status: MemberStatus | null;
}

/** A member's peer certificate: its PEM and its SHA-1 fingerprint (hex), as the controllers list shows them. */
export interface MemberCert {
  pem: string;
  fingerprint: string;
}

export interface MemberSource {
  readonly id: string;
  members(): { leader: string | null; members: MemberInfo[] };
  status(): MemberStatus;
  peer(id: string): PeerClient;
  /** Each answered status poll of member `id`. */
  observed?(id: string, status: MemberStatus): void;
  /** At each poll, the ids of the members: what the source keeps for any other (a peer client) may go. */
  keepOnly?(members: ReadonlySet<string>): void;
  /** After each poll, once every member's answer (or its absence) is recorded. */
  polled?(): void;
}

/** One member as this node has seen it (MemberView's fields this node keeps between polls). */
type Seen = Pick<MemberView, 'online' | 'lastJoinedAt' | 'listedAt' | 'status'>;

/** Bound on one status poll of a member; a member that does not answer in time counts as offline. */
const POLL_TIMEOUT_MS = 1_000;

/**
 * Polls every member's status over the peer API (every `interval_ms`), so the controllers list reports who is up
 * within seconds of a member going down or coming back.
 */
export class MemberMonitor {
  /** What this node knows of each other member (recordOf), pruned at each poll to the current members. */
  private readonly seen = new Map<string, Seen>();
  private timer: NodeJS.Timeout | null = null;
  private polling = false;
  private readonly startedAt = new Date().toISOString();

  constructor(
    private readonly source: MemberSource,
    private readonly interval_ms = 1_000,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.poll(), this.interval_ms);
    this.timer.unref();
    void this.poll();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Polls every other member once (one poll at a time). */
  async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      const { members } = this.source.members();
      const ids = new Set(members.map((m) => m.id));
      this.source.keepOnly?.(ids);
      for (const id of this.seen.keys()) if (!ids.has(id)) this.seen.delete(id);
      await Promise.all(
        members
          .filter((m) => m.id !== this.source.id)
          .map(async (m) => {
            let status: MemberStatus | null = null;
            try {
              status = await withTimeout(this.source.peer(m.id).api.status.query(), POLL_TIMEOUT_MS, 'status');
            } catch {
              status = null;
            }
            if (status !== null) this.source.observed?.(m.id, status);
            const seen = this.recordOf(m.id);
            const online = status !== null;
            if (online && !seen.online) seen.lastJoinedAt = new Date().toISOString();
            seen.online = online;
            seen.status = status ?? seen.status;
          }),
      );
    } finally {
      this.polling = false;
    }
    this.source.polled?.();
  }

  /**
   * Why this node's link to member `id` is refused for its peer protocol version (peer-protocol.ts), null when it
   * is not (this node itself, a member never dialled). Looks up its peer client: asked by list-members alone.
   */
  refusal(id: string): DialRefusal | null {
    if (id === this.source.id) return null;
    try {
      return this.source.peer(id).refusal();
    } catch {
      return null; // no address known for it: never dialled
    }
  }

  /** Member `id`'s record, made (offline, never seen, listed now) the first time it is listed or polled. */
  private recordOf(id: string): Seen {
    let seen = this.seen.get(id);
    if (seen === undefined) {
      seen = { listedAt: new Date().toISOString(), online: false, lastJoinedAt: null, status: null };
      this.seen.set(id, seen);
    }
    return seen;
  }

  view(): MemberView[] {
    const { leader, members } = this.source.members();
    return members.map((m) => {
      if (m.id === this.source.id) {
        return {
          ...m,
          leader: leader === m.id,
          online: true,
          lastJoinedAt: this.startedAt,
          listedAt: this.startedAt,
          status: this.source.status(),
        };
      }
      const { online, lastJoinedAt, listedAt, status } = this.recordOf(m.id);
      return { ...m, leader: leader === m.id, online, lastJoinedAt, listedAt, status };
    });
  }
}
