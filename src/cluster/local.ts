/** `keel cluster local` (`npm run cluster`): a 3-node cluster on this machine, three OS processes. */
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { generatePassword } from '../bootstrap.js';
import { initClusterPki, issueNodeBundle, shareSigningCa } from '../pki/index.js';
import { NodeExitedError, type NodeProcess, type NodeSpec, startNode, stopNode } from './processes.js';
import { EXIT_REMOVED } from './removal.js';

export interface LocalClusterOptions {
  basePort: number;
  peerBasePort: number;
  dataDir: string;
  nodes: number;
  adminPassword?: string;
  /** Each member's metrics listener (`--metrics-listen`) on ports P..P+2; absent: none. */
  metricsBasePort?: number;
}

/** Hosts the certificates of a cluster on this machine name. */
export const LOCAL_HOSTS = ['127.0.0.1', 'localhost'];

/**
 * Peer certificates for members `ids` whose data directories are `dirOf(id)`: the first gets the cluster CA and its
 * certificate (`keel cluster init`), the others a join bundle each (`keel pki issue-node`), in `<data dir>/pki`.
 */
export async function preparePeerPki(ids: string[], dirOf: (id: string) => string, hosts = LOCAL_HOSTS): Promise<void> {
  const [first, ...rest] = ids;
  const caDir = join(dirOf(first!), 'pki');
  await initClusterPki(caDir, { nodeId: first!, hosts });
  for (const id of rest) await issueNodeBundle(caDir, join(dirOf(id), 'pki'), { nodeId: id, hosts });
}

/** A local member's metrics URL: its API's scheme, the metrics port on 127.0.0.1. */
function metricsUrl(apiBase: string, port: number): string {
  return `${new URL(apiBase).protocol}//127.0.0.1:${port}/metrics`;
}

export async function runLocalCluster(o: LocalClusterOptions, out: (line: string) => void): Promise<NodeProcess[]> {
  const root = resolve(o.dataDir);
  mkdirSync(root, { recursive: true });
  const fresh = !existsSync(join(root, 'n1', 'raft'));
  const password = fresh ? (o.adminPassword ?? generatePassword()) : undefined;
  const ids = Array.from({ length: o.nodes }, (_, i) => `n${i + 1}`);
  if (fresh) await preparePeerPki(ids, (id) => join(root, id));
  // members made before join bundles carried the signing CA get it from n1 (same machine, same operator)
  else for (const id of ids.slice(1)) await shareSigningCa(join(root, ids[0]!, 'pki'), join(root, id, 'pki'));
  const nodes: NodeProcess[] = [];
  const stopAll = async () => {
    await Promise.all(nodes.map((n) => stopNode(n)));
  };
  const spec = (i: number, start?: NodeSpec['start']): NodeSpec => ({
    id: ids[i]!,
    dataDir: join(root, ids[i]!),
    apiPort: o.basePort + i,
    peerPort: o.peerBasePort + i,
    ...(start ? { start } : {}),
    ...(i === 0 && password ? { adminPassword: password } : {}),
    ...(o.metricsBasePort !== undefined
      ? { extraArgs: ['--metrics-listen', `127.0.0.1:${o.metricsBasePort + i}`] }
      : {}),
    env: { KEEL_LOG_LEVEL: process.env.KEEL_LOG_LEVEL ?? 'warn' },
  });
  const started = (n: NodeProcess) => {
    n.child.stderr?.pipe(process.stderr);
    nodes.push(n);
  };
  try {
    if (fresh) {
      started(await startNode(spec(0, { init: true })));
      for (let i = 1; i < o.nodes; i++) started(await startNode(spec(i, { join: nodes[0]!.peerAddress })));
    } else {
      // a restarting member answers once there is a leader, which takes a majority: start them all at once
      const settled = await Promise.allSettled(ids.map((_, i) => startNode(spec(i))));
      for (const r of settled) if (r.status === 'fulfilled') started(r.value);
      // a node removed from the cluster (`keel cluster remove`) stops for good: the others run without it
      const removedIds: string[] = [];
      for (const r of settled) {
        if (r.status !== 'rejected') continue;
        if (!(r.reason instanceof NodeExitedError && r.reason.code === EXIT_REMOVED)) throw r.reason;
        removedIds.push(r.reason.nodeId);
      }
      if (nodes.length === 0)
        throw new Error(`every node was removed from the cluster: delete ${root} to start afresh`);
      for (const id of removedIds) {
        out(
          `  ${id}: removed from the cluster, not started (add it again with keel cluster add, delete ` +
            `${join(root, id)} and join it again to reuse it)`,
        );
      }
      nodes.sort((a, b) => ids.indexOf(a.spec.id) - ids.indexOf(b.spec.id));
    }
  } catch (err) {
    await stopAll();
    throw err;
  }
  out(`Keel cluster of ${o.nodes} nodes running (data in ${root})`);
  for (const n of nodes) {
    const metrics =
      o.metricsBasePort === undefined
        ? ''
        : `  metrics ${metricsUrl(n.base, o.metricsBasePort + ids.indexOf(n.spec.id))}`;
    out(`  ${n.spec.id}  API ${n.base}  (management ${n.base}/edge/management/v1)  peer ${n.peerAddress}${metrics}`);
  }
  if (nodes[0]!.ca !== null) {
    const caFile = join(root, 'n1', 'pki', 'ca.cert.pem');
    out(`  CA certificate:  ${caFile}   (every node's API certificate chains to it; trust it in clients)`);
    out(`  e.g.             curl --cacert ${caFile} ${nodes[0]!.base}/version`);
  }
  out('  Admin username:  admin');
  if (!fresh) out('  Admin password:  (as set when this cluster was created)');
  else if (o.adminPassword) out('  Admin password:  (as given by --admin-password)');
  else out(`  Admin password:  ${password}   (generated: shown this once, keep it safe)`);
  out('Ctrl-C stops all nodes; run again to restart them on the same data.');
  return nodes;
}
