/**
 * Cluster benchmark: REST writes (`POST /edge/management/v1/identities`, a new identity each, admin zt-session)
 * through a 3-node Keel cluster, beside a 3-member etcd cluster loaded through its JSON gateway (`POST
 * /v3/kv/put`, a value as long as Keel's identity body) in the same run, with the same load generator (wrk,
 * threads spread over the three members' ports) at the same concurrencies; then kill -9 failover trials on Keel.
 * Like Keel's, etcd's peer links are mutual TLS (`--etcd-peer-plain`: plain HTTP, as before 2026-11-26).
 *
 *   npm run bench -- cluster [--quick] [--trials 20] [--concurrency 16,64,256] [--via all|leader|followers]
 *                            [--etcd-peer-plain] [--warmup S]
 *
 * Everything started here is stopped at the end, also on failure or Ctrl-C; the run is bounded in time.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NodeProcess } from '../../src/cluster/processes.js';
import { describeEtcdPeers, EtcdCluster, type EtcdPeers, etcdVersion } from '../raft/etcd.js';
import { fmt, freePorts, row } from '../raft/run.js';
import { LatencySamples } from '../raft/stats.js';
import { type Accounted, startAccounting } from './cpu.js';
import { failoverTrial, type Trial } from './failover.js';
import { alive, KeelBenchCluster } from './keel.js';
import { keelBody, nameLength, runWrk, type Target, WRK, type WrkResult, wrkChildren } from './wrk.js';

export interface ClusterBenchOptions {
  quick: boolean;
  trials: number;
  concurrencies: number[];
  /** Which members' ports the load goes to: all three (the default), only the leader, or only the followers. */
  via: Via;
  /** etcd's peer links: mutual TLS like Keel's (the default), or plain HTTP (`--etcd-peer-plain`). */
  etcdPeers: EtcdPeers;
  /** Seconds of load at c = 16 before the first measured level, the same for both systems (3; `--quick` 1). */
  warmup_s: number;
}

type Via = 'all' | 'leader' | 'followers';
const VIAS: readonly Via[] = ['all', 'leader', 'followers'];

/** The ports to load, of `ports` where `leader` is the leader's index. */
export function viaPorts(ports: number[], leader: number, via: Via): number[] {
  if (via === 'all') return ports;
  return via === 'leader' ? [ports[leader]!] : ports.filter((_, i) => i !== leader);
}

const MAX_TRIALS = 1000;
const MAX_CONCURRENCY = 4096;
const MAX_WARMUP_S = 600;
/** Target of issue 8: Keel ≥ 2× etcd's writes/s with a p99 no worse than etcd's; failover p99 ≤ 1.5 s. */
const TARGET_WRITES_RATIO = 2;
const TARGET_FAILOVER_P99_MS = 1500;

export function parseClusterArgs(argv: string[]): ClusterBenchOptions {
  const opts: ClusterBenchOptions = {
    quick: false,
    trials: 0,
    concurrencies: [16, 64, 256],
    via: 'all',
    etcdPeers: 'tls',
    warmup_s: 3,
  };
  let trials: number | undefined;
  let warmup_s: number | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--quick') opts.quick = true;
    else if (a === '--trials') trials = Number(argv[++i]);
    else if (a === '--concurrency') opts.concurrencies = String(argv[++i]).split(',').map(Number);
    else if (a === '--etcd-peer-plain') opts.etcdPeers = 'plain';
    else if (a === '--warmup') warmup_s = Number(argv[++i]);
    else if (a === '--via') {
      const v = argv[++i] as Via;
      if (!VIAS.includes(v)) throw new Error(`--via takes ${VIAS.join('|')}`);
      opts.via = v;
    } else throw new Error(`unknown argument ${a}`);
  }
  opts.trials = trials ?? (opts.quick ? 3 : 20);
  opts.warmup_s = warmup_s ?? (opts.quick ? 1 : 3);
  if (!Number.isInteger(opts.warmup_s) || opts.warmup_s < 1 || opts.warmup_s > MAX_WARMUP_S) {
    throw new Error(`--warmup must be an integer in 1..${MAX_WARMUP_S} (seconds)`);
  }
  if (!Number.isInteger(opts.trials) || opts.trials < 0 || opts.trials > MAX_TRIALS) {
    throw new Error(`--trials must be an integer in 0..${MAX_TRIALS}`);
  }
  const bad = opts.concurrencies.some((c) => !Number.isInteger(c) || c < 1 || c > MAX_CONCURRENCY);
  // each level's identity names carry its concurrency: a level given twice would create the same names again
  if (bad || new Set(opts.concurrencies).size !== opts.concurrencies.length) {
    throw new Error(`--concurrency takes distinct integers in 1..${MAX_CONCURRENCY}, comma separated`);
  }
  return opts;
}

