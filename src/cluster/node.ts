import { X509Certificate } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { DetailedPeerCertificate, TLSSocket } from 'node:tls';
import { applyWSSHandler } from '@trpc/server/adapters/ws';
import { WebSocketServer } from 'ws';
import {
  answerWithLinkHeaders,
  type ConfState,
  confMembers,
  forceNewCluster,
  LevelLog,
  type NodeId,
  RaftError,
  RaftNode,
  rejectUpgrade,
  WebSocketTransport,
} from '../../raft/index.js';
import { ProposalError } from '../../storage/proposer.js';
import type { Store } from '../../storage/store.js';
import type { Command } from '../../storage/types.js';
import { clusterStateMachineVersion, releaseTooOld } from '../model/cluster-state.js';
import { NODE_ID_PATTERN } from '../pki/cluster.js';
import { fingerprintOfDer } from '../pki/fingerprint.js';
import { pemBlocks } from '../pki/pem.js';
import { closeMutualTlsServer, createMutualTlsServer, listenOn, PEER_LISTENER_LIMITS } from '../util/mtls-server.js';
import { withTimeout } from '../util/timeout.js';
import { KEEL_VERSION, STATE_MACHINE_VERSION } from '../version.js';
import { AppliedEverywhere } from './applied-everywhere.js';
import { ForwardBatcher } from './forward-batch.js';
import { FORWARD_PATH, MAX_FORWARD_FRAME_BYTES, serveForwards } from './forward-channel.js';
import { askToJoin } from './join.js';
import { type MemberCert, MemberMonitor, type MemberView } from './members.js';
import {
  type ForwardResult,
  type MemberInfo,
  type MemberStatus,
  MembershipRefusal,
  orRefusal,
  PEER_API_PATH,
  type PeerClient,
  type PeerHandlers,
  PeerRemovedError,
  type PeerTlsOptions,
  peerClient,
  peerRouter,
  raftCodeOf,
  removedAtOf,
  statusOf,
} from './peer-api.js';
import {
  type DialRefusal,
  PEER_LINK,
  PEER_PROTOCOL_VERSION,
  type PeerDial,
  RefusalLog,
  raftLinkOptions,
  refuseUpgrade,
} from './peer-protocol.js';
import { DEFAULT_RAFT_PROPOSER_OPTIONS, proposeOnLeader, RaftProposer } from './raft-proposer.js';
import { untilReady } from './ready.js';
import {
  type ConfAnswer,
  judgeOwnRemoval,
  leftOutBy,
  RemovedFromClusterError,
  readRemoval,
  recordRemoval,
  removalQuorumRisk,
} from './removal.js';
import { StoreStateMachine } from './state-machine.js';
import { INTRODUCED_IN, stateMachineVersionOf, versionNeeded } from './state-machine-version.js';

export interface ClusterOptions {
  nodeId: string;
  /** Where the peer listener (Raft transport + peer API) binds. */
  peerListen: { host: string; port: number };
  /** host:port other members dial (default: the bound peer listener). */
  peerAdvertise?: string;
  /** Start a new cluster with this node as its only voter (first start only). */
  init?: boolean;
  /** Join the cluster that the member at this peer address belongs to (first start only). */
  join?: string;
  /**
   * Mutual TLS for the peer listener and every peer connection (certificates from the cluster CA). Required: a
   * member speaks to its peers over nothing else, so a process without such a certificate cannot join or send
   * Raft messages.
   */
  tls: PeerTlsOptions;
  clusterId?: string;
  /** Take a store snapshot and compact the Raft log every N applied entries (default DEFAULT_SNAPSHOT_EVERY). */
  snapshotEvery_entries?: number;
  /** Length of one Raft tick (default DEFAULT_TICK_MS); the election timeout is 10 ticks, randomized up to 2×. */
  tick_ms?: number;
  /** How long a starting member waits for a leader before its start fails (default 30 s). */
  readyTimeout_ms?: number;
  /**
   * Quorum lost for good: start as the only voter, with this member's data, the other members removed
   * (raft forceNewCluster; `--force-new-cluster`). Unsafe if they come back.
   */
  forceNewCluster?: boolean;
  /**
   * As leader, hold the writes proposed while earlier ones are uncommitted and append them together once those
   * commit (RaftNodeOptions.holdWhileCommitting). Default true; `--pipeline-proposals` turns it off.
   */
  holdWhileCommitting?: boolean;
  /**
   * Size of the Raft log's write-ahead file (raft/storage/wal.ts), made on first start: new entries are written
   * there, one O_DSYNC write per batch, and folded into the log's LevelDB at checkpoints. Default
   * DEFAULT_RAFT_WAL_BYTES; 0: no such file, every batch is a synced LevelDB write.
   */
  raftWal_bytes?: number;
  /**
   * The state-machine version this member states it applies (default STATE_MACHINE_VERSION). Tests only: with
   * `introducedIn`, a member plays one of another release (docs/cluster.md, "Rolling upgrades").
   */
  stateMachineVersion?: number;
  /** What each command kind needs (default INTRODUCED_IN, src/cluster/state-machine-version.ts). Tests only. */
  introducedIn?: ReadonlyMap<string, number>;
}

/**
 * One Raft tick: a heartbeat every tick, an election timeout of 10–20 ticks (0.5–1 s). A leader killed outright is
 * replaced within about that (kill -9 failover, bench/cluster/failover.ts); a leader alive but busy keeps its
 * followers (heartbeats every 50 ms, check-quorum's lease and pre-vote keep a slow leader from being deposed).
 */
export const DEFAULT_TICK_MS = 50;
/** The Raft log's write-ahead file: 64 MiB holds the entries between two compactions at the default interval. */
export const DEFAULT_RAFT_WAL_BYTES = 64 * 1024 * 1024;
/**
 * Bounds that are times to wait, not multiples of the election timeout (RaftNode derives its defaults from ticks):
 * they stay what they were with 100 ms ticks, so a loaded member catching up still gets its time.
 */
const READ_TIMEOUT_MS = 4_000;
const PROMOTE_TIMEOUT_MS = 10_000;
const TRANSFER_TIMEOUT_MS = 3_000;

/** The peer listener's path of Raft links (the Raft transport's). */
const RAFT_PATH = '/raft';

