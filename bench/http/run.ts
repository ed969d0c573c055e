/**
 * Read-path benchmark: authenticated GET /edge/management/v1/identities?limit=10 and GET
 * /edge/client/v1/current-identity on one Keel node, each beside a bare uWebSockets.js app serving a static JSON
 * body of the same size, measured in the same run at several concurrencies. The figure that matters is the
 * ratio Keel / bare. A controller in use also writes, and every write invalidates the render cache the reads hit:
 * at some concurrencies the same reads run again with a steady stream of writes mixed in (1 % and 10 % of the
 * requests, synced PATCHes of identities), still against the bare baseline. Then: an indexed-equality list over
 * 100k identities, beside a full-scan filter.
 *
 *   npm run bench -- http [--quick] [--identities 100000]
 *
 * Servers run in child processes; the load generator (autocannon) runs here, so on two cores each side has one.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { parseArgs, promisify } from 'node:util';
// @ts-expect-error autocannon ships no type declarations
import autocannon from 'autocannon';
import { spawnChild, stopChild } from '../child.js';

const here = import.meta.dirname;
const execFileAsync = promisify(execFile);

interface Measure {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

const WRK = ['/usr/bin/wrk', '/usr/local/bin/wrk'].find((p) => existsSync(p));

/** wrk's duration text (`123.45us`, `1.20ms`, `2.00s`) in milliseconds. */
function wrkMs(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (!m) return Number.NaN;
  const n = Number(m[1]);
  return m[2] === 'us' ? n / 1000 : m[2] === 'ms' ? n : m[2] === 's' ? n * 1000 : n * 60_000;
}

/** Load from one generator thread: wrk when installed (C, far cheaper per request), else autocannon. */
async function load(
  url: string,
  connections: number,
  duration_s: number,
  headers: Record<string, string> = {},
): Promise<Measure> {
  if (WRK) {
    const args = ['-t1', `-c${connections}`, `-d${duration_s}s`, '--latency'];
    for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}: ${v}`);
    args.push(url);
    // asynchronous, so that a writer in this process keeps running during the load (mixed points)
    const { stdout: out } = await execFileAsync(WRK, args, { encoding: 'utf8' });
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
    const p50 = wrkMs(/\s50%\s+(\S+)/.exec(out)?.[1] ?? '');
    const p99 = wrkMs(/\s99%\s+(\S+)/.exec(out)?.[1] ?? '');
    const errors =
      Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0) +
      Number(/Socket errors:.*?timeout (\d+)/.exec(out)?.[1] ?? 0);
    return { rps, p50, p99, errors };
  }
  const r = await autocannon({ url, connections, duration: duration_s, headers, pipelining: 1 });
  const non2xx = r.non2xx + r.errors + r.timeouts;
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: non2xx };
}

/** Write shares of the requests mixed into the read load (1 % and 10 %). */
const WRITE_SHARES = [0.01, 0.1];
/** At most this many writes in flight: a controller that cannot keep up gets fewer writes, reported as such. */
const MAX_WRITES_IN_FLIGHT = 64;
/** The writer's pacing tick. */
const WRITE_TICK_MS = 10;

/**
 * Runs `read()` while PATCHing identities at a steady `writes_per_s` (paced every WRITE_TICK_MS, at most
 * MAX_WRITES_IN_FLIGHT at once). Every write changes the store, so every cached rendering goes stale.
 */
async function withWrites(
  port: number,
  auth: Record<string, string>,
  ids: string[],
  writes_per_s: number,
  read: () => Promise<Measure>,
): Promise<{ reads: Measure; writes_per_s: number; writeErrors: number }> {
  let done = 0;
  let errors = 0;
  let inFlight = 0;
  let due = 0;
  let seq = 0;
  const write = async () => {
    inFlight++;
    const id = ids[seq++ % ids.length]!;
    try {
      const r = await fetch(`http://127.0.0.1:${port}/edge/management/v1/identities/${id}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json', ...auth },
        body: JSON.stringify({ tags: { write: String(seq) } }),
      });
      await r.arrayBuffer();
      if (r.status === 200) done++;
      else errors++;
    } catch {
      errors++;
    } finally {
      inFlight--;
    }
  };
  const started = performance.now();
  const timer = setInterval(() => {
    due += (writes_per_s * WRITE_TICK_MS) / 1000;
    while (due >= 1 && inFlight < MAX_WRITES_IN_FLIGHT) {
      due -= 1;
      void write();
    }
    due = Math.min(due, MAX_WRITES_IN_FLIGHT); // do not build up a burst while the controller lags
  }, WRITE_TICK_MS);
  const reads = await read();
  clearInterval(timer);
  const elapsed_s = (performance.now() - started) / 1000;
  while (inFlight > 0) await new Promise((r) => setTimeout(r, 5));
  return { reads, writes_per_s: done / elapsed_s, writeErrors: errors };
}

async function login(port: number): Promise<string> {
  const r = await fetch(`http://127.0.0.1:${port}/edge/management/v1/authenticate?method=password`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'admin', password: 'bench-password' }),
  });
  return r.headers.get('zt-session')!;
}

