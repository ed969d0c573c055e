/**
 * REST writes through a 3-node Keel cluster (three `keel run` processes, peer mutual TLS, fsync on) beside a
 * 3-member etcd cluster in the same run: `POST /identities` to Keel's leader vs `POST /v3/kv/put` to etcd's JSON
 * gateway on its leader, same closed-loop load generator, request bodies of the same size; then failover: kill -9
 * of Keel's leader → first successful write through a survivor.
 *
 *   node dist/bench/cluster.js [--quick] [--concurrency 16,64,256] [--trials 20]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { preparePeerPki } from '../src/cluster/local.js';
import { type NodeProcess, type NodeSpec, startNode, stopNode } from '../src/cluster/processes.js';
import { EtcdCluster, etcdVersion, post } from './raft/etcd.js';
import { freePorts } from './raft/run.js';
import { closedLoop, LatencySamples, type LoadResult } from './raft/stats.js';

const PASSWORD = 'bench-admin-password';

function portOf(base: string): number {
  return Number(new URL(base).port);
}

function get(agent: Agent, port: number, path: string, token: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent, headers: { 'zt-session': token } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

async function login(port: number): Promise<string> {
  const agent = new Agent({ keepAlive: false });
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ username: 'admin', password: PASSWORD });
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/edge/management/v1/authenticate?method=password',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        res.resume();
        const token = res.headers['zt-session'];
        res.on('end', () =>
          typeof token === 'string' ? resolve(token) : reject(new Error(`login ${res.statusCode}`)),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The identity create body for write `n` (names stay unique across the run). */
function identityBody(run: string, n: number): string {
  return JSON.stringify({ name: `bench-${run}-${String(n).padStart(9, '0')}`, type: 'User', isAdmin: false });
}

class KeelBenchCluster {
  nodes: NodeProcess[] = [];
  private constructor(readonly dir: string) {}

  static async start(): Promise<KeelBenchCluster> {
    const c = new KeelBenchCluster(mkdtempSync(join(tmpdir(), 'keel-bench-cluster-')));
    await preparePeerPki(['n1', 'n2', 'n3'], (id) => join(c.dir, id));
    c.nodes.push(await startNode(c.spec(0, { init: true })));
    for (const i of [1, 2]) c.nodes.push(await startNode(c.spec(i, { join: c.nodes[0]!.peerAddress })));
    return c;
  }

  spec(i: number, start?: NodeSpec['start'], peerPort = 0): NodeSpec {
    return {
      id: `n${i + 1}`,
      dataDir: join(this.dir, `n${i + 1}`),
      apiPort: 0,
      peerPort,
      ...(start ? { start } : {}),
      ...(i === 0 ? { adminPassword: PASSWORD } : {}),
      extraArgs: ['--peer-tls'],
      env: { KEEL_LOG_LEVEL: 'error' },
    };
  }

  async restart(i: number): Promise<void> {
    const peerPort = Number(this.nodes[i]!.peerAddress.split(':').at(-1));
    this.nodes[i] = await startNode(this.spec(i, undefined, peerPort));
  }