function describe(name: string, r: WrkResult): string {
  const errors = r.httpErrors + r.socketErrors;
  return (
    `  ${name} c=${r.connections} (${r.threads} wrk threads, ${r.perPort.join('/')} connections per member): ` +
    `${fmt(r.writesPerSec)} writes/s, p50 ${fmt(r.p50_ms, 2)} ms, p99 ${fmt(r.p99_ms, 2)} ms ` +
    `(p90 ${fmt(r.p90_ms, 2)}, p99.9 ${fmt(r.p999_ms, 2)}), max ` +
    `${fmt(r.max_ms, 1)} ms${errors > 0 ? `, ERRORS: ${r.httpErrors} HTTP ≥ 400, ${r.socketErrors} socket` : ', 0 errors'}`
  );
}

/** The name prefix of one load level (the warm-up is level 0): the same length at every level. */
const levelPrefix = (name: string, c: number) => `${name[0]}${String(c).padStart(4, '0')}`;

/** Loads `target` at each concurrency after a short warm-up, printing each level as it completes. */
async function loadLevels(
  name: string,
  target: Target,
  opts: ClusterBenchOptions,
  duration_s: number,
  warmup_s: number,
  dir: string,
  procs: Accounted[],
  maxTerm?: () => Promise<number>,
): Promise<WrkResult[]> {
  await runWrk(target, Math.min(16, opts.concurrencies[0]!), warmup_s, levelPrefix(name, 0), dir);
  const out: WrkResult[] = [];
  for (const c of opts.concurrencies) {
    const before = await maxTerm?.();
    const cpu = startAccounting(procs);
    const r = await runWrk(target, c, duration_s, levelPrefix(name, c), dir);
    const after = await maxTerm?.();
    // A term change under load is an election a busy (not dead) leader should not have suffered.
    const terms = before === undefined || after === undefined ? '' : `, term changes ${after - before}`;
    console.log(describe(name, r) + terms);
    const perWrite = cpu.per(r.requests);
    if (perWrite !== null) console.log(`    ${perWrite}`);
    out.push(r);
  }
  return out;
}

function printComparison(concurrencies: number[], keel: WrkResult[], etcd: WrkResult[] | null): void {
  const widths = [5, 10, 8, 8, 7, 10, 8, 8, 7, 11, 11, 8];
  console.log('');
  console.log(
    row(
      [
        'conc',
        'keel w/s',
        'p50 ms',
        'p99 ms',
        'errors',
        'etcd w/s',
        'p50 ms',
        'p99 ms',
        'errors',
        'w/s k÷e',
        'p99 k÷e',
        'target',
      ],
      widths,
    ),
  );
  for (const [i, c] of concurrencies.entries()) {
    const k = keel[i]!;
    const e = etcd?.[i];
    const wr = e ? k.writesPerSec / e.writesPerSec : Number.NaN;
    const pr = e ? k.p99_ms / e.p99_ms : Number.NaN;
    const met = e === undefined ? 'n/a' : wr >= TARGET_WRITES_RATIO && pr <= 1 ? 'met' : 'NOT met';
    console.log(
      row(
        [
          String(c),
          fmt(k.writesPerSec),
          fmt(k.p50_ms, 2),
          fmt(k.p99_ms, 2),
          String(k.httpErrors + k.socketErrors),
          e ? fmt(e.writesPerSec) : 'n/a',
          e ? fmt(e.p50_ms, 2) : '-',
          e ? fmt(e.p99_ms, 2) : '-',
          e ? String(e.httpErrors + e.socketErrors) : '-',
          e ? `${fmt(wr, 2)}x` : 'n/a',
          e ? `${fmt(pr, 2)}x` : 'n/a',
          met,
        ],
        widths,
      ),
    );
  }
  console.log(
    `target: keel writes/s ≥ ${TARGET_WRITES_RATIO}× etcd's and keel p99 ≤ etcd's (p99 k÷e ≤ 1) at every concurrency. ` +
      'errors = HTTP ≥ 400 + socket errors (counted, not in the writes/s).',
  );
}