function fmt(m: Measure): string {
  const ms = (x: number) => (x < 10 ? x.toFixed(2) : x.toFixed(1)).padStart(5);
  return `${m.rps.toFixed(0).padStart(7)} req/s  p50 ${ms(m.p50)} ms  p99 ${ms(m.p99)} ms${m.errors ? `  (${m.errors} errors!)` : ''}`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { quick: { type: 'boolean' }, identities: { type: 'string', default: '100000' } },
  });
  const duration_s = values.quick ? 2 : 5;
  const concurrencies = values.quick ? [1, 32] : [1, 16, 64, 256];
  const mixedAt = new Set(values.quick ? [32] : [16, 64]);
  console.log(
    `Keel read benchmark — ${new Date().toISOString()}, node ${process.version}, ${duration_s}s per point, load: ${WRK ? 'wrk -t1' : 'autocannon'}`,
  );

  const keel = await spawnChild('keel-child.js', [], here);
  const token = await login(keel.port);
  const auth = { 'zt-session': token };
  const targets = [
    { name: 'GET /edge/management/v1/identities?limit=10', path: '/edge/management/v1/identities?limit=10' },
    { name: 'GET /edge/client/v1/current-identity', path: '/edge/client/v1/current-identity' },
  ];
  // populate a few identities so that the list has a full page (the mixed points write to them)
  const ids: string[] = [];
  for (let i = 0; i < 12; i++) {
    const r = await fetch(`http://127.0.0.1:${keel.port}/edge/management/v1/identities`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth },
      body: JSON.stringify({ name: `bench-id-${i}`, type: 'User', isAdmin: false, roleAttributes: ['bench'] }),
    });
    ids.push(((await r.json()) as { data: { id: string } }).data.id);
  }
  for (const t of targets) {
    const url = `http://127.0.0.1:${keel.port}${t.path}`;
    const size = (await (await fetch(url, { headers: auth })).text()).length;
    const bare = await spawnChild('bare-child.js', [String(size)], here);
    console.log(`\n${t.name}  (response ${size} bytes; baseline: bare uWebSockets.js, static ${size}-byte JSON)`);
    for (const c of concurrencies) {
      const k = await load(url, c, duration_s, auth);
      const b = await load(`http://127.0.0.1:${bare.port}/`, c, duration_s);
      console.log(
        `  c=${String(c).padStart(3)}  keel ${fmt(k)}   bare ${fmt(b)}   ratio ${(k.rps / b.rps).toFixed(2)}`,
      );
      if (!mixedAt.has(c)) continue;
      for (const share of WRITE_SHARES) {
        // aim at `share` of the requests, from the read-only rate just measured
        const m = await withWrites(keel.port, auth, ids, (k.rps * share) / (1 - share), () =>
          load(url, c, duration_s, auth),
        );
        const actual = m.writes_per_s / (m.writes_per_s + m.reads.rps);
        const label = `+${(share * 100).toFixed(0)}% writes`.padStart(11);
        console.log(
          `  ${label}  keel ${fmt(m.reads)}   + ${m.writes_per_s.toFixed(0)} writes/s (achieved ${(actual * 100).toFixed(1)}% of requests${m.writeErrors ? `, ${m.writeErrors} failed!` : ''})   ratio to bare ${(m.reads.rps / b.rps).toFixed(2)}`,
        );
      }
    }
    await stopChild(bare);
  }
  await stopChild(keel);

  const n = Number(values.identities);
  if (n > 0) {
    const big = await spawnChild('keel-child.js', ['--identities', String(n)], here);
    const loaded = big.lines.find((l) => l.startsWith('LOADED'))!.split(' ');
    console.log(`\n${n} identities: preload ${loaded[2]} ms; controller cold start with them ${loaded[3]} ms`);
    const t = { 'zt-session': await login(big.port) };
    const q = (f: string) =>
      `http://127.0.0.1:${big.port}/edge/management/v1/identities?filter=${encodeURIComponent(f)}`;
    const indexed = q(`name = "bench-${Math.floor(n / 2)}"`);
    const scan = q(`name contains "bench-${Math.floor(n / 2)}"`);
    const check = (await (await fetch(indexed, { headers: t })).json()) as { data: unknown[] };
    if (check.data.length !== 1) throw new Error('indexed lookup did not find the identity');
    const a = await load(indexed, 1, duration_s, t);
    const b = await load(scan, 1, duration_s, t);
    console.log(`  indexed equality   name = "…"        ${fmt(a)}`);
    console.log(
      `  full scan          name contains "…" ${fmt(b)}   (indexed / scan speed-up ${(a.rps / b.rps).toFixed(1)}x)`,
    );
    const attr = q('anyOf(roleAttributes) = "group-7"');
    const c = await load(attr, 1, duration_s, t);
    console.log(`  indexed set        anyOf(roleAttributes) = "group-7" (${n / 100} matches, page of 10) ${fmt(c)}`);
    await stopChild(big);
  }
}

await main();
