/**
 * Raft benchmark: three Keel nodes in three processes (LevelDB log, WebSocket transport on loopback) against a
 * three-member etcd cluster on the same machine, plus the single-node synced LevelDB floor. Always prints
 * keel ÷ floor; keel ÷ etcd when etcd is installed.
 *
 *   node dist/bench/raft/run.js [--quick] [--payload 256] [--concurrency 1,16,64,256] [--etcd-gateway]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describeEtcdPeers, EtcdCluster, etcdVersion } from './etcd.js';
import { levelDbFloor } from './floor.js';
import { KeelCluster } from './keel-cluster.js';
import type { LoadResult } from './stats.js';

export interface BenchOptions {
  quick: boolean;
  payload_bytes: number;
  concurrencies: number[];
  /** Load etcd through its HTTP/JSON gateway instead of gRPC. */
  etcdGateway: boolean;
}

export function parseArgs(argv: string[]): BenchOptions {
  const opts: BenchOptions = {
    quick: false,
    payload_bytes: 256,
    concurrencies: [1, 16, 64, 256],
    etcdGateway: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--quick') opts.quick = true;
    else if (a === '--payload') opts.payload_bytes = Number(argv[++i]);
    else if (a === '--concurrency') opts.concurrencies = String(argv[++i]).split(',').map(Number);
    else if (a === '--etcd-gateway') opts.etcdGateway = true;
    else if (a === 'raft') continue;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!(opts.payload_bytes > 0) || opts.concurrencies.some((c) => !(c > 0 && c <= 4096))) {
    throw new Error('bad --payload or --concurrency');
  }
  return opts;
}

export async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<import('node:net').Server>((resolve, reject) => {
          const s = createServer();
          s.once('error', reject);
          s.listen(0, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as import('node:net').AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

export function fmt(n: number, digits = 0): string {
  return Number.isFinite(n) ? n.toFixed(digits) : '-';
}

export function row(cells: string[], widths: number[]): string {
  return cells.map((c, i) => c.padStart(widths[i]!)).join('  ');
}

export async function main(argv: string[]): Promise<void> {
  const opts = parseArgs(argv);
  const warmup_ms = opts.quick ? 300 : 1000;
  const duration_ms = opts.quick ? 1000 : 4000;
  const concurrencies = opts.quick ? opts.concurrencies.filter((c) => c === 1 || c === 64) : opts.concurrencies;
  const base = mkdtempSync(join(tmpdir(), 'keel-bench-raft-'));
  const started = Date.now();
  console.log(
    `raft benchmark: payload ${opts.payload_bytes} B, concurrency ${concurrencies.join('/')}, ` +
      `${duration_ms / 1000} s per level${opts.quick ? ' (quick)' : ''}`,
  );
  try {
    console.log('· single-node LevelDB synced group-commit floor …');
    const floor = await levelDbFloor(concurrencies, opts.payload_bytes, warmup_ms, duration_ms);

    console.log('· keel: 3 processes, LevelDB logs, WebSocket transport on loopback …');
    const keel: LoadResult[] = [];
    const cluster = await KeelCluster.start(join(base, 'keel'), await freePorts(3), 50);
    try {
      for (const c of concurrencies) {
        keel.push(await cluster.load({ concurrency: c, payload_bytes: opts.payload_bytes, warmup_ms, duration_ms }));
      }
    } finally {
      await cluster.stop();
    }

    const version = etcdVersion();
    let etcd: LoadResult[] | null = null;
    if (version === null) {
      console.log('· etcd: NOT INSTALLED (apt-get install -y etcd-server) — ratio to the floor only');
    } else {
      const via = opts.etcdGateway ? 'the HTTP/JSON gateway (keep-alive)' : 'gRPC (one HTTP/2 connection)';
      // plain peers on both sides here: this benchmark's Keel transport is plain WebSockets (no TLS configured)
      console.log(
        `· etcd ${version}: 3 members on loopback, ${describeEtcdPeers('plain')}, puts to the leader via ${via} …`,
      );
      try {
        const e = await EtcdCluster.start(join(base, 'etcd'), await freePorts(6), 'plain');
        const results: LoadResult[] = [];
        try {
          for (const c of concurrencies) {
            results.push(
              opts.etcdGateway
                ? await e.loadGateway(c, opts.payload_bytes, warmup_ms, duration_ms)
                : await e.loadGrpc(c, opts.payload_bytes, warmup_ms, duration_ms),
            );
          }
        } finally {
          await e.stop();
        }
        etcd = results;
      } catch (err) {
        console.log(`· etcd baseline FAILED (${(err as Error).message}) — ratio to the floor only`);
      }
    }

    const widths = [5, 10, 8, 8, 10, 8, 8, 10, 10, 8, 8, 11];
    console.log('');
    console.log(
      row(
        [
          'conc',
          'keel op/s',
          'p50 ms',
          'p99 ms',
          'etcd op/s',
          'p50 ms',
          'p99 ms',
          'keel÷etcd',
          'floor op/s',
          'p50 ms',
          'p99 ms',
          'keel÷floor',
        ],
        widths,
      ),
    );
    for (const [i, c] of concurrencies.entries()) {
      const k = keel[i]!;
      const e = etcd?.[i];
      const f = floor[i]!;
      console.log(
        row(
          [
            String(c),
            fmt(k.opsPerSec),
            fmt(k.p50_ms, 2),
            fmt(k.p99_ms, 2),
            e === undefined ? 'n/a' : fmt(e.opsPerSec),
            e === undefined ? '-' : fmt(e.p50_ms, 2),
            e === undefined ? '-' : fmt(e.p99_ms, 2),
            e === undefined ? 'n/a' : `${fmt(k.opsPerSec / e.opsPerSec, 2)}x`,
            fmt(f.opsPerSec),
            fmt(f.p50_ms, 2),
            fmt(f.p99_ms, 2),
            `${fmt(k.opsPerSec / f.opsPerSec, 2)}x`,
          ],
          widths,
        ),
      );
      if (k.errors > 0 || (e?.errors ?? 0) > 0) console.log(`      errors: keel ${k.errors}, etcd ${e?.errors ?? 0}`);
    }
    console.log('');
    console.log(
      'keel÷floor = keel op/s ÷ the floor: one LevelDB, no replication, every write in a synced group-commit batch ' +
        '(the most a durable log on this disk allows; measured in this run).',
    );
    if (etcd !== null) {
      console.log(
        'keel÷etcd = keel op/s ÷ etcd op/s (same payload, same outstanding requests). NOT like for like: keel ' +
          'proposals are issued inside the leader process (no client hop), while etcd puts come from this process ' +
          `over loopback ${opts.etcdGateway ? 'HTTP/JSON' : 'gRPC'}, so every etcd put pays a client round trip keel's ` +
          'proposals do not.',
      );
    }
    console.log('every process shares this machine’s cores: absolute figures depend on its load.');
    console.log(`total ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).catch((err: Error) => {
    console.error(err.stack ?? err.message);
    process.exit(1);
  });
}
