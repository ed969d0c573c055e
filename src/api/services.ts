import { OverloadedError } from '../../storage/local-proposer.js';
import { ProposalError, type Proposer } from '../../storage/proposer.js';
import { StoreFailedError } from '../../storage/types.js';
import type { SessionService } from '../auth/sessions.js';
import type { MemberCert, MemberView } from '../cluster/members.js';
import type { DialRefusal } from '../cluster/peer-protocol.js';
import type { EntityName } from '../model/index.js';
import { revokesAccess } from '../model/revokes.js';
import type { Command, RowFor, Store } from '../model/rows.js';
import type { NodePki } from '../pki/node-pki.js';
import { type ApiError, clusterUpgrading, Errors, notFound, storeError, storeFailed } from './errors.js';

/**
 * The HTTP face of a proposal that produced no recorded result: no leader → 503 CLUSTER_NO_LEADER (OpenZiti's
 * code); a full queue, or a forward whose outcome is unknown → 429 with `Retry-After` (the client decides whether
 * to retry: Keel never re-sends a command whose outcome it does not know).
 */
export function proposalError(err: ProposalError): ApiError {
  const headers = { 'retry-after': String(err.retryAfter_s) };
  switch (err.code) {
    case 'no-leader':
    case 'stopped':
      return Errors.CLUSTER_NO_LEADER(undefined, { headers });
    case 'overloaded':
    case 'unknown-outcome':
      return Errors.SERVER_TOO_MANY_REQUESTS(undefined, { headers });
    case 'upgrading':
      return clusterUpgrading(err.message, headers);
  }
}

export interface Clock {
  now(): number;
}

export type Logger = (level: 'info' | 'warn' | 'error' | 'fatal', msg: string, extra?: Record<string, unknown>) => void;

export const systemClock: Clock = { now: () => Date.now() };

/** What the API needs of the cluster a node belongs to. */
export interface ClusterView {
  readonly id: string;
  /** Linearizable read barrier: resolves once this node has applied everything committed when it was called. */
  readBarrier(): Promise<void>;
  /**
   * Waits (bounded) until every other member that answered its last status poll has applied what this node has
   * applied; resolves with the ids of those that did not confirm in time.
   */
  appliedEverywhere(): Promise<string[]>;
  readonly raft: { isLeader(): boolean; term(): number };
  readonly peerCertPem: string | null;
  /** Member `id`'s peer certificate: this node's own, or the one the member showed on this node's link. */
  memberCert(id: string): MemberCert | null;
  memberView(): MemberView[];
  /** Why this node's link to member `id` is refused for its peer protocol version, null when it is not. */
  peerRefusal(id: string): DialRefusal | null;
  addMemberAt(address: string, voter: boolean): Promise<string>;
  removeMember(id: string): Promise<void>;
  transferLeadership(to: string): Promise<void>;
}

export interface ControllerConfig {
  /** An API session expires after this long without a request. */
  sessionTimeout_ms: number;
  /** Addresses clients use to reach this controller's APIs, e.g. `https://ctrl.example.com:1280`. */
  apiBaseUrls: string[];
  /** Random per-process id reported in the `ziti-instance-id` header. */
  instanceId: string;
  /** `HA_CONTROLLER` is reported when running as a Raft cluster. */
  clustered: boolean;
  /** The node's data directory (database snapshots are written under it); absent in hand-built test services. */
  dataDir?: string;
  /** `host:port` routers dial to reach this node's router control listener; absent without one. */
  routerAddress?: string;
}

/**
 * What operation handlers use: reads from the local store, writes through the proposer (and only through it),
 * the clock, the configuration and the session service.
 */
export class Services {
  sessions!: SessionService;
  /** This node's cluster membership, null for a single node. */
  cluster: ClusterView | null = null;
  /** This node's PKI (CAs, the signing CA for enrollment); null only in tests that build Services by hand. */
  pki: NodePki | null = null;
  /** nowIso's last answer and the time it is the text of (NaN: none yet). */
  private iso = '';
  private isoAt_ms = Number.NaN;

  constructor(
    readonly store: Store,
    private readonly proposer: Proposer,
    readonly config: ControllerConfig,
    readonly clock: Clock = systemClock,
    readonly log: Logger = () => {},
  ) {}

  /** The clock's time as ISO text; the text of one millisecond is made once (every write stamps its time). */
  nowIso(): string {
    const now_ms = this.clock.now();
    if (now_ms !== this.isoAt_ms) {
      this.isoAt_ms = now_ms;
      this.iso = new Date(now_ms).toISOString();
    }
    return this.iso;
  }

  get<E extends EntityName>(entity: E, id: string): RowFor<E> | undefined {
    return this.store.get(entity, id);
  }

  /** The row or 404 NOT_FOUND, worded as OpenZiti does. */
  require<E extends EntityName>(entity: E, id: string): RowFor<E> {
    const row = this.store.get(entity, id);
    if (!row) throw notFound(this.store.schema.def(entity).type, id);
    return row;
  }

  /** Proposes a command and waits until it is durable and applied; a recorded failure becomes its HTTP error. */
  async write(cmd: Command): Promise<unknown> {
    let result: Awaited<ReturnType<Proposer['propose']>>;
    try {
      result = await this.proposer.propose(cmd);
    } catch (err) {
      if (err instanceof OverloadedError) throw Errors.SERVER_TOO_MANY_REQUESTS();
      if (err instanceof ProposalError) {
        this.log('warn', 'write refused', { code: err.code, reason: err.message });
        throw proposalError(err);
      }
      // not acknowledged: the write may or may not be on disk, and nothing more will be (the node is stopping)
      if (err instanceof StoreFailedError) throw storeFailed();
      throw err;
    }
    if (!result.ok) {
      // the input boundary should have made every string well-formed and bounded the nesting: say it did not
      if (result.error.code === 'UNSTORABLE')
        this.log('warn', 'command refused: it would not read back as written', {
          entity: result.error.entity,
          field: result.error.field,
          reason: result.error.reason,
        });
      const apiError = storeError(result.error);
      // an invariant or an internal key collision: the details go to the log only
      if (apiError.code === 'UNHANDLED') this.log('error', 'command rejected by the store', { error: result.error });
      throw apiError;
    }
    // a revocation is answered once every member refuses what it revoked, not a replication lag later (members
    // that did not confirm in time are logged once per round by the cluster node)
    if (this.cluster !== null && revokesAccess(cmd)) await this.cluster.appliedEverywhere();
    return result.value;
  }
}
