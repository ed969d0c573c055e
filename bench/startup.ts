/**
 * `npm run bench -- startup [--quick] [--identities N] [--services S] [--routers R] [--policies P] [--rounds K]`:
 * how long a single node takes to start on a data directory holding the access benchmark's data (bench/data.ts:
 * 100 000 identities, 10 000 services, 1 000 edge routers, 2 000 policies by default), from `keel run` being
 * spawned to the line that prints its API URLs (store opened, every row read into its collection, every derived
 * index rebuilt, the HTTP listener up), beside a baseline measured in the same run: a Node process that opens the
 * same LevelDB and reads every entry (keys and values as bytes, nothing decoded), the floor of any start that
 * reads its state from this database. Rounds alternate the two; medians printed, and their ratio. Also: the same
 * start on the data directory before the data was written (the fixed cost: Node, modules, the PKI, listening), the
 * node's resident memory once it is ready, and the start's cost per row above that fixed cost.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KEEL_BIN, NODE_HEAP_FLAGS, nodeFlags } from '../src/cluster/processes.js';
import { buildSchema } from '../src/model/index.js';
import { Store } from '../storage/store.js';
import { applyAll, benchCommands, type DataSizes, dataSizes } from './data.js';
import { benchOptions } from './options.js';

const { quick, opt } = benchOptions(process.argv.slice(2));
const SIZES: DataSizes = dataSizes(opt, quick);
const ROUNDS = opt('--rounds', quick ? 2 : 3);
/** Bound on one start (or one baseline scan): a start slower than this fails the benchmark. */
const START_TIMEOUT_MS = 120_000;
/** Bound on a node's stop after SIGTERM; past it, SIGKILL. */
const STOP_TIMEOUT_MS = 30_000;
const READY_LINE = 'Client API:';
const PROJECT_ROOT = join(import.meta.dirname, '..', '..');

interface Started {
  ready_ms: number;
  rss_bytes: number;
}

/** Spawns `keel run` on `dataDir`, resolves once it printed its API URLs; stops it (SIGTERM) before resolving. */
function startKeel(dataDir: string): Promise<Started> {
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [
      // the heap flags every node starts with, and KEEL_NODE_FLAGS (e.g. --cpu-prof to profile the start)
      ...nodeFlags(),
      KEEL_BIN,
      'run',
      '--data-dir',
      dataDir,
      '--listen',
      '127.0.0.1:0',
      '--insecure-http',
      '--admin-password',
      'startup-bench-pw',
    ],
    { env: { ...process.env, KEEL_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => {
    err = (err + d).slice(-8192);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise<Started>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`keel did not start within ${START_TIMEOUT_MS} ms:\n${err}`));
    }, START_TIMEOUT_MS);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (!out.includes(READY_LINE)) reject(new Error(`keel exited (${code}) before it started:\n${out}\n${err}`));
    });
    child.stdout.on('data', (d) => {
      if (out.includes(READY_LINE)) return;
      out += d;
      if (!out.includes(READY_LINE)) return;
      const ready_ms = performance.now() - t0;
      const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      clearTimeout(timer);
      child.kill('SIGTERM');
      // a node that does not stop within the bound is killed: the next round must not meet it
      const kill = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      void exited.then(() => {
        clearTimeout(kill);
        resolve({ ready_ms, rss_bytes: rss ? Number(rss[1]) * 1024 : 0 });
      });
    });
  });
}

/** The baseline: a Node process that reads every entry of the LevelDB at `dir`; resolves with its wall time. */
function rawScan(dir: string): Promise<{ scan_ms: number; entries: number }> {
  const script = `
    import { ClassicLevel } from 'classic-level';
    const db = new ClassicLevel(process.argv[1], { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    let entries = 0, bytes = 0;
    for await (const [k, v] of db.iterator()) { entries++; bytes += k.length + v.length; }
    await db.close();
    console.log(entries, bytes);`;
  const t0 = performance.now();
  const child = spawn(process.execPath, [...NODE_HEAP_FLAGS, '--input-type=module', '-e', script, dir], {
    cwd: PROJECT_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  child.stderr.on('data', (d) => {
    err = (err + d).slice(-8192);
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), START_TIMEOUT_MS);
    child.once('exit', (code) => {
      clearTimeout(timer);
      const scan_ms = performance.now() - t0;
      const entries = Number(out.trim().split(' ')[0]);
      if (code !== 0 || !Number.isInteger(entries)) reject(new Error(`raw scan failed (${code}):\n${err}`));
      else resolve({ scan_ms, entries });
    });
  });
}

function dirBytes(dir: string): number {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    total += e.isDirectory() ? dirBytes(p) : statSync(p).size;
  }
  return total;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const dataDir = mkdtempSync(join(tmpdir(), 'keel-bench-startup-'));
try {
  // the first start initialises the data directory (PKI, admin, built-in rows): the fixed cost's data
  await startKeel(dataDir);
  const empty: number[] = [];
  for (let r = 0; r < ROUNDS; r++) empty.push((await startKeel(dataDir)).ready_ms);

  const t0 = performance.now();
  const store = await Store.open(join(dataDir, 'state'), buildSchema());
  await applyAll(store, benchCommands(SIZES));
  await store.flush();
  await store.close();
  const written_s = (performance.now() - t0) / 1000;
  const rows = SIZES.identities + SIZES.services + SIZES.routers + SIZES.policies + 1;

  const keel: Started[] = [];
  const scans: number[] = [];
  let entries = 0;
  for (let r = 0; r < ROUNDS; r++) {
    // alternated, so both meet the same state of the machine and of the page cache
    keel.push(await startKeel(dataDir));
    const scan = await rawScan(join(dataDir, 'state'));
    scans.push(scan.scan_ms);
    entries = scan.entries;
  }
  const ready = median(keel.map((k) => k.ready_ms));
  const scan = median(scans);
  const fixed = median(empty);
  const fmt = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(' / ');
  console.log(
    `startup: ${SIZES.identities} identities, ${SIZES.services} services, ${SIZES.routers} edge routers, ` +
      `${SIZES.policies + 1} policies (${rows} rows, written in ${written_s.toFixed(1)} s); the state's LevelDB ` +
      `${(dirBytes(join(dataDir, 'state')) / 2 ** 20).toFixed(0)} MiB, ${entries} entries; ${ROUNDS} rounds`,
  );
  console.log(
    `  keel run → APIs listening: ${ready.toFixed(0)} ms (median; rounds ${fmt(keel.map((k) => k.ready_ms))}), ` +
      `resident ${(median(keel.map((k) => k.rss_bytes)) / 2 ** 20).toFixed(0)} MiB once ready`,
  );
  console.log(`  the same on the data directory before the data (fixed cost): ${fixed.toFixed(0)} ms (${fmt(empty)})`);
  console.log(
    `  baseline, a node process reading every LevelDB entry (no decoding): ${scan.toFixed(0)} ms (${fmt(scans)})`,
  );
  console.log(
    `  keel ÷ baseline: ${(ready / scan).toFixed(2)}x; keel's start above its fixed cost: ` +
      `${(((ready - fixed) * 1000) / rows).toFixed(1)} µs per row`,
  );
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