export type Log = (level: 'info' | 'warn' | 'error', msg: string, extra?: Record<string, unknown>) => void;

/** How long one attempt to join (or a membership call made on the leader for another member) may take. */
const JOIN_TIMEOUT_MS = 30_000;
/**
 * Deferred snapshots cost a store flush and one log batch whatever the state's size, so the log between two is kept
 * short: 40 000 entries, 20 000 kept behind (below), at most 60 000 in memory (about 0.3 KiB each).
 */
export const DEFAULT_SNAPSHOT_EVERY = 40_000;
/**
 * Entries kept below a snapshot for followers that lag (at most half the interval): with deferred snapshots the
 * log is the cheap way to catch one up, a snapshot with bytes the costly one (a pass over the whole state).
 */
export const SNAPSHOT_KEEP_ENTRIES = 20_000;
/** How long a stopping member keeps refusing forwards after handing leadership over, before closing. */
const STOP_GRACE_MS = 500;
/** Bound on waiting (in 10 ms steps) for in-flight peer requests while stopping. */
const STOP_DRAIN_STEPS = 100;
const PEER_CALL_TIMEOUT_MS = 5_000;
/**
 * How long a revocation waits for each other member to confirm it applied it (appliedEverywhere): a member further
 * behind (restarting, restoring a snapshot, cut off) is not waited for longer, and the revocation is logged.
 */
export const CONFIRM_APPLIED_TIMEOUT_MS = 1_000;
/** The same members' not confirming a revocation is logged at most this often. */
const UNCONFIRMED_WARN_EVERY_MS = 10_000;
/** What a write refused during a rolling upgrade is told to wait (`Retry-After`): about a member's restart. */
const VERSION_RETRY_AFTER_S = 5;
/** How long a forward waits for the connection to the leader to open (then it was not sent: refused). */
const FORWARD_CONNECT_TIMEOUT_MS = 1_000;
/** How long a forward waits for the leader's answer (it answers once it accepted the entry, not once applied). */
const FORWARD_TIMEOUT_MS = 3_000;

/**
 * Who is a member of configuration `conf` (members() and memberAddress()): a voter, incoming or outgoing (the first
 * two sets), or a learner, now or once the joint configuration is left (the last two).
 */
function memberSets(
  conf: ConfState,
): readonly [readonly NodeId[], readonly NodeId[], readonly NodeId[], readonly NodeId[]] {
  return [conf.voters, conf.votersOutgoing, conf.learners, conf.learnersNext];
}

/** addMember for an id that is a voter at another address: add-member never moves or demotes a voter. */
export class MemberConflictError extends MembershipRefusal {
  constructor(
    readonly id: string,
    readonly heldAt: string,
    readonly askedAt: string,
  ) {
    super(`member ${id} is a voter at ${heldAt}: remove it before adding it at ${askedAt}`);
    this.name = 'MemberConflictError';
  }
}

/** A node whose release applies an older state-machine version than the cluster's cannot be added. */
export class MemberTooOldError extends MembershipRefusal {
  constructor(
    readonly id: string,
    readonly version: number,
    readonly clusterVersion: number,
  ) {
    super(
      `node ${id} applies state-machine version ${version}, the cluster ${clusterVersion}: run the cluster's release on it`,
    );
    this.name = 'MemberTooOldError';
  }
}

/**
 * A removal of this node it applied is judged by the members' status (judgeRemoval) at most this many times
 * without a verdict, REMOVAL_JUDGE_WAIT_MS apart (each round also waits up to that long for the answers): 15–30 s.
 */
const REMOVAL_JUDGE_ROUNDS = 30;
const REMOVAL_JUDGE_WAIT_MS = 500;
/** Once judged history, the rounds it watches for its addition again (1–2 h), then gives up watching. */
const REMOVAL_WATCH_ROUNDS = 7_200;
/** Members asked for their configuration in one round. */
const MAX_REMOVAL_WITNESSES = 16;

/** How long --force-new-cluster's interlock waits for each other member's status. */
const FORCE_CHECK_TIMEOUT_MS = 2_000;

/** The first other member (of `addresses`) that answers its status and knows a leader; null when none does. */
async function memberWithLeader(
  addresses: Record<string, string>,
  self: string,
  tls: PeerTlsOptions,
): Promise<{ id: string; leader: string } | null> {
  const answers = await Promise.all(
    Object.entries(addresses)
      .filter(([id]) => id !== self)
      .map(async ([id, address]) => {
        // not answering (gone): what the flag is for
        const st = await statusOf(address, tls, FORCE_CHECK_TIMEOUT_MS);
        return st !== null && st.leader !== null ? { id, leader: st.leader } : null;
      }),
  );
  return answers.find((a) => a !== null) ?? null;
}

/** The SHA-256 fingerprint (node:tls' form) of the first certificate in `ca`, or null without one. */
function fingerprintOf(ca: string | Buffer | Array<string | Buffer>): string | null {
  const first = (Array.isArray(ca) ? ca : [ca]).map((c) => pemBlocks(c.toString(), 'CERTIFICATE')[0]).find(Boolean);
  return first === undefined ? null : new X509Certificate(first).fingerprint256;
}

/** Whether `cert` (as TLS verified it, with its issuer) was signed by the CA of SHA-256 fingerprint `ca` itself. */
export function issuedBy(cert: DetailedPeerCertificate, ca: string | null): boolean {
  if (ca === null || !cert?.raw) return false;
  const issuer = cert.issuerCertificate;
  // the root's own entry (a self-signed certificate is its own issuer) is not a leaf it issued
  return issuer !== undefined && issuer !== cert && cert.fingerprint256 !== ca && issuer.fingerprint256 === ca;
}

/**
 * Bound on the answers a peer-API or forward connection may leave unread: a caller that keeps asking and never reads
 * (whatever its certificate) would otherwise grow this member's memory without end. Far above what a member's
 * calls leave queued (answers of a few KiB, forward answers of a few bytes per command).
 */
export const MAX_PEER_UNSENT_BYTES = 16 << 20;

/** Closes a connection of `wss` that has more than `max_bytes` of answers unsent when its next frame arrives. */
export function boundUnsent(wss: WebSocketServer, max_bytes: number): void {
  wss.on('connection', (ws) => {
    ws.on('message', () => {
      if (ws.bufferedAmount > max_bytes) ws.terminate();
    });
  });
}

