/** Cluster members in this process: Controllers with Raft over their mutual-TLS peer listeners (no child process). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { preparePeerPki } from '../../src/cluster/local.js';
import type { ClusterNode, ClusterOptions } from '../../src/cluster/node.js';
import type { ControllerOptions } from '../../src/controller.js';
import { loadPeerTlsOptions } from '../../src/pki/index.js';
import { startServer, type TestServer } from '../support/server.js';
import { until } from './support.js';

/**
 * Starts member `id` with its data and PKI under `dir/id` (preparePeerPki made the PKI), founding the cluster or
 * joining it through a member's peer address. Short ticks: elections and catching up in a fraction of the default.
 */
export async function inProcessMember(
  dir: string,
  id: string,
  start: { init: true } | { join: string },
  extra: Partial<ClusterOptions> = {},
  controller: Partial<ControllerOptions> = {},
): Promise<TestServer> {
  const tls = await loadPeerTlsOptions(join(dir, id, 'pki'));
  return startServer({
    ...controller,
    dataDir: join(dir, id),
    cluster: { nodeId: id, peerListen: { host: '127.0.0.1', port: 0 }, tls, tick_ms: 10, ...start, ...extra },
  });
}

/**
 * Members `ids` in a temporary directory (prefix `prefix`), each a controller with `controller`'s options (a router
 * control listener, say) on top of its cluster's: start() makes their PKI, founds the cluster with the
 * first, joins the others through it, in order, and waits until all are voters; member(i) is nodes[i]'s cluster
 * node; stop() stops them all (none hands leadership over: the whole
 * cluster goes) and removes the directory. `nodes` fills as they start.
 */
export function inProcessCluster(prefix: string, ids: readonly string[], controller: Partial<ControllerOptions> = {}) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const nodes: TestServer[] = [];
  return {
    dir,
    nodes,
    async start(): Promise<void> {
      await preparePeerPki([...ids], (id) => join(dir, id));
      nodes.push(await inProcessMember(dir, ids[0]!, { init: true }, {}, controller));
      const peer = nodes[0]!.ctl.cluster!.peerAddress;
      for (const id of ids.slice(1)) nodes.push(await inProcessMember(dir, id, { join: peer }, {}, controller));
      const voters = () => nodes[0]!.ctl.cluster!.raft.status().conf.voters.length;
      await until(() => voters() === ids.length, 10_000, `${ids.length} voters`);
    },
    member: (i: number): ClusterNode => nodes[i]!.ctl.cluster!,
    async stop(): Promise<void> {
      await Promise.all(nodes.map((n) => n.ctl.cluster?.stop({ transferLeadership: false })));
      await Promise.all(nodes.map((n) => n.stop({ keepData: true })));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
