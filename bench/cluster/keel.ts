/**
 * A 3-node Keel cluster for the benchmark: three `keel run` processes (src/cluster/processes.ts, as
 * `npm run cluster` starts them), each with its own data directory; every store batch and Raft append is synced.
 * The nodes serve plain HTTP on loopback (`--insecure-http`, uWS engine): etcd is loaded over plain HTTP too.
 * Their peer links are mutual TLS, as every Keel cluster's (certificates made as `npm run cluster` makes them).
 */
import { join } from 'node:path';
import { preparePeerPki } from '../../src/cluster/local.js';
import { type PeerTlsOptions, peerClient } from '../../src/cluster/peer-api.js';
import { type NodeProcess, type NodeSpec, startNode, stopNode } from '../../src/cluster/processes.js';
import { loadPeerTlsOptions } from '../../src/pki/index.js';
import { withTimeout } from '../../src/util/timeout.js';

export const BENCH_ADMIN_PASSWORD = 'bench-admin-password-1';
/** Bound on one HTTP call the harness makes itself (login, member lists). */
const CALL_TIMEOUT_MS = 10_000;
/** Bound on transfer-leadership requests to place the leader before a failover trial, and the pause between them. */
const TRANSFER_ATTEMPTS = 20;
const TRANSFER_PAUSE_MS = 500;

export const alive = (n: NodeProcess) => n.child.exitCode === null && n.child.signalCode === null;

export class KeelBenchCluster {
  private constructor(
    private readonly dir: string,
    readonly nodes: NodeProcess[],
    /** The first member's peer certificate, which the harness presents to the peer API (maxTerm). */
    private readonly peerTls: PeerTlsOptions,
    /** Flags every node gets besides the harness's own (e.g. `--raft-wal-mib 0`). */
    private readonly nodeArgs: readonly string[],
  ) {}

  private static spec(
    dir: string,
    nodeArgs: readonly string[],
    i: number,
    start?: NodeSpec['start'],
    peerPort = 0,
  ): NodeSpec {
    return {
      id: `n${i + 1}`,
      dataDir: join(dir, `n${i + 1}`),
      apiPort: 0,
      peerPort,
      ...(start ? { start } : {}),
      ...(i === 0 && start ? { adminPassword: BENCH_ADMIN_PASSWORD } : {}),
      // plain HTTP on loopback (uWS engine), as etcd's JSON gateway is loaded over plain HTTP: the same scheme for both
      extraArgs: ['--insecure-http', ...nodeArgs],
    };
  }

  /** Starts n1 with `--cluster-init`, then n2 and n3 joining through it. */
  static async start(
    dir: string,
    onStarted: (n: NodeProcess) => void,
    nodeArgs: readonly string[] = [],
  ): Promise<KeelBenchCluster> {
    const ids = ['n1', 'n2', 'n3'];
    await preparePeerPki(ids, (id) => join(dir, id));
    const c = new KeelBenchCluster(dir, [], await loadPeerTlsOptions(join(dir, 'n1', 'pki')), nodeArgs);
    const first = await startNode(KeelBenchCluster.spec(dir, nodeArgs, 0, { init: true }));
    onStarted(first);
    c.nodes.push(first);
    for (let i = 1; i < 3; i++) {
      const n = await startNode(KeelBenchCluster.spec(dir, nodeArgs, i, { join: first.peerAddress }));
      onStarted(n);
      c.nodes.push(n);
    }
    return c;
  }

  get ports(): number[] {
    return this.nodes.map((n) => Number(new URL(n.base).port));
  }

  /** Restarts a stopped member on its data directory and peer port (the API port may change). */
  async restart(i: number, onStarted: (n: NodeProcess) => void): Promise<void> {
    if (alive(this.nodes[i]!)) throw new Error(`node ${i} is still running`);
    const peerPort = Number(this.nodes[i]!.peerAddress.split(':').at(-1));
    const n = await startNode(KeelBenchCluster.spec(this.dir, this.nodeArgs, i, undefined, peerPort));
    onStarted(n);
    this.nodes[i] = n;
  }

