/**
 * Baseline: a 3-member etcd cluster on loopback (Debian's etcd-server), loaded with puts of the same payload,
 * sent to the leader either over etcd's native gRPC API (a minimal hand-rolled client on node:http2: one
 * multiplexed connection, protobuf PutRequest, like etcd's own clientv3) or through its HTTP/JSON gateway
 * (POST /v3/kv/put, keep-alive agents). The members' peer links are plain HTTP or mutual TLS (`peers`): with TLS
 * each member gets a peer certificate made for the run by Keel's own PKI (preparePeerPki: ECDSA P-256, SANs
 * 127.0.0.1/localhost, one cluster CA), the same kind Keel's peer links use. Clients always talk plain HTTP.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { type ClientHttp2Session, connect } from 'node:http2';
import { join } from 'node:path';
import { LOCAL_HOSTS, preparePeerPki } from '../../src/cluster/local.js';
import { PKI_FILES } from '../../src/pki/pki-dir.js';
import { closedLoop, type LoadResult } from './stats.js';

export function etcdVersion(): string | null {
  const r = spawnSync('etcd', ['--version'], { encoding: 'utf8' });
  if (r.error !== undefined || r.status !== 0) return null;
  return /etcd Version: (\S+)/.exec(r.stdout)?.[1] ?? 'unknown';
}

function post(agent: Agent, port: number, path: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode === 200) resolve(text);
          else reject(new Error(`etcd ${path}: HTTP ${res.statusCode} ${text.slice(0, 200)}`));
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function protoBytesField(tag: number, bytes: Buffer): Buffer {
  const len: number[] = [];
  let n = bytes.length;
  while (n >= 0x80) {
    len.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  len.push(n);
  return Buffer.concat([Buffer.from([tag, ...len]), bytes]);
}

/** etcdserverpb.KV/Put with PutRequest{ key = 1, value = 2 }; resolves on grpc-status 0. */
function grpcPut(session: ClientHttp2Session, key: Buffer, value: Buffer): Promise<void> {
  const msg = Buffer.concat([protoBytesField(0x0a, key), protoBytesField(0x12, value)]);
  const frame = Buffer.alloc(5 + msg.length);
  frame.writeUInt32BE(msg.length, 1);
  msg.copy(frame, 5);
  return new Promise((resolve, reject) => {
    const req = session.request({
      ':method': 'POST',
      ':path': '/etcdserverpb.KV/Put',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    let status: string | undefined;
    req.on('response', (h) => {
      if (h['grpc-status'] !== undefined) status = String(h['grpc-status']);
    });
    req.on('trailers', (h) => {
      status = String(h['grpc-status']);
    });
    req.on('data', () => undefined);
    req.on('error', reject);
    req.on('end', () => (status === '0' ? resolve() : reject(new Error(`etcd gRPC put: status ${status}`))));
    req.end(frame);
  });
}

/** How the members talk to each other: plain HTTP, or mutual TLS with certificates made for the run. */
export type EtcdPeers = 'plain' | 'tls';

/** What a run prints for `peers`. */
export function describeEtcdPeers(peers: EtcdPeers): string {
  return peers === 'tls' ? 'peer links mutual TLS (ECDSA P-256)' : 'peer links plain HTTP';
}

/**
 * The peer-link flags of member `name`: none for plain peers; else its certificate, key and the cluster CA from
 * `pkiDir(name)`, and peer certificates required and checked on both sides.
 */
function peerTlsFlags(peers: EtcdPeers, pkiDir: string): string[] {
  if (peers === 'plain') return [];
  return [
    `--peer-cert-file=${join(pkiDir, PKI_FILES.nodeCert)}`,
    `--peer-key-file=${join(pkiDir, PKI_FILES.nodeKey)}`,
    `--peer-trusted-ca-file=${join(pkiDir, PKI_FILES.caCert)}`,
    '--peer-client-cert-auth',
  ];
}

export class EtcdCluster {
  private constructor(
    private readonly procs: ChildProcess[],
    readonly clientPorts: number[],
    readonly leaderPort: number,
  ) {}

  /** The members' process ids (e1, e2, e3: the order of clientPorts). */
  get pids(): number[] {
    return this.procs.map((p) => p.pid ?? 0);
  }

  /** ports: 6 free ports (3 client, 3 peer); peers: plain HTTP or mutual TLS between members. */
  static async start(baseDir: string, ports: number[], peers: EtcdPeers): Promise<EtcdCluster> {
    const names = ['e1', 'e2', 'e3'];
    const client = ports.slice(0, 3);
    const peer = ports.slice(3, 6);
    // outside the members' data directories: etcd owns those
    const certsOf = (name: string) => join(baseDir, 'peer-certs', name);
    if (peers === 'tls') await preparePeerPki(names, certsOf, LOCAL_HOSTS);
    const scheme = peers === 'tls' ? 'https' : 'http';
    const initial = names.map((n, i) => `${n}=${scheme}://127.0.0.1:${peer[i]}`).join(',');
    const procs: ChildProcess[] = [];
    for (const [i, name] of names.entries()) {
      const dir = join(baseDir, name);
      mkdirSync(dir, { recursive: true });
      const proc = spawn(
        'etcd',
        [
          `--name=${name}`,
          `--data-dir=${dir}`,
          `--listen-client-urls=http://127.0.0.1:${client[i]}`,
          `--advertise-client-urls=http://127.0.0.1:${client[i]}`,
          `--listen-peer-urls=${scheme}://127.0.0.1:${peer[i]}`,
          `--initial-advertise-peer-urls=${scheme}://127.0.0.1:${peer[i]}`,
          ...peerTlsFlags(peers, join(certsOf(name), 'pki')),
          `--initial-cluster=${initial}`,
          '--initial-cluster-token=keel-bench',
          '--initial-cluster-state=new',
          '--logger=zap',
          '--log-level=error',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      proc.stderr?.on('data', (d: Buffer) => {
        if (stderr.length < 4096) stderr += d.toString('utf8');
      });
      proc.on('exit', (code, sig) => {
        if (code !== 0 && sig === null) process.stderr.write(`etcd ${name} exited ${code}: ${stderr}\n`);
      });
      procs.push(proc);
    }
    const agent = new Agent({ keepAlive: true, maxSockets: 3 });
    try {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const statuses = await Promise.all(
          client.map((p) =>
            post(agent, p, '/v3/maintenance/status', '{}')
              .then((t) => JSON.parse(t) as { header?: { member_id?: string }; leader?: string })
              .catch(() => null),
          ),
        );
        const i = statuses.findIndex(
          (s) => s?.leader !== undefined && s.leader !== '0' && s.header?.member_id === s.leader,
        );
        if (i >= 0) return new EtcdCluster(procs, client, client[i]!);
        if (Date.now() > deadline) throw new Error('etcd cluster did not elect a leader within 30 s');
        await new Promise((r) => setTimeout(r, 100));
      }
    } catch (err) {
      for (const p of procs) p.kill('SIGKILL');
      throw err;
    } finally {
      agent.destroy();
    }
  }

  /** Puts over gRPC (HTTP/2, protobuf) on one multiplexed connection to the leader. */
  async loadGrpc(
    concurrency: number,
    payload_bytes: number,
    warmup_ms: number,
    duration_ms: number,
  ): Promise<LoadResult> {
    const session = connect(`http://127.0.0.1:${this.leaderPort}`);
    await new Promise<void>((resolve, reject) => {
      session.once('connect', () => resolve());
      session.once('error', reject);
    });
    const value = Buffer.alloc(payload_bytes, 42);
    let seq = 0;
    try {
      return await closedLoop(concurrency, warmup_ms, duration_ms, () =>
        grpcPut(session, Buffer.from(`k${++seq % 100_000}`), value),
      );
    } finally {
      session.close();
    }
  }

  /** Puts through the HTTP/JSON gateway with keep-alive connections. */
  async loadGateway(
    concurrency: number,
    payload_bytes: number,
    warmup_ms: number,
    duration_ms: number,
  ): Promise<LoadResult> {
    const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
    const value = Buffer.alloc(payload_bytes, 42).toString('base64');
    let seq = 0;
    try {
      return await closedLoop(concurrency, warmup_ms, duration_ms, async () => {
        const key = Buffer.from(`k${++seq % 100_000}`).toString('base64');
        await post(agent, this.leaderPort, '/v3/kv/put', `{"key":"${key}","value":"${value}"}`);
      });
    } finally {
      agent.destroy();
    }
  }

  /** Synchronous last resort (an aborted run's exit): SIGKILL every member still running. */
  killNow(): void {
    for (const p of this.procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.procs.map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.exitCode !== null) return resolve();
            p.once('exit', () => resolve());
            p.kill('SIGTERM');
            setTimeout(() => p.kill('SIGKILL'), 5000).unref();
          }),
      ),
    );
  }
}
