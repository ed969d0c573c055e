/**
 * Write load with wrk: one wrk process whose threads are spread over the cluster's three HTTP ports (wrk's
 * `setup()` sets each thread's address), each request a POST with a body of fixed size and a unique name/key
 * generated in Lua. The same generator loads Keel and etcd; only the request shape differs.
 */
import { type ChildProcess, execFile } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const WRK = ['/usr/bin/wrk', '/usr/local/bin/wrk'].find((p) => existsSync(p));

/** At most this many wrk threads: enough to spread any concurrency over three ports, few enough for 2 cores. */
const MAX_WRK_THREADS = 16;
/** A request slower than this counts as a wrk timeout error (and is missing from the latency figures). */
const WRK_TIMEOUT_S = 10;

export type Target =
  | { kind: 'keel'; ports: number[]; token: string }
  /** etcd's JSON gateway; `valueB64` is the base64 of a value as long as Keel's identity body. */
  | { kind: 'etcd'; ports: number[]; valueB64: string };

export interface WrkResult {
  connections: number;
  threads: number;
  /** Connections per port, in the order of `ports`. */
  perPort: number[];
  requests: number;
  /** Responses with status ≥ 400 (wrk's status errors; Keel answers 201, etcd 200). */
  httpErrors: number;
  /** Connect, read, write and timeout errors. */
  socketErrors: number;
  duration_s: number;
  /** Successful writes per second (responses below 400). */
  writesPerSec: number;
  p50_ms: number;
  /** Where the tail starts: p90 and p99.9 beside the p99 (diagnosis; the targets use p99). */
  p90_ms: number;
  p99_ms: number;
  p999_ms: number;
  max_ms: number;
}

/** The names every request uses: `<prefix>-<thread, 2 digits>-<sequence, 9 digits>`, all the same length. */
export function nameLength(prefix: string): number {
  return `${prefix}-00-000000000`.length;
}

/** Keel's identity body for a name (the Lua script builds exactly this). */
export function keelBody(name: string): string {
  return `{"name":"${name}","type":"User","isAdmin":false}`;
}

/** The largest thread count ≤ MAX_WRK_THREADS that divides `connections` (wrk gives each thread c / t). */
export function wrkThreads(connections: number): number {
  for (let t = Math.min(MAX_WRK_THREADS, connections); t > 1; t--) if (connections % t === 0) return t;
  return 1;
}

function luaScript(target: Target, prefix: string): string {
  if (!/^[a-z0-9]+$/.test(prefix)) throw new Error(`bad prefix ${prefix}`);
  const common = `
local ports = { ${target.ports.join(', ')} }
local prefix = "${prefix}"
local count = 0
function setup(thread)
  count = count + 1
  thread.addr = wrk.lookup("127.0.0.1", tostring(ports[(count - 1) % #ports + 1]))[1]
  thread:set("tid", count)
end
local seq = 0
local function nextName()
  seq = seq + 1
  return string.format("%s-%02d-%09d", prefix, tid, seq)
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRKRESULT %d %d %d %d %d %d %d %.0f %.0f %.0f %.0f %.0f\\n", summary.requests,
    summary.duration, e.connect, e.read, e.write, e.status, e.timeout, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9), latency.max))
end
`;
  if (target.kind === 'keel') {
    if (!/^[\w.-]+$/.test(target.token)) throw new Error('unexpected zt-session token format');
    return `${common}
local headers = { ["Content-Type"] = "application/json", ["zt-session"] = "${target.token}" }
function request()
  return wrk.format("POST", "/edge/management/v1/identities", headers,
    '{"name":"' .. nextName() .. '","type":"User","isAdmin":false}')
end
`;
  }
  if (!/^[A-Za-z0-9+/=]+$/.test(target.valueB64)) throw new Error('bad base64 value');
  return `${common}
local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function b64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local q = { math.floor(n / 262144) % 64, math.floor(n / 4096) % 64, math.floor(n / 64) % 64, n % 64 }
    for k = 1, 4 do out[#out + 1] = alphabet:sub(q[k] + 1, q[k] + 1) end
    if c == nil then out[#out] = "=" end
    if b == nil then out[#out - 1] = "=" end
  end
  return table.concat(out)
end
local headers = { ["Content-Type"] = "application/json" }
function request()
  return wrk.format("POST", "/v3/kv/put", headers,
    '{"key":"' .. b64(nextName()) .. '","value":"${target.valueB64}"}')
end
`;
}

/** Children started here, so that the caller can kill them if the run is aborted. */
export const wrkChildren = new Set<ChildProcess>();

export async function runWrk(
  target: Target,
  connections: number,
  duration_s: number,
  prefix: string,
  dir: string,
): Promise<WrkResult> {
  if (WRK === undefined) throw new Error('wrk is not installed (apt-get install wrk)');
  const threads = wrkThreads(connections);
  const script = join(dir, `${prefix}.lua`);
  writeFileSync(script, luaScript(target, prefix));
  const perPort = target.ports.map((_, i) => {
    let n = 0;
    for (let t = 0; t < threads; t++) if (t % target.ports.length === i) n += connections / threads;
    return n;
  });
  const args = [
    `-t${threads}`,
    `-c${connections}`,
    `-d${duration_s}s`,
    `--timeout`,
    `${WRK_TIMEOUT_S}s`,
    '-s',
    script,
    `http://127.0.0.1:${target.ports[0]}`,
  ];
  const stdout = await new Promise<string>((resolve, reject) => {
    const child = execFile(
      WRK,
      args,
      { encoding: 'utf8', timeout: (duration_s + WRK_TIMEOUT_S + 20) * 1000, killSignal: 'SIGKILL' },
      (err, out, errOut) => {
        wrkChildren.delete(child);
        if (err) reject(new Error(`wrk failed: ${err.message} ${errOut}`));
        else resolve(out);
      },
    );
    wrkChildren.add(child);
  });
  const m = /WRKRESULT((?: \d+){12})\n/.exec(stdout);
  if (!m) throw new Error(`wrk printed no result:\n${stdout}`);
  const [requests, duration_us, connect, read, write, status, timeout, p50_us, p90_us, p99_us, p999_us, max_us] = m[1]!
    .trim()
    .split(' ')
    .map(Number) as [number, number, number, number, number, number, number, number, number, number, number, number];
  const duration = duration_us / 1e6;
  return {
    connections,
    threads,
    perPort,
    requests,
    httpErrors: status,
    socketErrors: connect + read + write + timeout,
    duration_s: duration,
    writesPerSec: (requests - status) / duration,
    p50_ms: p50_us / 1000,
    p90_ms: p90_us / 1000,
    p99_ms: p99_us / 1000,
    p999_ms: p999_us / 1000,
    max_ms: max_us / 1000,
  };
}
