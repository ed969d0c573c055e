/**
 * Cluster benchmark: REST writes (`POST /edge/management/v1/identities`, a new identity each, admin zt-session)
 * through a 3-node Keel cluster, beside a 3-member etcd cluster loaded through its JSON gateway (`POST
 * /v3/kv/put`, a value as long as Keel's identity body) in the same run, with the same load generator (wrk,
 * threads spread over the three members' ports) at the same concurrencies; then kill -9 failover trials on Keel.
 * Like Keel's, etcd's peer links are mutual TLS (`--etcd-peer-plain`: plain HTTP, as before 2026-11-26).
 *
 *   npm run bench -- cluster [--quick] [--trials 20] [--concurrency 16,64,256] [--via all|leader|followers]
 *                            [--etcd-peer-plain] [--warmup S] [--rounds R] [--raft-wal-mib N]
 *
 * `--raft-wal-mib N` starts Keel's nodes with that flag (0: no Raft write-ahead file, every Raft write a synced
 * LevelDB batch), for comparing the two ways of writing the log.
 *
 * Both clusters are up together; each level runs once per round, Keel's and etcd's back to back (Keel first in odd
 * rounds, etcd first in even ones), so each ratio pairs two measurements taken seconds apart. With R > 1 the
 * comparison gives each concurrency's median over the rounds and the range of the per-round ratios.
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
  /** Times each level runs on each system, Keel and etcd alternating (`--rounds R`, 1..MAX_ROUNDS; default 1). */
  rounds: number;
  /** Keel nodes' `--raft-wal-mib` (undefined: the nodes' default). */
  raftWal_mib?: number;
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
/** At most 9 rounds: a level's name prefix carries its round as one digit (levelPrefix). */
const MAX_ROUNDS = 9;
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
    rounds: 1,
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
    else if (a === '--rounds') opts.rounds = Number(argv[++i]);
    else if (a === '--raft-wal-mib') opts.raftWal_mib = Number(argv[++i]);
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
  if (!Number.isInteger(opts.rounds) || opts.rounds < 1 || opts.rounds > MAX_ROUNDS) {
    throw new Error(`--rounds must be an integer in 1..${MAX_ROUNDS}`);
  }
  if (opts.raftWal_mib !== undefined && !(Number.isInteger(opts.raftWal_mib) && opts.raftWal_mib >= 0)) {
    throw new Error('--raft-wal-mib takes a non-negative integer (MiB; 0: no write-ahead file)');
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

function describe(name: string, r: WrkResult, round: string): string {
  const errors = r.httpErrors + r.socketErrors;
  return (
    `  ${name} c=${r.connections}${round} (${r.threads} wrk threads, ${r.perPort.join('/')} connections per member): ` +
    `${fmt(r.writesPerSec)} writes/s, p50 ${fmt(r.p50_ms, 2)} ms, p99 ${fmt(r.p99_ms, 2)} ms ` +
    `(p90 ${fmt(r.p90_ms, 2)}, p99.9 ${fmt(r.p999_ms, 2)}), max ` +
    `${fmt(r.max_ms, 1)} ms${errors > 0 ? `, ERRORS: ${r.httpErrors} HTTP ≥ 400, ${r.socketErrors} socket` : ', 0 errors'}`
  );
}

/**
 * The name prefix of one load level: the system's initial, the round (one digit; the warm-up is round 0 at c = 0)
 * and the concurrency (base 36, three digits: up to 46 655), five characters at every level, so that every request
 * body has the same size, and the same as before rounds (59-byte bodies).
 */
export const levelPrefix = (name: string, round: number, c: number) =>
  `${name[0]}${round}${c.toString(36).padStart(3, '0')}`;

/** One system under load: its name in the report, its wrk target, the processes whose CPU a write costs. */
interface System {
  name: 'keel' | 'etcd';
  target: Target;
  procs: Accounted[];
  /** The highest Raft term of the members (Keel only): a change under load is an election. */
  maxTerm?: () => Promise<number>;
}

/** Loads `s` at concurrency `c` for `duration_s` and prints the level (and the CPU each member used per write). */
async function loadLevel(
  s: System,
  c: number,
  round: number,
  rounds: number,
  duration_s: number,
  dir: string,
): Promise<WrkResult> {
  const before = await s.maxTerm?.();
  const cpu = startAccounting(s.procs);
  const r = await runWrk(s.target, c, duration_s, levelPrefix(s.name, round, c), dir);
  const after = await s.maxTerm?.();
  // A term change under load is an election a busy (not dead) leader should not have suffered.
  const terms = before === undefined || after === undefined ? '' : `, term changes ${after - before}`;
  console.log(describe(s.name, r, rounds > 1 ? ` round ${round}` : '') + terms);
  const perWrite = cpu.per(r.requests);
  if (perWrite !== null) console.log(`    ${perWrite}`);
  return r;
}

/**
 * The order of the systems in round `round` (from 1): Keel first in odd rounds, etcd first in even ones, so that
 * neither always runs just after the other's load.
 */
export function roundOrder<T>(keel: T, etcd: T | null, round: number): T[] {
  if (etcd === null) return [keel];
  return round % 2 === 1 ? [keel, etcd] : [etcd, keel];
}

/** The median of `xs` (the mean of the middle two for an even count); NaN for none. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** One concurrency's measurements: one result per round, Keel's and etcd's (empty without etcd). */
export interface LevelRounds {
  c: number;
  keel: WrkResult[];
  etcd: WrkResult[];
}

/** Keel ÷ etcd per round (writes/s and p99), paired round by round. */
export function roundRatios(level: LevelRounds): { writes: number[]; p99: number[] } {
  const writes: number[] = [];
  const p99: number[] = [];
  for (let i = 0; i < Math.min(level.keel.length, level.etcd.length); i++) {
    writes.push(level.keel[i]!.writesPerSec / level.etcd[i]!.writesPerSec);
    p99.push(level.keel[i]!.p99_ms / level.etcd[i]!.p99_ms);
  }
  return { writes, p99 };
}

const errorsOf = (rs: WrkResult[]) => rs.reduce((sum, r) => sum + r.httpErrors + r.socketErrors, 0);
const range = (xs: number[]) => `${fmt(Math.min(...xs), 2)}–${fmt(Math.max(...xs), 2)}`;

function printComparison(levels: LevelRounds[], rounds: number): void {
  const widths = [5, 10, 8, 8, 7, 10, 8, 8, 7, 11, 11, 8];
  console.log('');
  if (rounds > 1) {
    console.log(
      `medians over ${rounds} rounds; the k÷e columns are the medians of the per-round ratios (each pairs Keel and ` +
        'etcd measured seconds apart), not ratios of the medians beside them; errors: the sum over the rounds',
    );
  }
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
  for (const level of levels) {
    const k = level.keel;
    const e = level.etcd;
    const has = e.length > 0;
    const ratios = roundRatios(level);
    const wr = median(ratios.writes);
    const pr = median(ratios.p99);
    const met = !has ? 'n/a' : wr >= TARGET_WRITES_RATIO && pr <= 1 ? 'met' : 'NOT met';
    const med = (rs: WrkResult[], f: (r: WrkResult) => number, digits?: number) => fmt(median(rs.map(f)), digits);
    console.log(
      row(
        [
          String(level.c),
          med(k, (r) => r.writesPerSec),
          med(k, (r) => r.p50_ms, 2),
          med(k, (r) => r.p99_ms, 2),
          String(errorsOf(k)),
          has ? med(e, (r) => r.writesPerSec) : 'n/a',
          has ? med(e, (r) => r.p50_ms, 2) : '-',
          has ? med(e, (r) => r.p99_ms, 2) : '-',
          has ? String(errorsOf(e)) : '-',
          has ? `${fmt(wr, 2)}x` : 'n/a',
          has ? `${fmt(pr, 2)}x` : 'n/a',
          met,
        ],
        widths,
      ),
    );
  }
  if (rounds > 1 && levels.some((l) => l.etcd.length > 0)) {
    for (const level of levels) {
      const { writes, p99 } = roundRatios(level);
      console.log(
        `  c=${level.c} per round: w/s k÷e ${writes.map((x) => fmt(x, 2)).join(' / ')} (${range(writes)}), ` +
          `p99 k÷e ${p99.map((x) => fmt(x, 2)).join(' / ')} (${range(p99)})`,
      );
    }
  }
  console.log(
    `target: keel writes/s ≥ ${TARGET_WRITES_RATIO}× etcd's and keel p99 ≤ etcd's (p99 k÷e ≤ 1) at every concurrency` +
      `${rounds > 1 ? ', judged on the median ratios' : ''}. ` +
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
  const bound_s = 300 + opts.trials * 45 + opts.rounds * opts.concurrencies.length * 2 * (duration_s + 15);
  const watchdog = setTimeout(() => {
    console.error(`cluster benchmark exceeded its bound of ${bound_s} s: stopping everything`);
    process.exit(1);
  }, bound_s * 1000);
  watchdog.unref();

  const keelBodyBytes = keelBody('x'.repeat(nameLength(levelPrefix('keel', 1, 16)))).length;
  console.log(
    `cluster benchmark: 3 Keel nodes vs 3 etcd members, wrk to ${opts.via === 'all' ? 'all members' : `the ${opts.via}`}, ` +
      `c = ${opts.concurrencies.join('/')}, ` +
      `${duration_s} s per level, ${opts.rounds} round${opts.rounds > 1 ? 's' : ''}, ` +
      `${opts.trials} failover trials${opts.quick ? ' (quick)' : ''}; ` +
      `keel peer links mutual TLS, etcd ${describeEtcdPeers(opts.etcdPeers)}; ` +
      `load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
  );
  try {
    console.log(
      `· keel: 3 processes, fsync on, peer links mutual TLS; POST /edge/management/v1/identities, ${keelBodyBytes}-byte bodies`,
    );
    const version = etcdVersion();
    console.log(
      version === null
        ? '· etcd: NOT INSTALLED (apt-get install etcd-server): no baseline'
        : `· etcd ${version}: 3 members, fsync on, ${describeEtcdPeers(opts.etcdPeers)}; ` +
            `POST /v3/kv/put, ${keelBodyBytes}-byte values`,
    );
    let cluster: KeelBenchCluster | null = null;
    const levels: LevelRounds[] = opts.concurrencies.map((c) => ({ c, keel: [], etcd: [] }));
    const trials: Trial[] = [];
    try {
      const nodeArgs = opts.raftWal_mib === undefined ? [] : ['--raft-wal-mib', String(opts.raftWal_mib)];
      cluster = await KeelBenchCluster.start(join(base, 'keel'), (n) => nodes.add(n), nodeArgs);
      const token = await cluster.login();
      const leader = await cluster.agreedLeader(token);
      const keelSystem: System = {
        name: 'keel',
        target: { kind: 'keel', ports: viaPorts(cluster.ports, leader, opts.via), token },
        procs: cluster.nodes.map((n, i) => ({ name: `${n.spec.id}${i === leader ? '*' : ''}`, pid: n.child.pid ?? 0 })),
        maxTerm: () => cluster!.maxTerm(),
      };
      // Both clusters are up before the first level: each level then runs on both, back to back (roundOrder).
      let etcdSystem: System | null = null;
      if (version !== null) {
        etcd = await EtcdCluster.start(join(base, 'etcd'), await freePorts(6), opts.etcdPeers);
        const e = etcd;
        etcdSystem = {
          name: 'etcd',
          target: {
            kind: 'etcd',
            ports: viaPorts(e.clientPorts, e.clientPorts.indexOf(e.leaderPort), opts.via),
            valueB64: Buffer.alloc(keelBodyBytes, 42).toString('base64'),
          },
          procs: e.pids.map((pid, i) => ({ name: `e${i + 1}${e.clientPorts[i] === e.leaderPort ? '*' : ''}`, pid })),
        };
      }
      for (const s of roundOrder(keelSystem, etcdSystem, 1)) {
        await runWrk(s.target, Math.min(16, opts.concurrencies[0]!), warmup_s, levelPrefix(s.name, 0, 0), base);
      }
      for (let round = 1; round <= opts.rounds; round++) {
        for (const level of levels) {
          for (const s of roundOrder(keelSystem, etcdSystem, round)) {
            const r = await loadLevel(s, level.c, round, opts.rounds, duration_s, base);
            level[s.name].push(r);
          }
        }
      }
      await etcd?.stop();
      etcd = null;
      // Every acknowledged create must be on every member. The count also holds the admin, the warm-up's creates
      // and creates still in flight when wrk stopped, so the measured levels' successes are a lower bound.
      const acked = levels.reduce((sum, l) => sum + l.keel.reduce((n, r) => n + r.requests - r.httpErrors, 0), 0);
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
      await etcd?.stop();
      await cluster?.stop();
    }

    printComparison(levels, opts.rounds);
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
