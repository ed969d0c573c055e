// HTTP-layer overhead benchmark: the same JSON served by a bare uWS app and through
// App + Router (+ envelope) on both engines. Each server runs in its own process and the load
// generator in another (autocannon; wrk too when installed).
//
// Two numbers per case:
// - requests/s seen by the client (bounded by the client when it saturates its core first);
// - server CPU time per request, read from /proc/<pid>/stat around the measured run: this one
//   does not depend on the client's speed and is the direct measure of per-request cost.
//
//   node dist/http/bench/overhead.js [--duration 10] [--connections 100] [--pipelining 1,10]
//                                     [--repeat 3] [--modes bare,uws,uws-envelope,node] [--wrk]
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { BENCH_PATH } from './overhead-server.js';

const MODES = ['bare', 'uws', 'uws-envelope', 'node'] as const;
const SERVER_START_TIMEOUT_MS = 10_000;
const CLOCK_TICKS_PER_S = 100;

interface Sample {
  client: 'autocannon' | 'wrk';
  mode: string;
  pipelining: number;
  requestsPerSecond: number;
  serverCpu_us_per_request: number;
  errors: number;
}

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : (process.argv[i + 1] ?? fallback);
}

/** utime + stime of a process, in clock ticks. */
function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

function startServer(mode: string): Promise<{ child: ChildProcess; port: number }> {
  const script = fileURLToPath(new URL('./overhead-server.js', import.meta.url));
  const child = spawn(process.execPath, [script, mode], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${mode} server did not start`)), SERVER_START_TIMEOUT_MS);
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = /PORT (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, port: Number(m[1]) });
      }
    });
    child.once('exit', (code) => reject(new Error(`${mode} server exited with ${code}`)));
  });
}

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} exited with ${code}`))));
  });
}

interface Load {
  total: number;
  duration_s: number;
  errors: number;
}

async function autocannon(url: string, connections: number, pipelining: number, duration_s: number): Promise<Load> {
  const bin = createRequire(import.meta.url).resolve('autocannon/autocannon.js');
  const out = await run(process.execPath, [
    bin,
    '-j',
    '-c',
    String(connections),
    '-p',
    String(pipelining),
    '-d',
    String(duration_s),
    url,
  ]);
  const r = JSON.parse(out);
  return { total: r.requests.total, duration_s: r.duration, errors: r.errors + r.non2xx };
}

async function wrk(url: string, connections: number, duration_s: number): Promise<Load> {
  const out = await run('wrk', ['-t1', `-c${connections}`, `-d${duration_s}s`, url]);
  const total = /(\d+) requests in ([\d.]+)s/.exec(out);
  if (!total) throw new Error(`cannot parse wrk output: ${out}`);
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  return { total: Number(total[1]), duration_s: Number(total[2]), errors: errors ? Number(errors[1]) : 0 };
}

async function measure(
  client: Sample['client'],
  mode: string,
  pipelining: number,
  connections: number,
  duration_s: number,
): Promise<Sample> {
  const { child, port } = await startServer(mode);
  try {
    const url = `http://127.0.0.1:${port}${BENCH_PATH}`;
    const load = (d: number) =>
      client === 'wrk' ? wrk(url, connections, d) : autocannon(url, connections, pipelining, d);
    await load(2); // warm-up (JIT, socket buffers)
    const before = cpuTicks(child.pid!);
    const r = await load(duration_s);
    const cpu_us = ((cpuTicks(child.pid!) - before) / CLOCK_TICKS_PER_S) * 1e6;
    return {
      client,
      mode,
      pipelining,
      requestsPerSecond: Math.round(r.total / r.duration_s),
      serverCpu_us_per_request: Math.round((cpu_us / r.total) * 100) / 100,
      errors: r.errors,
    };
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function hasWrk(): boolean {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
    return true;
  } catch (err) {
    return (err as { status?: number }).status === 1; // wrk --version exits 1 after printing
  }
}

async function main(): Promise<void> {
  const duration_s = Number(arg('duration', '10'));
  const connections = Number(arg('connections', '100'));
  const repeat = Number(arg('repeat', '3'));
  const pipelinings = arg('pipelining', '1,10').split(',').map(Number);
  const modes = arg('modes', MODES.join(',')).split(',');
  const clients: Sample['client'][] = ['autocannon'];
  if (process.argv.includes('--wrk') && hasWrk()) clients.push('wrk');

  const samples: Sample[] = [];
  for (let round = 0; round < repeat; round++) {
    for (const client of clients) {
      for (const p of client === 'wrk' ? [1] : pipelinings) {
        // rotate the order each round so background noise does not always hit the same mode
        const order = modes.map((_, i) => modes[(i + round) % modes.length]!);
        for (const mode of order) {
          const s = await measure(client, mode, p, connections, duration_s);
          samples.push(s);
          console.error(
            `round ${round + 1} ${client.padEnd(10)} p=${String(p).padEnd(2)} ${mode.padEnd(13)} ` +
              `${s.requestsPerSecond} req/s, server ${s.serverCpu_us_per_request} µs CPU/req`,
          );
        }
      }
    }
  }

  const summary: Record<string, unknown>[] = [];
  for (const client of clients) {
    for (const p of client === 'wrk' ? [1] : pipelinings) {
      for (const mode of modes) {
        const mine = samples.filter((s) => s.client === client && s.pipelining === p && s.mode === mode);
        summary.push({
          client,
          pipelining: p,
          mode,
          medianRequestsPerSecond: median(mine.map((s) => s.requestsPerSecond)),
          bestRequestsPerSecond: Math.max(...mine.map((s) => s.requestsPerSecond)),
          medianServerCpu_us_per_request: median(mine.map((s) => s.serverCpu_us_per_request)),
          errors: mine.reduce((a, s) => a + s.errors, 0),
        });
      }
    }
  }
  console.log(JSON.stringify({ path: BENCH_PATH, connections, duration_s, repeat, summary }, null, 2));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
