/** Cluster members in this process: Controllers with Raft over their mutual-TLS peer listeners (no child process). */
import { join } from 'node:path';
import { loadPeerTlsOptions } from '../../src/pki/index.js';
import { startServer, type TestServer } from '../support/server.js';

/**
 * Starts member `id` with its data and PKI under `dir/id` (preparePeerPki made the PKI), founding the cluster or
 * joining it through a member's peer address. Short ticks: elections and catching up in a fraction of the default.
 */
export async function inProcessMember(
  dir: string,
  id: string,
  start: { init: true } | { join: string },
): Promise<TestServer> {
  const tls = await loadPeerTlsOptions(join(dir, id, 'pki'));
  return startServer({
    dataDir: join(dir, id),
    cluster: { nodeId: id, peerListen: { host: '127.0.0.1', port: 0 }, tls, tick_ms: 10, ...start },
  });
}