const failures = (m: Map<string, number>) =>
  m.size === 0
    ? 'none'
    : [...m].map(([status, n]) => `${n} × ${status === 'error' ? 'no answer' : `HTTP ${status}`}`).join(', ');

function printFailover(trials: Trial[]): void {
  if (trials.length === 0) return;
  const samples = new LatencySamples();
  for (const t of trials) if (t.recovery_ms !== null) samples.add(t.recovery_ms);
  const failed = trials.filter((t) => t.recovery_ms === null).length;
  const min = Math.min(...trials.flatMap((t) => (t.recovery_ms === null ? [] : [t.recovery_ms])));
  console.log('');
  console.log(
    `failover (kill -9 of the leader → first successful write through a survivor), ${trials.length} trials: ` +
      `min ${fmt(min)} ms, p50 ${fmt(samples.percentile(50))} ms, p99 ${fmt(samples.percentile(99))} ms, ` +
      `max ${fmt(samples.percentile(100))} ms${failed > 0 ? `, ${failed} trials with no write within 30 s` : ''}`,
  );
  const killed = new Map<string, number>();
  for (const t of trials) killed.set(t.killed, (killed.get(t.killed) ?? 0) + 1);
  const perMember = [...killed].sort(([a], [b]) => (a < b ? -1 : 1)).map(([id, n]) => `${id} × ${n}`);
  console.log(`killed: ${perMember.join(', ')}`);
  const met = failed === 0 && samples.percentile(99) <= TARGET_FAILOVER_P99_MS;
  console.log(`target p99 ≤ ${TARGET_FAILOVER_P99_MS} ms: ${met ? 'met' : 'NOT met'}`);
}

