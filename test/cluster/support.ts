/** Helpers for the process-level cluster tests: a cluster of real `keel run` processes, load, polling. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { preparePeerPki } from '../../src/cluster/local.js';
import { type MemberStatus, type PeerTlsOptions, peerClient } from '../../src/cluster/peer-api.js';
import { type NodeProcess, type NodeSpec, startNode } from '../../src/cluster/processes.js';
import { loadPeerTlsOptions } from '../../src/pki/index.js';
import { withTimeout } from '../../src/util/timeout.js';
import { ADMIN_PASSWORD, call, login } from '../support/server.js';
import { trustCa } from '../support/tls-call.js';

export { ADMIN_PASSWORD, call, login };

/** The CLI runs the compiled code: build it (incremental, a no-op when nothing changed). */
export function buildOnce(): void {
  execFileSync(process.execPath, [join(import.meta.dirname, '..', '..', 'scripts', 'build.mjs')], { stdio: 'inherit' });
}

export const mgmt = (n: NodeProcess) => `${n.base}/edge/management/v1`;

export interface TestCluster {
  dir: string;
  nodes: NodeProcess[];
  /** Restarts a stopped member on its data dir and peer port (a new API port). */
  restart(i: number, extraArgs?: string[]): Promise<NodeProcess>;
}

/** Starts `size` members (peer mutual TLS, certificates as `keel cluster init` / `keel pki issue-node` make them). */
export async function startCluster(size: number, extraArgs: string[] = []): Promise<TestCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'keel-cluster-'));
  const nodes: NodeProcess[] = [];
  await preparePeerPki(
    Array.from({ length: size }, (_, i) => `n${i + 1}`),
    (id) => join(dir, id),
  );
  const t = await loadPeerTlsOptions(join(dir, 'n1', 'pki'));
  // every member's API certificate chains to the one cluster root (their bundles carry it): call() trusts it
  trustCa(t.ca);
  clientTls = t;
  const spec = (i: number, start?: NodeSpec['start'], peerPort = 0): NodeSpec => ({
    id: `n${i + 1}`,
    dataDir: join(dir, `n${i + 1}`),
    apiPort: 0,
    peerPort,
    ...(start ? { start } : {}),
    ...(i === 0 ? { adminPassword: ADMIN_PASSWORD } : {}),
    extraArgs,
  });
  nodes.push(await startNode(spec(0, { init: true })));
  for (let i = 1; i < size; i++) nodes.push(await startNode(spec(i, { join: nodes[0]!.peerAddress })));
  return {
    dir,
    nodes,
    async restart(i) {
      const port = Number(nodes[i]!.peerAddress.split(':').at(-1));
      nodes[i] = await startNode(spec(i, undefined, port));
      return nodes[i]!;
    },
  };
}

/** The peer TLS material the tests' own peer API calls present (the first member's certificate). */
let clientTls: PeerTlsOptions | undefined;

export async function memberStatus(n: NodeProcess): Promise<MemberStatus> {
  const c = peerClient(n.peerAddress, clientTls);
  try {
    return await withTimeout(c.api.status.query(), 5_000, `status of ${n.spec.id}`);
  } finally {
    c.close();
  }
}

/** Polls `fn` until it returns a truthy value, at most `timeout_ms`. */
export async function until<T>(fn: () => Promise<T> | T, timeout_ms: number, what: string): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeout_ms;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out after ${timeout_ms} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

/**
 * POSTs `body` to `url`, asking again while the answer carries Retry-After (503 for a leadership change under load,
 * a transfer not done within its bound), as a client told Retry-After would, at most `timeout_ms`; resolves with the
 * first other answer.
 */
export function postUntilNot503(
  url: string,
  token: string,
  body: unknown,
  timeout_ms: number,
  what: string,
): Promise<Awaited<ReturnType<typeof call>>> {
  return until(
    async () => {
      const res = await call('POST', url, { token, body });
      return res.status === 503 || res.headers.get('retry-after') !== null ? null : res;
    },
    timeout_ms,
    what,
  );
}

export const alive = (n: NodeProcess) => n.child.exitCode === null && n.child.signalCode === null;

/** The index of the current leader among `nodes` (asking the first live one that knows it). */
export async function leaderIndex(nodes: NodeProcess[]): Promise<number> {
  return until(
    async () => {
      for (const n of nodes.filter(alive)) {
        const s = await memberStatus(n);
        if (s.leader) {
          const i = nodes.findIndex((x) => x.spec.id === s.leader);
          if (i >= 0 && alive(nodes[i]!)) return i + 1;
        }
      }
      return 0;
    },
    15_000,
    'a leader',
  ).then((i) => i - 1);
}

export interface Load {
  /** Names whose create was acknowledged (201). */
  acked: string[];
  /** Statuses other than 201, with counts. */
  failures: Map<string, number>;
  /** Each failure: node, status, the error envelope's code and message. */
  details: string[];
  stop(): Promise<void>;
}

/**
 * `concurrency` loops creating identities through the nodes `targets()` returns (round robin), until stopped.
 * A request that could not be sent (connection refused) is not a failure; any answer other than 201 is.
 */
export function writeLoad(targets: () => NodeProcess[], token: () => string, prefix: string, concurrency = 6): Load {
  const acked: string[] = [];
  const failures = new Map<string, number>();
  const details: string[] = [];
  let running = true;
  let seq = 0;
  const loop = async (k: number) => {
    while (running) {
      const ts = targets();
      const n = ts[seq % ts.length]!;
      const name = `${prefix}-${k}-${seq++}`;
      let r: Awaited<ReturnType<typeof call>>;
      try {
        r = await call('POST', `${mgmt(n)}/identities`, {
          token: token(),
          body: { name, type: 'User', isAdmin: false },
        });
      } catch {
        await new Promise((res) => setTimeout(res, 20));
        continue;
      }
      if (r.status === 201) acked.push(name);
      else {
        const key = `${r.status} ${r.body?.error?.code ?? ''}`;
        failures.set(key, (failures.get(key) ?? 0) + 1);
        if (details.length < 100) details.push(`${n.spec.id} ${key} ${r.body?.error?.message ?? r.text.slice(0, 200)}`);
        await new Promise((res) => setTimeout(res, 50));
      }
    }
  };
  const loops = Array.from({ length: concurrency }, (_, k) => loop(k));
  return {
    acked,
    failures,
    details,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** Every identity name on a node that contains `prefix`, page by page. */
export async function namesOn(n: NodeProcess, token: string, prefix: string): Promise<string[]> {
  const filter = encodeURIComponent(`name contains "${prefix}"`);
  const names: string[] = [];
  // pages of the largest size a list serves (500), until the total is read; bounded by the page count
  for (let page = 0; page < 1_000; page++) {
    const url = `${mgmt(n)}/identities?filter=${filter}&limit=500&offset=${page * 500}`;
    const r = await call('GET', url, { token });
    if (r.status !== 200) throw new Error(`list on ${n.spec.id}: ${r.status} ${r.text}`);
    for (const x of r.body.data as { name: string }[]) names.push(x.name);
    if (names.length >= r.body.meta.pagination.totalCount || r.body.data.length === 0) return names;
  }
  throw new Error(`list on ${n.spec.id}: more than 1 000 pages`);
}