  async login(): Promise<string> {
    const r = await fetch(`${this.nodes[0]!.base}/edge/management/v1/authenticate?method=password`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password: BENCH_ADMIN_PASSWORD }),
      signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
    });
    await r.arrayBuffer();
    const token = r.headers.get('zt-session');
    if (r.status !== 200 || token === null) throw new Error(`admin login failed: HTTP ${r.status}`);
    return token;
  }

  /**
   * The index of the leader once every live node names the same, live, leader (`GET
   * /fabric/v1/cluster/list-members` on each); polls for at most `timeout_ms`.
   */
  async agreedLeader(token: string, timeout_ms = 30_000): Promise<number> {
    const deadline = Date.now() + timeout_ms;
    while (Date.now() < deadline) {
      const views = await Promise.all(
        this.nodes.filter(alive).map(async (n) => {
          try {
            const r = await fetch(`${n.base}/fabric/v1/cluster/list-members`, {
              headers: { 'zt-session': token },
              signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
            });
            const body = (await r.json()) as { data?: { id: string; leader: boolean }[] };
            return body.data?.find((m) => m.leader)?.id ?? null;
          } catch {
            return null;
          }
        }),
      );
      const i = this.nodes.findIndex((n) => n.spec.id === views[0]);
      if (i >= 0 && alive(this.nodes[i]!) && views.every((v) => v === views[0])) return i;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`the Keel nodes did not agree on a leader within ${timeout_ms} ms`);
  }

  /**
   * Makes member `i` the leader every live node agrees on: asks the current leader to hand leadership to it
   * (`POST /fabric/v1/cluster/transfer-leadership`) until they agree on it. A member just restarted may still be
   * catching up, and then Raft refuses the transfer. So the request is repeated, at most TRANSFER_ATTEMPTS times,
   * TRANSFER_PAUSE_MS apart. Returns whether leadership had to move.
   */
  async leadBy(i: number, token: string): Promise<boolean> {
    const target = this.nodes[i]!;
    let moved = false;
    for (let attempt = 0; attempt < TRANSFER_ATTEMPTS; attempt++) {
      const leader = await this.agreedLeader(token);
      if (leader === i) return moved;
      moved = true;
      try {
        const r = await fetch(`${this.nodes[leader]!.base}/fabric/v1/cluster/transfer-leadership`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'zt-session': token },
          body: JSON.stringify({ newLeaderId: target.spec.id }),
          signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
        });
        await r.arrayBuffer();
      } catch {
        // no answer: asked again below, after the pause
      }
      await new Promise((r) => setTimeout(r, TRANSFER_PAUSE_MS));
    }
    throw new Error(`leadership did not move to ${target.spec.id} in ${TRANSFER_ATTEMPTS} attempts`);
  }

  /**
   * The identity count on every member (`meta.pagination.totalCount` of `GET /identities?limit=1`) once all
   * agree, polling for at most `timeout_ms`; the last counts seen if they never agree.
   */
  async identityCounts(token: string, timeout_ms = 30_000): Promise<{ counts: number[]; agreed: boolean }> {
    const deadline = Date.now() + timeout_ms;
    let counts: number[] = [];
    while (Date.now() < deadline) {
      counts = await Promise.all(
        this.nodes.map(async (n) => {
          try {
            const r = await fetch(`${n.base}/edge/management/v1/identities?limit=1`, {
              headers: { 'zt-session': token },
              signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
            });
            const body = (await r.json()) as { meta?: { pagination?: { totalCount?: number } } };
            return body.meta?.pagination?.totalCount ?? -1;
          } catch {
            return -1;
          }
        }),
      );
      if (counts[0]! >= 0 && counts.every((c) => c === counts[0])) return { counts, agreed: true };
      await new Promise((r) => setTimeout(r, 200));
    }
    return { counts, agreed: false };
  }

  /** The highest Raft term any live member reports (peer API `status`); term changes count elections. */
  async maxTerm(): Promise<number> {
    const terms = await Promise.all(
      this.nodes.filter(alive).map(async (n) => {
        const c = peerClient(n.peerAddress, this.peerTls);
        try {
          const s = await withTimeout(c.api.status.query(), CALL_TIMEOUT_MS, 'status');
          return s.term;
        } catch {
          return -1;
        } finally {
          c.close();
        }
      }),
    );
    return Math.max(...terms);
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => stopNode(n, 10_000)));
  }
}