/**
 * One member of a Keel cluster: the Raft node (LevelDB log in `<dataDir>/raft`), the store as its state machine,
 * the peer listener serving the Raft transport (`/raft`) and the internal peer API (`/peer-api`, tRPC), and the
 * proposer the controller writes through.
 */
export class ClusterNode {
  readonly proposer: RaftProposer;
  private readonly clients = new Map<string, { address: string; client: PeerClient }>();
  private readonly wss: WebSocketServer;
  /** The forward channel's listener (forward-channel.ts). */
  private readonly forwardWss: WebSocketServer;
  private readonly monitor: MemberMonitor;
  private stopped = false;
  /** Set once this node learnt it was removed from the cluster and recorded it (RemovedFromClusterError). */
  private removal: RemovedFromClusterError | null = null;
  /** removedAt was called (the record may still be being written). */
  private learntRemoval = false;
  /** The latest removal of this node it applied and is judging (judgeRemoval); 0: none. */
  private removalToJudge = 0;
  /** The member id each peer upgrade request's certificate vouches for (by request), for the peer API and forwards. */
  private readonly peerOfRequest = new WeakMap<IncomingMessage, string>();
  /** Upgrade requests whose client certificate the cluster's root signed itself (a peer certificate that may join). */
  private readonly rootIssuedRequests = new WeakSet<IncomingMessage>();
  /** SHA-256 fingerprint of the cluster's root certificate (the peer listener's trust anchor). */
  private readonly rootFingerprint: string | null;
  /** Forwarded proposals being handed to Raft right now. */
  private forwarding = 0;
  /** This member's forwards to the leader, coalesced into one peer message per turn of the event loop. */
  private readonly forwards = new ForwardBatcher((leader, term, items) => this.transmitForwards(leader, term, items));
  apiAddresses: string[] = [];
  /** `host:port` of this member's router control listener (set by the controller), null without one. */
  routerAddress: string | null = null;
  /** This member's own certificate as memberCert gives it (parsed on first use). */
  private ownCert: MemberCert | null | undefined = undefined;
  /** The state-machine version this member applies and states in its status (STATE_MACHINE_VERSION). */
  readonly stateMachineVersion: number;
  /** A raise of the cluster's state-machine version proposed by this node and not settled yet. */
  private raisingVersion = false;
  /** The confirmation rounds revocations wait for (appliedEverywhere). */
  private readonly everywhere = new AppliedEverywhere(() => this.confirmApplied());
  /** The members the last unconfirmed-round warning named, and when it was logged. */
  private unconfirmedWarned = { key: '', at_ms: 0 };

  private constructor(
    readonly raft: RaftNode,
    readonly sm: StoreStateMachine,
    private readonly log: LevelLog,
    private readonly server: Server,
    readonly peerAddress: string,
    private readonly opts: ClusterOptions,
    private readonly logger: Log,
    /** Peer links refused for their peer protocol version, as logged (peer-protocol.ts). */
    private readonly refusals: RefusalLog,
    /** The member stopped itself, or learnt it was removed: the process should exit. */
    private readonly onFatal: (err: Error) => void,
    /** Its data directory (REMOVED_FILE goes there). */
    private readonly dataDir: string,
  ) {
    this.rootFingerprint = fingerprintOf(opts.tls.ca);
    this.stateMachineVersion = opts.stateMachineVersion ?? STATE_MACHINE_VERSION;
    const introduced = opts.introducedIn ?? INTRODUCED_IN;
    this.proposer = new RaftProposer(
      raft,
      sm,
      (leader, term, data) => this.forwards.send(leader, term, data),
      (msg, extra) => logger('warn', msg, extra),
      DEFAULT_RAFT_PROPOSER_OPTIONS,
      (cmd) => this.versionRefusal(versionNeeded(cmd, introduced)),
    );
    this.monitor = new MemberMonitor(this);

    this.wss = new WebSocketServer({ noServer: true, maxPayload: 4 << 20 });
    this.forwardWss = new WebSocketServer({
      noServer: true,
      maxPayload: MAX_FORWARD_FRAME_BYTES,
      perMessageDeflate: false,
    });
    answerWithLinkHeaders(this.wss, PEER_LINK);
    answerWithLinkHeaders(this.forwardWss, PEER_LINK);
    boundUnsent(this.wss, MAX_PEER_UNSENT_BYTES);
    boundUnsent(this.forwardWss, MAX_PEER_UNSENT_BYTES);
    const handlers = this.handlers();
    applyWSSHandler({
      wss: this.wss,
      router: peerRouter,
      createContext: ({ req }) => ({
        handlers,
        from: this.peerOfRequest.get(req) ?? null,
        rootIssued: this.rootIssuedRequests.has(req),
      }),
    });
    serveForwards(this.forwardWss, handlers.forward, (err) => logger('info', 'forward channel', { err: err.message }), {
      peerOf: (req) => this.peerOfRequest.get(req) ?? null,
    });
    server.on('upgrade', (req, socket, head) => {
      const path = (req.url ?? '').split('?')[0];
      if (path === RAFT_PATH) return; // the Raft transport's listener takes it
      const wss = path === PEER_API_PATH ? this.wss : path === FORWARD_PATH ? this.forwardWss : null;
      if (wss === null) {
        // answered, or nobody would: an upgraded socket has no timeout, and would stay open for good
        rejectUpgrade(socket, 404);
        return;
      }
      // The server already required a certificate from the cluster CA; it must also name a member (identity and
      // router certificates from the same CA do not).
      const peer = this.opts.tls.peerIdFromCert((socket as TLSSocket).getPeerCertificate());
      if (!peer) {
        rejectUpgrade(socket, 403);
        return;
      }
      // a member speaking a peer protocol this one does not: refused with the reason, before any frame
      const refusal = PEER_LINK.judge(req.headers);
      if (refusal !== null) {
        this.refusals.refused(path ?? '', peer, refusal.reason);
        refuseUpgrade(socket, refusal);
        return;
      }
      this.refusals.accepted(path ?? '', peer);
      this.peerOfRequest.set(req, peer);
      if (issuedBy((socket as TLSSocket).getPeerCertificate(true), this.rootFingerprint))
        this.rootIssuedRequests.add(req);
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
    });
  }

