/**
 * Simulator command line.
 *   node dist/raft/sim/cli.js --seeds 1..2000       run a range of seeds, print totals, stop at the first violation
 *   node dist/raft/sim/cli.js --seed 42 [--verbose] replay one seed (with --verbose: every event)
 * Options: --chaos-ms N (override the chaos phase length), --report-every N (seeds per progress line).
 * Exit status: 0 when every seed passed, 1 on a violation, 2 on bad usage.
 */
import { emptyStats, runSimulation, type SimResult, type SimStats } from './cluster.js';

interface CliArgs {
  from: number;
  to: number;
  verbose: boolean;
  chaosMs: number | undefined;
  reportEvery: number;
}

function usage(msg: string): never {
  process.stderr.write(`${msg}\nusage: sim (--seeds A..B | --seed N) [--verbose] [--chaos-ms N] [--report-every N]\n`);
  process.exit(2);
}

function parseArgs(argv: string[]): CliArgs {
  const args: CliArgs = { from: 1, to: 100, verbose: false, chaosMs: undefined, reportEvery: 1000 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      const v = argv[++i];
      if (v === undefined) usage(`${a} needs a value`);
      return v;
    };
    if (a === '--seeds') {
      const m = /^(\d+)\.\.(\d+)$/.exec(next());
      if (!m) usage('--seeds expects A..B');
      args.from = Number(m[1]);
      args.to = Number(m[2]);
    } else if (a === '--seed') {
      const n = Number(next());
      if (!Number.isSafeInteger(n) || n < 0) usage('--seed expects a non-negative integer');
      args.from = n;
      args.to = n;
    } else if (a === '--verbose') {
      args.verbose = true;
    } else if (a === '--chaos-ms') {
      args.chaosMs = Number(next());
    } else if (a === '--report-every') {
      args.reportEvery = Math.max(1, Number(next()));
    } else {
      usage(`unknown argument ${a}`);
    }
  }
  if (args.to < args.from) usage('empty seed range');
  return args;
}

function emptyTotals(): SimStats & { seeds: number } {
  return { seeds: 0, ...emptyStats() };
}

function add(t: SimStats & { seeds: number }, s: SimStats): void {
  t.seeds++;
  for (const k of Object.keys(s) as (keyof SimStats)[]) {
    if (k === 'recoveryElectionTimeouts' || k === 'convergenceElectionTimeouts') t[k] = Math.max(t[k], s[k]);
    else t[k] += s[k];
  }
}

function line(label: string, t: SimStats & { seeds: number }, ms: number): string {
  const perMin = ms > 0 ? Math.round((t.seeds / ms) * 60_000) : 0;
  return (
    `${label}: seeds=${t.seeds} steps=${t.steps} elections=${t.elections} proposals=${t.proposals} ` +
    `acknowledged=${t.acked} crashes=${t.crashes} partitions=${t.partitions} ` +
    `snapshots=${t.snapshotsCreated}/${t.snapshotsInstalled} (created/installed) confChanges=${t.confChanges} ` +
    `transfers=${t.transfers} reads=${t.reads} singleVoter=${t.singleVoterCommits}/${t.singleVoterReads} (commits/reads) ` +
    `commitsLost=${t.commitsLost} commitsRaised=${t.commitsRaised} appAheadRestarts=${t.appAheadRestarts} leaderWritesLost=${t.leaderWritesLost} held=${t.held} ` +
    `maxRecovery=${t.recoveryElectionTimeouts.toFixed(1)} maxConvergence=${t.convergenceElectionTimeouts.toFixed(1)} election timeouts | ${(ms / 1000).toFixed(1)}s, ${perMin} seeds/min`
  );
}

function reportFailure(r: SimResult): void {
  process.stdout.write(`\nVIOLATION at seed ${r.seed}: ${r.violation}\n  params: ${r.params}\n`);
  // Replay the seed with tracing on (runs are deterministic) to show the last events.
  const replay = runSimulation({ seed: r.seed, trace: true });
  if (replay.violation !== r.violation) {
    process.stdout.write(`  (replay differed: ${replay.violation ?? 'passed'})\n`);
  }
  process.stdout.write(`  last events:\n${replay.trace.map((l) => `    ${l}`).join('\n')}\n`);
  process.stdout.write(`  replay: npm run sim -- --seed ${r.seed} --verbose\n`);
}

function main(): void {
  // `... --verbose | head` closes stdout early: stop quietly.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
  const args = parseArgs(process.argv.slice(2));
  const verbose = args.verbose ? (l: string) => process.stdout.write(`${l}\n`) : undefined;
  const total = emptyTotals();
  let chunk = emptyTotals();
  const t0 = performance.now();
  let tChunk = t0;
  for (let seed = args.from; seed <= args.to; seed++) {
    const r = runSimulation({ seed, verbose, chaosMs: args.chaosMs });
    add(total, r.stats);
    add(chunk, r.stats);
    if (!r.ok) {
      reportFailure(r);
      process.stdout.write(`${line('totals before failure', total, performance.now() - t0)}\n`);
      process.exit(1);
    }
    if (args.from === args.to) process.stdout.write(`seed ${seed} ok\n  params: ${r.params}\n`);
    if (chunk.seeds >= args.reportEvery) {
      const now = performance.now();
      process.stdout.write(`${line(`seeds ${seed - chunk.seeds + 1}..${seed}`, chunk, now - tChunk)}\n`);
      chunk = emptyTotals();
      tChunk = now;
    }
  }
  process.stdout.write(`${line(`all seeds ${args.from}..${args.to}`, total, performance.now() - t0)}\n`);
}

main();