  /** Index of the leader, from the fabric cluster API of a live member. */
  async leader(token: string): Promise<number> {
    const agent = new Agent({ keepAlive: false });
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      for (const n of this.nodes.filter((x) => x.child.exitCode === null && x.child.signalCode === null)) {
        try {
          const body = JSON.parse(await get(agent, portOf(n.base), '/fabric/v1/cluster/list-members', token));
          const id = (body.data as { id: string; leader: boolean }[]).find((m) => m.leader)?.id;
          const i = this.nodes.findIndex((x) => x.spec.id === id);
          if (i >= 0 && this.nodes[i]!.child.exitCode === null && this.nodes[i]!.child.signalCode === null) return i;
        } catch {
          // next member
        }
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('no leader');
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => stopNode(n)));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function keelLoad(port: number, token: string, concurrency: number, warmup_ms: number, duration_ms: number) {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const run = Math.random().toString(36).slice(2, 8);
  let seq = 0;
  try {
    return await closedLoop(concurrency, warmup_ms, duration_ms, async () => {
      await post(agent, port, '/edge/management/v1/identities', identityBody(run, ++seq), { 'zt-session': token }, 201);
    });
  } finally {
    agent.destroy();
  }
}

/** kill -9 of the leader → the first 201 through a survivor; the killed member is restarted after each trial. */
async function failover(c: KeelBenchCluster, token: string, trials: number): Promise<LatencySamples> {
  const samples = new LatencySamples();
  const agent = new Agent({ keepAlive: false });
  for (let t = 0; t < trials; t++) {
    const L = await c.leader(token);
    const survivor = c.nodes[(L + 1) % 3]!;
    const killed = c.nodes[L]!;
    const t0 = performance.now();
    killed.child.kill('SIGKILL');
    let n = 0;
    for (;;) {
      try {
        await post(
          agent,
          portOf(survivor.base),
          '/edge/management/v1/identities',
          identityBody(`fo${t}`, ++n),
          {
            'zt-session': token,
          },
          201,
        );
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 5));
      }
      if (performance.now() - t0 > 30_000) throw new Error('no write within 30 s of the kill');
    }
    samples.add(performance.now() - t0);
    await killed.exited;
    await c.restart(L);
  }
  return samples;
}

const fmt = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : 'n/a');

export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { quick: { type: 'boolean' }, concurrency: { type: 'string' }, trials: { type: 'string' } },
  });
  const quick = values.quick === true;
  const levels = (values.concurrency ?? (quick ? '16,64' : '16,64,256')).split(',').map(Number);
  const trials = Number(values.trials ?? (quick ? 3 : 20));
  const warmup_ms = quick ? 300 : 1000;
  const duration_ms = quick ? 1000 : 4000;
  const keel = await KeelBenchCluster.start();
  const etcdDir = mkdtempSync(join(tmpdir(), 'keel-bench-etcd-'));
  let etcd: EtcdCluster | null = null;
  try {
    const token = await login(portOf(keel.nodes[0]!.base));
    const L = await keel.leader(token);
    // etcd values sized so that its JSON body (base64 value) is as long as Keel's identity body
    const keelBody = Buffer.byteLength(identityBody('abcdef', 1));
    const etcdOverhead = Buffer.byteLength('{"key":"azEyMzQ1","value":""}');
    const valueBytes = Math.max(1, Math.floor(((keelBody - etcdOverhead) * 3) / 4));
    const version = etcdVersion();
    if (version) etcd = await EtcdCluster.start(etcdDir, await freePorts(6));
    console.log(
      `Keel 3-node cluster (mutual TLS, fsync on) vs etcd ${version ?? '(not installed)'}; body ${keelBody} B`,
    );
    console.log('concurrency | keel req/s | keel p50/p99 ms | etcd req/s | etcd p50/p99 ms | keel ÷ etcd');
    for (const c of levels) {
      const k: LoadResult = await keelLoad(portOf(keel.nodes[L]!.base), token, c, warmup_ms, duration_ms);
      const e = etcd ? await etcd.loadGateway(c, valueBytes, warmup_ms, duration_ms) : null;
      const ratio = e ? (k.opsPerSec / e.opsPerSec).toFixed(2) : 'n/a';
      console.log(
        `${c} | ${k.opsPerSec.toFixed(0)} (${k.errors} err) | ${fmt(k.p50_ms)} / ${fmt(k.p99_ms)} | ` +
          `${e ? e.opsPerSec.toFixed(0) : 'n/a'} | ${e ? `${fmt(e.p50_ms)} / ${fmt(e.p99_ms)}` : 'n/a'} | ${ratio}×`,
      );
    }
    const fo = await failover(keel, token, trials);
    console.log(
      `failover (kill -9 of the leader → first successful write), ${trials} trials: ` +
        `p50 ${fmt(fo.percentile(50))} ms, p99 ${fmt(fo.percentile(99))} ms, max ${fmt(fo.percentile(100))} ms`,
    );
  } finally {
    await etcd?.stop();
    rmSync(etcdDir, { recursive: true, force: true });
    await keel.stop();
  }
}