  get id(): string {
    return this.opts.nodeId;
  }

  static async start(
    dataDir: string,
    store: Store,
    opts: ClusterOptions,
    logger: Log,
    onFatal: (err: Error) => void,
  ): Promise<ClusterNode> {
    // a store the cluster raised past this release (a downgrade, or a snapshot installed before it stopped)
    const tooOld = releaseTooOld(store, opts.stateMachineVersion ?? STATE_MACHINE_VERSION);
    if (tooOld !== null) throw new Error(tooOld);
    const wal_bytes = opts.raftWal_bytes ?? DEFAULT_RAFT_WAL_BYTES;
    const log = await LevelLog.open(join(dataDir, 'raft'), wal_bytes > 0 ? { wal: { size_bytes: wal_bytes } } : {});
    const tls = opts.tls;
    // only a certificate naming a node id may hold a connection: identities' and routers' certificates of the same
    // CA are closed after their handshake (they would otherwise take the listener's connections)
    const server = createMutualTlsServer(
      tls,
      PEER_LISTENER_LIMITS,
      (socket) => tls.peerIdFromCert(socket.getPeerCertificate()) !== null,
    );
    try {
      await listenOn(server, opts.peerListen.port, opts.peerListen.host);
      const bound = server.address() as AddressInfo;
      const host = opts.peerListen.host.includes(':') ? `[${opts.peerListen.host}]` : opts.peerListen.host;
      const peerAddress = opts.peerAdvertise ?? `${host}:${bound.port}`;
      const refusals = new RefusalLog((level, msg, extra) => logger(level, msg, extra));
      const transport = new WebSocketTransport({
        id: opts.nodeId,
        path: RAFT_PATH,
        clusterId: opts.clusterId ?? 'keel',
        tls,
        ...raftLinkOptions(refusals, (err, peer) => logger('info', 'raft transport', { err: err.message, peer })),
      });
      transport.attach(server);
      const removal = readRemoval(dataDir, opts.nodeId);
      if (removal !== null) throw removal;
      const fresh = log.isEmpty();
      if (opts.forceNewCluster === true) {
        if (fresh) throw new Error("--force-new-cluster needs a member's data: this data directory has no Raft log");
        // the interlock: a member that answers and knows a leader means the cluster still has a quorum
        const alive = await memberWithLeader(log.appliedConf().addresses, opts.nodeId, tls);
        if (alive !== null) {
          throw new Error(
            `--force-new-cluster refused: member ${alive.id} answers and follows leader ${alive.leader}: ` +
              'the cluster still has a quorum (start this node without the flag)',
          );
        }
        const removed = await forceNewCluster(log, opts.nodeId);
        logger('warn', 'forced a new cluster: this member is its only voter', { removed });
      }
      let peers: Record<string, string> = { [opts.nodeId]: peerAddress };
      if (fresh && !opts.init && !opts.join) {
        throw new Error('a new cluster member needs --cluster-init (first node) or --join ADDR (a member)');
      }
      if (fresh && opts.join) {
        const c = peerClient(opts.join, tls);
        try {
          const m = await orRefusal(c, opts.join, () =>
            withTimeout(c.api.members.query(), PEER_CALL_TIMEOUT_MS, `members of ${opts.join}`),
          ).catch((err: unknown) => {
            throw asRemoval(err, opts.nodeId, opts.join!);
          });
          for (const x of m.members) peers[x.id] = x.address;
          // a learner at this node's own address was added for it by an operator (keel cluster add --learner, the
          // way back for a removed id): it joins as that learner; any other member of that id is another node
          const me = m.members.find((x) => x.id === opts.nodeId);
          if (me !== undefined && (me.voter || me.address !== peerAddress)) {
            throw new Error(`node id ${opts.nodeId} is already a member of the cluster at ${opts.join}`);
          }
        } finally {
          c.close();
        }
      }
      peers = { ...peers };
      const sm = new StoreStateMachine(
        store,
        (index) => logger('error', 'skipped an undecodable log entry', { index }),
        opts.stateMachineVersion ?? STATE_MACHINE_VERSION,
      );
      const raft = await RaftNode.start({
        id: opts.nodeId,
        log,
        transport,
        stateMachine: sm,
        applied: store.appliedIndex,
        peers,
        ...(fresh && opts.init ? { bootstrap: { voters: [opts.nodeId] } } : {}),
        tick_ms: opts.tick_ms ?? DEFAULT_TICK_MS,
        readTimeout_ms: READ_TIMEOUT_MS,
        promoteTimeout_ms: PROMOTE_TIMEOUT_MS,
        snapshotEvery_entries: opts.snapshotEvery_entries ?? DEFAULT_SNAPSHOT_EVERY,
        // the store on disk is the snapshot: periodic snapshots copy nothing (bytes only for a follower needing them)
        snapshotDeferred: true,
        // one batch in flight: fewer, larger batches under load (docs/cluster.md, "One batch in flight")
        holdWhileCommitting: opts.holdWhileCommitting ?? true,
        // the members snapshot a third of an interval apart (3 voters), so two of them are always free of it
        snapshotStagger: true,
        snapshotKeep_entries: Math.min(
          SNAPSHOT_KEEP_ENTRIES,
          Math.max(1, Math.floor((opts.snapshotEvery_entries ?? DEFAULT_SNAPSHOT_EVERY) / 2)),
        ),
      });
      raft.onFatal((err) => onFatal(err));
      raft.onError((err) => logger('warn', 'raft', { err: err.message }));
      const node = new ClusterNode(raft, sm, log, server, peerAddress, opts, logger, refusals, onFatal, dataDir);
      raft.onRemoved((index) => node.appliedOwnRemoval(index));
      logger('info', 'peer protocol', { version: PEER_PROTOCOL_VERSION });
      node.monitor.start();
      try {
        if (fresh && opts.join) await node.requestJoin(opts.join);
      } catch (err) {
        await node.stop({ transferLeadership: false });
        throw asRemoval(err, opts.nodeId, opts.join ?? '');
      }
      return node;
    } catch (err) {
      server.close();
      await log.close().catch(() => {});
      throw err;
    }
  }