export async function main(argv: string[]): Promise<void> {
  const opts = parseClusterArgs(argv);
  if (WRK === undefined) throw new Error('the cluster benchmark needs wrk (apt-get install wrk)');
  const duration_s = opts.quick ? 3 : 10;
  const warmup_s = opts.warmup_s;
  const started = Date.now();
  const base = mkdtempSync(join(tmpdir(), 'keel-bench-cluster-'));

  // Everything this run starts, so that any exit (error, Ctrl-C, the time bound) stops it.
  const nodes = new Set<NodeProcess>();
  let etcd: EtcdCluster | null = null;
  const killAll = () => {
    for (const w of wrkChildren) w.kill('SIGKILL');
    for (const n of nodes) if (alive(n)) n.child.kill('SIGKILL');
    etcd?.killNow();
    rmSync(base, { recursive: true, force: true });
  };
  const onSignal = (sig: NodeJS.Signals) => {
    console.error(`\n${sig}: stopping everything this benchmark started`);
    process.exit(sig === 'SIGINT' ? 130 : 143);
  };
  process.on('exit', killAll);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const bound_s = 300 + opts.trials * 45 + opts.concurrencies.length * 2 * (duration_s + 15);
  const watchdog = setTimeout(() => {
    console.error(`cluster benchmark exceeded its bound of ${bound_s} s: stopping everything`);
    process.exit(1);
  }, bound_s * 1000);
  watchdog.unref();

  const keelBodyBytes = keelBody('x'.repeat(nameLength(levelPrefix('keel', 16)))).length;
  console.log(
    `cluster benchmark: 3 Keel nodes vs 3 etcd members, wrk to ${opts.via === 'all' ? 'all members' : `the ${opts.via}`}, ` +
      `c = ${opts.concurrencies.join('/')}, ` +
      `${duration_s} s per level, ${opts.trials} failover trials${opts.quick ? ' (quick)' : ''}; ` +
      `keel peer links mutual TLS, etcd ${describeEtcdPeers(opts.etcdPeers)}; ` +
      `load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
  );
  try {
    console.log(
      `· keel: 3 processes, fsync on, peer links mutual TLS; POST /edge/management/v1/identities, ${keelBodyBytes}-byte bodies`,
    );
    let cluster: KeelBenchCluster | null = null;
    let keel: WrkResult[] = [];
    const trials: Trial[] = [];
    try {
      cluster = await KeelBenchCluster.start(join(base, 'keel'), (n) => nodes.add(n));
      const token = await cluster.login();
      const leader = await cluster.agreedLeader(token);
      const ports = viaPorts(cluster.ports, leader, opts.via);
      const procs = cluster.nodes.map((n, i) => ({
        name: `${n.spec.id}${i === leader ? '*' : ''}`,
        pid: n.child.pid ?? 0,
      }));
      keel = await loadLevels('keel', { kind: 'keel', ports, token }, opts, duration_s, warmup_s, base, procs, () =>
        cluster!.maxTerm(),
      );
      // Every acknowledged create must be on every member. The count also holds the admin, the warm-up's creates
      // and creates still in flight when wrk stopped, so the measured levels' successes are a lower bound.
      const acked = keel.reduce((sum, r) => sum + r.requests - r.httpErrors, 0);
      const { counts, agreed } = await cluster.identityCounts(token);
      console.log(
        `  identities on n1/n2/n3: ${counts.join('/')} (${agreed ? 'agreed' : 'NOT AGREED within 30 s'}); ` +
          `successful creates counted by wrk in the measured levels: ${acked}` +
          (agreed && counts[0]! >= acked ? '' : ' — FEWER IDENTITIES THAN ACKNOWLEDGED CREATES'),
      );
      if (opts.trials > 0) {
        console.log(`· keel failover: ${opts.trials} trials of kill -9 of the leader, trial k killing member k mod 3`);
      }
      for (let t = 0; t < opts.trials; t++) {
        const r = await failoverTrial(cluster, token, t, (n) => nodes.add(n));
        console.log(
          `  trial ${t + 1}: killed ${r.killed}${r.transferred ? ' (leader by transfer-leadership)' : ''}, ` +
            `first write after ${r.recovery_ms === null ? 'NONE' : `${fmt(r.recovery_ms)} ms`}` +
            `; writes sent after the kill that failed: ${failures(r.failedAfterKill)}`,
        );
        trials.push(r);
      }
    } finally {
      await cluster?.stop();
    }

    let etcdResults: WrkResult[] | null = null;
    const version = etcdVersion();
    if (version === null) {
      console.log('· etcd: NOT INSTALLED (apt-get install etcd-server): no baseline');
    } else {
      console.log(
        `· etcd ${version}: 3 members, fsync on, ${describeEtcdPeers(opts.etcdPeers)}; ` +
          `POST /v3/kv/put, ${keelBodyBytes}-byte values`,
      );
      try {
        etcd = await EtcdCluster.start(join(base, 'etcd'), await freePorts(6), opts.etcdPeers);
        const valueB64 = Buffer.alloc(keelBodyBytes, 42).toString('base64');
        etcdResults = await loadLevels(
          'etcd',
          {
            kind: 'etcd',
            ports: viaPorts(etcd.clientPorts, etcd.clientPorts.indexOf(etcd.leaderPort), opts.via),
            valueB64,
          },
          opts,
          duration_s,
          warmup_s,
          base,
          etcd.pids.map((pid, i) => ({
            name: `e${i + 1}${etcd!.clientPorts[i] === etcd!.leaderPort ? '*' : ''}`,
            pid,
          })),
        );
      } finally {
        await etcd?.stop();
      }
    }

    printComparison(opts.concurrencies, keel, etcdResults);
    printFailover(trials);
    console.log(
      `every process shares this machine's cores (load average now ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}): ` + 'absolute figures depend on its load.',
    );
    console.log(`total ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    clearTimeout(watchdog);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('exit', killAll);
    killAll();
  }
}