  /** Asks the member at `address` to add this node (as a learner, promoted to voter once caught up). */
  private async requestJoin(address: string): Promise<void> {
    const c = peerClient(address, this.opts.tls);
    try {
      await askToJoin(
        c,
        address,
        { id: this.id, address: this.peerAddress },
        {
          timeout_ms: JOIN_TIMEOUT_MS,
          stopped: () => this.stopped,
          onRetry: (attempt, code) => this.logger('info', 'joining again', { attempt, code }),
        },
      );
    } finally {
      c.close();
    }
  }

  /** Waits until the cluster has a leader this node knows (bounded). */
  async waitForLeader(timeout_ms: number): Promise<string> {
    const deadline = Date.now() + timeout_ms;
    while (Date.now() < deadline) {
      // a removed node never gets a leader again: said at once (a restarted one learns it from a member's status)
      if (this.removal !== null) throw this.removal;
      const l = this.raft.leaderId();
      if (l !== null) return l;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new RaftError('not-leader', `no leader within ${timeout_ms} ms`);
  }

  /**
   * Ready to serve: a leader, then a read index (this node has then applied everything committed), within
   * `timeout_ms`; a read index that timed out or met a change of leader is asked again (src/cluster/ready.ts).
   */
  waitUntilReady(timeout_ms: number): Promise<void> {
    return untilReady(
      {
        waitForLeader: (ms) => this.waitForLeader(ms),
        readIndex: () => this.raft.readIndex(),
        removal: () => this.removal,
        onRetry: (code, attempt) =>
          this.logger('info', 'read index not confirmed yet: asking again', { code, attempt }),
      },
      timeout_ms,
    );
  }

  /** Linearizable read barrier on this node (ReadIndex): resolves once this node has applied everything committed. */
  async readBarrier(): Promise<void> {
    await this.raft.readIndex();
  }

  members(): { leader: string | null; members: MemberInfo[] } {
    const conf = this.log.appliedConf();
    const addresses = conf.addresses;
    const [incoming, outgoing, ...learners] = memberSets(conf.conf);
    const voters = new Set([...incoming, ...outgoing]);
    const ids = [...new Set([...voters, ...learners.flat()])].sort();
    return {
      leader: this.raft.leaderId(),
      members: ids.map((id) => ({ id, address: this.addressIn(addresses, id), voter: voters.has(id) })),
    };
  }

  /** A member's peer address as members() lists it (this node's own when the log holds none). */
  private addressIn(addresses: Record<string, string>, id: string): string {
    return (Object.hasOwn(addresses, id) ? addresses[id] : undefined) ?? (id === this.id ? this.peerAddress : '');
  }

  /** The peer address of member `id`, or undefined when it is not a member: members() without the sorted list. */
  private memberAddress(id: string): string | undefined {
    const { conf, addresses } = this.log.appliedConf();
    const member = memberSets(conf).some((ids) => ids.includes(id));
    return member ? this.addressIn(addresses, id) : undefined;
  }

  status(): MemberStatus {
    const s = this.raft.status();
    const conf = this.log.appliedConf();
    return {
      id: this.id,
      role: s.role,
      leader: s.leader,
      term: s.term,
      applied: s.applied,
      commit: s.commit,
      snapshotIndex: s.snapshotIndex,
      firstIndex: s.firstIndex,
      version: KEEL_VERSION,
      stateMachineVersion: this.stateMachineVersion,
      apiAddresses: this.apiAddresses,
      peerAddress: this.peerAddress,
      routerAddress: this.routerAddress,
      readOnly: false,
      conf: { index: conf.index, members: [...confMembers(conf.conf)] },
    };
  }

  /** Closes the peer clients of ids that are no longer members (MemberMonitor, every poll): removed ones. */
  keepOnly(members: ReadonlySet<string>): void {
    for (const [id, { client }] of this.clients) {
      if (members.has(id)) continue;
      this.clients.delete(id);
      client.close();
    }
  }

  /** The peer API client of member `id` (cached; rebuilt when its address changed). */
  peer(id: string): PeerClient {
    // asked for every forward message: no member list built for it
    const address = this.memberAddress(id);
    if (!address) throw new RaftError('not-leader', `no address known for member ${id}`, { leader: null });
    const known = this.clients.get(id);
    if (known && known.address === address) return known.client;
    known?.client.close();
    const client = peerClient(address, this.opts.tls, this.dialOf(id), id);
    this.clients.set(id, { address, client });
    return client;
  }

  /** The peer protocol check of this node's links to member `id`, refusals logged. */
  private dialOf(id: string): PeerDial {
    return {
      check: PEER_LINK,
      onRefused: (address, why) => this.refusals.refused('dial', `${id} at ${address}`, why.reason),
      onAccepted: (address) => this.refusals.accepted('dial', `${id} at ${address}`),
    };
  }

  /**
   * Sends one forward message to the leader's peer API. Never sent (no address or no open connection within the
   * bound) is a definite refusal of every command in it, so the proposer may try again; a failure after sending is
   * thrown (outcome unknown).
   */
  private async transmitForwards(leader: string, term: number, items: Uint8Array[]): Promise<ForwardResult[]> {
    const refused = (): ForwardResult[] => items.map(() => ({ ok: false, code: 'not-leader', leader: null }));
    let client: PeerClient;
    try {
      client = this.peer(leader);
    } catch (err) {
      if (err instanceof RaftError) return refused();
      throw err;
    }
    return (await client.forward.send(term, items, FORWARD_CONNECT_TIMEOUT_MS, FORWARD_TIMEOUT_MS)) ?? refused();
  }

  /**
   * Runs `fn` on the leader: here when this node leads, else through the leader's peer API. A Raft refusal the
   * leader answered with is thrown here as the RaftError it was, so callers (the REST cluster operations, a join)
   * tell a lost leadership from a bad request the same way wherever the call ran.
   */
  private async onLeader<T>(here: () => Promise<T>, there: (c: PeerClient) => Promise<T>): Promise<T> {
    const leader = this.raft.leaderId() ?? (await this.waitForLeader(3_000));
    if (leader === this.id) return here();
    try {
      return await withTimeout(there(this.peer(leader)), JOIN_TIMEOUT_MS, `call on leader ${leader}`);
    } catch (err) {
      const code = raftCodeOf(err);
      if (code === null || err instanceof RaftError) throw err;
      // the leader's message already carries RaftError's prefix
      throw new RaftError(code, (err as Error).message.replace(/^raft: /, ''), { cause: err });
    }
  }

  /**
   * Adds member `id` at `address`: a learner, then a voter once caught up when `voter`. Asked again (a join retried
   * after its outcome was unknown), it finishes what the first request started: a learner already there at that
   * address is only promoted. It never demotes: a voter already there at that address is left as it is even when
   * `voter` is false (as OpenZiti's add of a non-voter that is already a voter), and a voter at another address is
   * refused (MemberConflictError: remove it first), not turned into a learner at the new one.
   */
  async addMember(id: string, address: string, voter: boolean, join = false): Promise<void> {
    // the rule every peer certificate's id follows: another id could never connect (nor be a safe object key)
    if (!NODE_ID_PATTERN.test(id)) {
      throw new MembershipRefusal(
        `a member id is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit: ${JSON.stringify(id.slice(0, 64))}`,
      );
    }
    await this.onLeader(
      async () => {
        // a node's own join under a removed id: refused here too, whichever member passed it on (that member's
        // record may lag behind this leader's)
        const removedAt = join ? this.removalOf(id) : null;
        if (removedAt !== null) throw new PeerRemovedError(id, removedAt);
        const { conf, addresses } = this.log.appliedConf();
        const there = Object.hasOwn(addresses, id) && addresses[id] === address;
        if (conf.voters.includes(id)) {
          if (there) return;
          throw new MemberConflictError(id, addresses[id] ?? '', address);
        }
        if (!(there && conf.learners.includes(id))) {
          await this.refuseOlderRelease(id, address);
          await this.raft.addLearner(id, address);
        }
        if (voter) await this.raft.promote(id, address);
      },
      (c) => c.api.addMember.mutate({ id, address, voter, join }),
    );
  }

  /**
   * Refuses to add node `id` at `address` when it states a state-machine version below the cluster's: it could not
   * apply the log as the members do (MemberTooOldError). Asked only once the cluster is past version 1; a node that
   * does not answer (not started yet: an operator's add) is added, and stops at the first entry or snapshot beyond
   * its release (StoreStateMachine.checkVersion, raiseStateMachineVersion).
   */
  private async refuseOlderRelease(id: string, address: string): Promise<void> {
    const cluster = this.clusterStateMachineVersion();
    if (cluster <= 1) return;
    const c = peerClient(address, this.opts.tls);
    let status: MemberStatus;
    try {
      status = await withTimeout(c.api.status.query(), PEER_CALL_TIMEOUT_MS, `status of ${address}`);
    } catch {
      return;
    } finally {
      c.close();
    }
    const version = stateMachineVersionOf(status);
    if (version < cluster) throw new MemberTooOldError(id, version, cluster);
  }

  /** Adds the node serving the peer API at `address` (its id is asked from it). */
  async addMemberAt(address: string, voter: boolean): Promise<string> {
    const c = peerClient(address, this.opts.tls);
    try {
      const { id } = await orRefusal(c, address, () =>
        withTimeout(c.api.status.query(), PEER_CALL_TIMEOUT_MS, `status of ${address}`),
      );
      await this.addMember(id, address, voter);
      return id;
    } finally {
      c.close();
    }
  }

  /** The cluster's state-machine version as this member has applied it (src/model/cluster-state.ts). */
  clusterStateMachineVersion(): number {
    return clusterStateMachineVersion(this.sm.store);
  }

  /**
   * The refusal of a command that needs state-machine version `needed` while the cluster is below it (a rolling
   * upgrade not complete), or null. Judged on this member's applied version: it only grows, so a member behind the
   * others may refuse what the cluster already allows (the caller tries again), never allow what it does not.
   */
  private versionRefusal(needed: number): ProposalError | null {
    if (needed <= 1) return null;
    const cluster = this.clusterStateMachineVersion();
    if (needed <= cluster) return null;
    return new ProposalError(
      'upgrading',
      `it needs state-machine version ${needed}, and the cluster is at ${cluster} until every member applies ${needed}`,
      VERSION_RETRY_AFTER_S,
    );
  }

  /**
   * After each status poll, on the leader: raises the cluster's state-machine version to the lowest version the
   * members state, once every member (voters and learners) has answered the poll and that version is above the
   * cluster's. A member that did not answer may run an older release, so nothing is raised while one is down. One
   * raise at a time; a raise the leader loses is made again at a later poll.
   */
  polled(): void {
    if (this.stopped || this.raisingVersion || !this.raft.isLeader()) return;
    let lowest = this.stateMachineVersion;
    for (const m of this.monitor.view()) {
      if (m.id === this.id) continue;
      if (!m.online || m.status === null) return;
      lowest = Math.min(lowest, stateMachineVersionOf(m.status));
    }
    const from = this.clusterStateMachineVersion();
    if (lowest <= from) return;
    this.raisingVersion = true;
    const cmd: Command = {
      op: 'custom',
      name: 'raiseStateMachineVersion',
      args: { version: lowest },
      at: new Date().toISOString(),
    };
    this.proposer
      .propose(cmd)
      .then(
        (r) => {
          if (r.ok) this.logger('info', 'cluster state-machine version raised', { from, to: lowest });
          else this.logger('warn', 'cluster state-machine version not raised', { to: lowest, error: r.error.reason });
        },
        (err: unknown) => {
          this.logger('warn', 'cluster state-machine version not raised', { to: lowest, err: String(err) });
        },
      )
      .finally(() => {
        this.raisingVersion = false;
      });
  }

  /**
   * Waits until every other member that answered its last status poll has applied what this node has applied (a
   * read barrier on each through the peer API, each bounded by CONFIRM_APPLIED_TIMEOUT_MS; concurrent callers
   * share rounds: src/cluster/applied-everywhere.ts). Resolves with the ids that did not confirm in time.
   */
  appliedEverywhere(): Promise<string[]> {
    return this.everywhere.confirm();
  }

  /**
   * One confirmation round of appliedEverywhere: logged once (not per waiting caller) when a member did not confirm,
   * or was not asked because it missed its last status poll.
   */
  private async confirmApplied(): Promise<string[]> {
    const view = this.memberView().filter((m) => m.id !== this.id);
    const others = view.filter((m) => m.online);
    const unconfirmed = await Promise.all(
      others.map(async (m) => {
        try {
          const asked = this.peer(m.id).api.readIndex.query();
          await withTimeout(asked, CONFIRM_APPLIED_TIMEOUT_MS, `read index of ${m.id}`);
          return null;
        } catch {
          return m.id;
        }
      }),
    );
    const late = unconfirmed.filter((id): id is string => id !== null);
    const offline = view.filter((m) => !m.online).map((m) => m.id);
    if (late.length > 0 || offline.length > 0) this.warnUnconfirmed(late, offline);
    return late;
  }

  /**
   * The warning of a round some members did not confirm: when those members change, else at most every
   * UNCONFIRMED_WARN_EVERY_MS (rounds follow each other under a stream of logouts while a member is down).
   */
  private warnUnconfirmed(late: string[], offline: string[]): void {
    const key = `${late.join(',')}|${offline.join(',')}`;
    const now_ms = Date.now();
    if (key === this.unconfirmedWarned.key && now_ms - this.unconfirmedWarned.at_ms < UNCONFIRMED_WARN_EVERY_MS) return;
    this.unconfirmedWarned = { key, at_ms: now_ms };
    this.logger('warn', 'revocations answered before these members applied them', { late, offline });
  }

  /** Every member as this node sees it (liveness from its status polls). */
  memberView(): MemberView[] {
    return this.monitor.view();
  }

  /** Why this node's link to member `id` is refused for its peer protocol version (list-members), else null. */
  peerRefusal(id: string): DialRefusal | null {
    return this.monitor.refusal(id);
  }

  /**
   * Member `id`'s peer certificate (its PEM and fingerprint): this node's own, or the one the member showed this
   * node's peer client (checked to name it); null when this node has not reached it yet.
   */
  memberCert(id: string): MemberCert | null {
    if (id === this.id) {
      // its own certificate does not change while it runs: parsed once
      if (this.ownCert === undefined) this.ownCert = this.peerCertPem === null ? null : memberCertOf(this.peerCertPem);
      return this.ownCert;
    }
    const der = this.clients.get(id)?.client.serverCert() ?? null;
    return der === null ? null : memberCertOf(der);
  }

  /** This node's peer certificate (PEM, the leaf without its chain). */
  get peerCertPem(): string | null {
    const cert = this.opts.tls.cert;
    return pemBlocks(cert.toString(), 'CERTIFICATE')[0] ?? null;
  }

  async removeMember(id: string): Promise<void> {
    await this.onLeader(
      async () => {
        const st = this.raft.status();
        // reachable: connected, and heard within an election timeout (a link to a dead host may look open for a
        // while; a live follower answers every heartbeat)
        const up = new Set(st.peers.filter((p) => p.state === 'connected').map((p) => p.id));
        const reachable = (peer: string) => up.has(peer) && this.raft.heardRecently(peer);
        const risk = removalQuorumRisk(id, this.id, st.conf.voters, reachable);
        if (risk !== null) throw risk;
        if (id === this.id) {
          // The leader hands over first (to the voter most caught up: a member that is down or behind would not
          // take it in time), then the new leader removes it.
          const to = this.raft.bestTransferTarget();
          if (to) {
            await this.raft.transferLeadership(to, TRANSFER_TIMEOUT_MS);
            await withTimeout(this.peer(to).api.removeMember.mutate({ id }), JOIN_TIMEOUT_MS, `removal on ${to}`);
            return;
          }
        }
        await this.raft.removeNode(id);
      },
      (c) => c.api.removeMember.mutate({ id }),
    );
  }

  async transferLeadership(to: string): Promise<void> {
    if (!this.raft.status().conf.voters.includes(to)) throw new MembershipRefusal(`no voting member with id ${to}`);
    await this.raft.transferLeadership(to, TRANSFER_TIMEOUT_MS);
  }

  /** Whether `id` is a voter or learner of the configuration this node has applied (either side of a joint one). */
  private isMember(id: string): boolean {
    return this.log.confHas(id); // asked for every forward message: no copy of the configuration
  }

  /**
   * The index of the membership change that removed `id`, while no later one added it again (the replicated record,
   * src/model/cluster-removal.ts); null for any other id.
   */
  removalOf(id: string): number | null {
    if (this.isMember(id)) return null;
    const row = this.sm.store.collection('cluster-removals').get(id);
    return row === undefined ? null : (row.confIndex as number);
  }

  /**
   * A member's status poll answer (MemberMonitor). Applied configurations are committed ones, so a member's newer
   * configuration that leaves this node out, while this node's own still has it, means it was removed meanwhile:
   * the members no longer send it the log, and it may never apply the removal itself.
   */
  observed(from: string, status: MemberStatus): void {
    if (leftOutBy(this.id, this.log.appliedConf(), status.conf)) {
      this.removedAt(status.conf!.index, `member ${from} applied a newer configuration`);
    }
  }

  /**
   * This node applied a membership change that leaves it out. That is not always its own removal: a fresh node
   * catching up from the leader's log replays every earlier removal of its id too, when an operator reused the id
   * and added it again further on in that log. So the members are asked (removalVerdict), every
   * REMOVAL_JUDGE_WAIT_MS:
   * - a removal when the leader and a majority of the voters left hold configurations without this node;
   * - history when one of them holds a newer configuration with it. The node then watches on until it applies a
   *   configuration with itself (its addition again), so that a removal made meanwhile, which it would never apply
   *   (the leader stops sending it the log), is still learnt from the members;
   * - without a verdict after REMOVAL_JUDGE_ROUNDS (members that do not answer, or of an older release that does not
   *   say), its own apply is taken as the removal.
   */
  appliedOwnRemoval(index: number): void {
    const judging = this.removalToJudge > 0;
    this.removalToJudge = Math.max(this.removalToJudge, index);
    if (!judging) void this.judgeRemoval();
  }

  /** Whether a removal of this node it applied is being judged (appliedOwnRemoval). */
  get judgingRemoval(): boolean {
    return this.removalToJudge > 0;
  }

  private async judgeRemoval(): Promise<void> {
    try {
      await judgeOwnRemoval(
        this.id,
        {
          target: () => this.removalToJudge,
          over: () => this.stopped || this.learntRemoval,
          appliedConf: () => this.log.appliedConf(),
          ask: (applied) => this.confAnswers(applied),
          removed: (index, how) => this.removedAt(index, how),
          log: (level, msg, extra) => this.logger(level, msg, extra),
          sleep: (ms) => new Promise((r) => setTimeout(r, ms).unref()),
        },
        { judgeRounds: REMOVAL_JUDGE_ROUNDS, watchRounds: REMOVAL_WATCH_ROUNDS, wait_ms: REMOVAL_JUDGE_WAIT_MS },
      );
    } finally {
      this.removalToJudge = 0;
    }
  }

  /**
   * The applied configuration and role of the members this node can name (those of its applied configuration, and
   * its Raft transport's peers: the members its join listed), asked in parallel, each within REMOVAL_JUDGE_WAIT_MS;
   * one that does not answer is left out.
   */
  private async confAnswers(applied: { addresses: Record<string, string> }): Promise<Map<string, ConfAnswer>> {
    const targets = new Map<string, string>();
    for (const [id, address] of Object.entries(applied.addresses)) if (id !== this.id) targets.set(id, address);
    for (const p of this.raft.status().peers) {
      if (targets.size >= MAX_REMOVAL_WITNESSES) break;
      if (p.id !== this.id && p.address && !targets.has(p.id)) targets.set(p.id, p.address);
    }
    const answers = new Map<string, ConfAnswer>();
    await Promise.all(
      [...targets].slice(0, MAX_REMOVAL_WITNESSES).map(async ([id, address]) => {
        try {
          // a member of its configuration through its cached client; any other over a connection of its own
          const st =
            this.memberAddress(id) === undefined
              ? await statusOf(address, this.opts.tls, REMOVAL_JUDGE_WAIT_MS)
              : await withTimeout(this.peer(id).api.status.query(), REMOVAL_JUDGE_WAIT_MS, 'status');
          if (st !== null) answers.set(id, { conf: st.conf, leads: st.role === 'leader' });
        } catch {
          // no answer: it says nothing
        }
      }),
    );
    return answers;
  }

  /**
   * This node learnt it was removed: recorded (REMOVED_FILE) first, since the process is then asked to stop
   * (onFatal); said once.
   */
  removedAt(confIndex: number, how: string): void {
    if (this.learntRemoval || this.stopped) return;
    this.learntRemoval = true;
    const removal = new RemovedFromClusterError(this.id, confIndex, how);
    void recordRemoval(this.dataDir, removal)
      .catch((err: Error) => {
        // it stops all the same; restarted, it learns it again from a member (or, if it applied its removal, finds
        // no leader)
        this.logger('warn', 'could not record the removal', { err: err.message });
      })
      .then(() => {
        this.removal = removal;
        this.logger('error', 'removed from the cluster', { err: removal.message });
        this.onFatal(removal);
      });
  }

  /** Why this node stopped being a member, once it learnt it (null while it is one). */
  get removed(): RemovedFromClusterError | null {
    return this.removal;
  }

  private handlers(): PeerHandlers {
    return {
      forward: async (term, items, from) => {
        // Once stopping, refuse outright (nothing proposed, so the sender may send it to the next leader): an
        // answer lost to the closing socket would leave the sender not knowing whether the write happened.
        if (this.stopped) return items.map(() => ({ ok: false, code: 'not-leader', leader: null }));
        // A sender that is no longer a member (removed while its process runs on) has stale state: a session
        // revoked since would still pass its checks. Refused as "no leader here" (nothing proposed).
        if (from !== null && !this.isMember(from)) {
          return items.map(() => ({ ok: false, code: 'not-leader', leader: null }));
        }
        this.forwarding++;
        try {
          // fenced on the term the sender addressed: led in another term, this node refuses (definitely)
          return await proposeOnLeader(this.raft, items, term);
        } finally {
          this.forwarding--;
        }
      },
      isMember: (id) => this.isMember(id),
      removedAt: (id) => this.removalOf(id),
      readIndex: () => this.raft.readIndex(),
      status: () => this.status(),
      members: () => this.members(),
      addMember: (id, address, voter, join) => this.addMember(id, address, voter, join),
      removeMember: (id) => this.removeMember(id),
      transferLeadership: (to) => this.transferLeadership(to),
    };
  }

  /** Stops: hands leadership over first when leading (so a rolling restart fails no write), then closes. */
  async stop(opts: { transferLeadership?: boolean } = {}): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.monitor.stop();
    await this.proposer.close();
    // forwards already being proposed get their answer (they take a turn of the event loop)
    for (let i = 0; i < STOP_DRAIN_STEPS && this.forwarding > 0; i++) await new Promise((r) => setTimeout(r, 10));
    const graceful = opts.transferLeadership ?? true;
    await this.raft.stop({ transferLeadership: graceful, timeout_ms: TRANSFER_TIMEOUT_MS });
    // Members learn the new leader within a heartbeat; until then some may still forward here. Keep answering
    // (refusing, definitely) for a moment, so that no forward meets a closing socket and ends "outcome unknown".
    if (graceful) await new Promise((r) => setTimeout(r, STOP_GRACE_MS));
    for (const { client } of this.clients.values()) client.close();
    this.clients.clear();
    // a graceful close flushes answers already written; whatever is left after a bound is cut
    const servers = [this.wss, this.forwardWss];
    for (const wss of servers) for (const ws of wss.clients) ws.close(1001, 'member stopping');
    for (let i = 0; i < STOP_DRAIN_STEPS && servers.some((wss) => wss.clients.size > 0); i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    for (const wss of servers) {
      for (const ws of wss.clients) ws.terminate();
      wss.close();
    }
    await closeMutualTlsServer(this.server);
  }
}

/**
 * A join refused because this node's id was removed from the cluster (the member's PeerRemovedError) as the
 * RemovedFromClusterError `keel run` exits with status 78 for; any other error as it is.
 */
function asRemoval(err: unknown, nodeId: string, address: string): unknown {
  const at = removedAtOf(err);
  return at === null ? err : new RemovedFromClusterError(nodeId, at, `member ${address} refuses it as removed`);
}

/** A member's certificate (DER or PEM) as the controllers list shows it, parsed once; null when it does not parse. */
function memberCertOf(cert: Buffer | string): MemberCert | null {
  try {
    const x = new X509Certificate(cert);
    return { pem: x.toString(), fingerprint: fingerprintOfDer(x.raw) };
  } catch {
    return null;
  }
}
