/** `keel cluster …`: run a local cluster, and inspect or change a running cluster's membership. */

import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { runLocalCluster } from '../cluster/local.js';
import { orRefusal, peerClient, routerAddressOf, statusOf } from '../cluster/peer-api.js';
import { stopNode } from '../cluster/processes.js';
import { initClusterPki, loadPeerTlsOptions } from '../pki/index.js';
import { withTimeout } from '../util/timeout.js';

export const CLUSTER_USAGE = `Usage:
  keel cluster init --data-dir DIR --node-id ID [--host H]...
        the cluster's root CA, signing CA and the first node's peer certificate in DIR/pki (then start that node
        with keel run --data-dir DIR --node-id ID --cluster-init); for each further node, issue a join bundle
        with keel pki issue-node --ca-dir DIR/pki --node-id ID2 --host ... --out BUNDLE and copy BUNDLE to that
        node's DIR2/pki before its first start (keel run ... --join ADDR). Peer links are always mutual TLS.
  keel cluster local [--base-port P] [--peer-base-port P] [--metrics-base-port P] [--data-dir DIR] [--admin-password X]
        three nodes on this machine (API ports P..P+2, default 1280; peer ports default 6262..6264;
        Prometheus metrics at /metrics on ports default 9280..9282, 0: none; data in DIR/n1..n3, default
        ./data-cluster); prints each API URL, each metrics URL and the admin login
  keel cluster list --peer ADDR --pki-dir DIR
        the members (id, peer address, voter, leader, reachable, applied index, API addresses)
  keel cluster add --peer ADDR --pki-dir DIR --id ID --address HOST:PORT [--learner]
        adds a member (a learner, promoted to voter once caught up unless --learner); the new node is started
        with --join instead when it can reach a member itself; a removed id comes back only this way
        (--learner, then the node joins with fresh data)
  keel cluster remove --peer ADDR --pki-dir DIR --id ID
        removes a member; once it learns of it, it stops (exit status 78) and does not start again on its data
  keel cluster transfer-leadership --peer ADDR --pki-dir DIR --to ID
  ADDR is any member's peer address (host:port of its --peer-listen); DIR a member's PKI directory
  (<data-dir>/pki), whose peer certificate the command presents (peer links are mutual TLS).
`;

const CALL_TIMEOUT_MS = 30_000;

function port(text: string | undefined, flag: string, dflt: number): number {
  if (text === undefined) return dflt;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 65533) throw new Error(`invalid ${flag} '${text}' (1..65533)`);
  return n;
}

/** How long `list` waits for each member's own status before it calls the member unreachable. */
const STATUS_TIMEOUT_MS = 3_000;

export async function clusterCommand(argv: string[], out: (s: string) => void): Promise<number> {
  const [sub, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: {
      'base-port': { type: 'string' },
      'peer-base-port': { type: 'string' },
      'metrics-base-port': { type: 'string' },
      'data-dir': { type: 'string' },
      'admin-password': { type: 'string' },
      peer: { type: 'string' },
      id: { type: 'string' },
      address: { type: 'string' },
      learner: { type: 'boolean' },
      to: { type: 'string' },
      'node-id': { type: 'string' },
      host: { type: 'string', multiple: true },
      'pki-dir': { type: 'string' },
    },
    strict: true,
  });
  if (sub === 'init') {
    if (!values['data-dir'] || !values['node-id']) throw new Error('init needs --data-dir and --node-id');
    const dir = join(resolve(values['data-dir']), 'pki');
    await initClusterPki(dir, { nodeId: values['node-id'], hosts: values.host ?? [] });
    out(`Cluster PKI created in ${dir} (root CA, signing CA, peer certificate of ${values['node-id']})`);
    out(`Start the node: keel run --data-dir ${values['data-dir']} --node-id ${values['node-id']} --cluster-init`);
    return 0;
  }
  if (sub === 'local') {
    const nodes = await runLocalCluster(
      {
        basePort: port(values['base-port'], '--base-port', 1280),
        peerBasePort: port(values['peer-base-port'], '--peer-base-port', 6262),
        ...(values['metrics-base-port'] === '0'
          ? {}
          : { metricsBasePort: port(values['metrics-base-port'], '--metrics-base-port', 9280) }),
        dataDir: values['data-dir'] ?? './data-cluster',
        nodes: 3,
        ...(values['admin-password'] ? { adminPassword: values['admin-password'] } : {}),
      },
      out,
    );
    const stop = () => void Promise.all(nodes.map((n) => stopNode(n))).then(() => process.exit(0));
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    return -1;
  }
  if (sub === undefined || !['list', 'add', 'remove', 'transfer-leadership'].includes(sub)) {
    out(CLUSTER_USAGE);
    return sub === undefined ? 0 : 2;
  }
  if (!values.peer) throw new Error('--peer ADDR (a member peer address) is required');
  if (!values['pki-dir']) {
    throw new Error("--pki-dir DIR (a member's PKI directory, <data-dir>/pki) is required: peer links are mutual TLS");
  }
  const peer = values.peer;
  const tls = await loadPeerTlsOptions(resolve(values['pki-dir']));
  const c = peerClient(peer, tls);
  // a member that refuses this build's peer protocol: its reason is the error
  const timed = <T>(p: Promise<T>) => orRefusal(c, peer, () => withTimeout(p, CALL_TIMEOUT_MS, 'the member'));
  try {
    if (sub === 'list') {
      const m = await timed(c.api.members.query());
      // each member asked for its own status, all at once: one that does not answer in time is unreachable
      const statuses = await Promise.all(m.members.map((x) => statusOf(x.address, tls, STATUS_TIMEOUT_MS)));
      out('id\taddress\tvoter\tleader\treachable\tapplied\tapiAddresses\trouterAddress');
      m.members.forEach((x, i) => {
        const st = statuses[i];
        const applied = st ? String(st.applied) : '-';
        const apis = st && st.apiAddresses.length > 0 ? st.apiAddresses.join(',') : '-';
        // where routers connect to it (its router control listener), as the member reports it
        const router = routerAddressOf(st) ?? '-';
        out(`${x.id}\t${x.address}\t${x.voter}\t${x.id === m.leader}\t${st !== null}\t${applied}\t${apis}\t${router}`);
      });
    } else if (sub === 'add') {
      if (!values.id || !values.address) throw new Error('add needs --id and --address');
      await timed(c.api.addMember.mutate({ id: values.id, address: values.address, voter: !values.learner }));
      out(`added ${values.id}`);
    } else if (sub === 'remove') {
      if (!values.id) throw new Error('remove needs --id');
      await timed(c.api.removeMember.mutate({ id: values.id }));
      out(
        `removed ${values.id} (it stops once it learns of it; to bring it back, add it again with --learner, ` +
          'delete its data directory and join)',
      );
    } else {
      if (!values.to) throw new Error('transfer-leadership needs --to');
      await timed(c.api.transferLeadership.mutate({ to: values.to }));
      out(`${values.to} is the leader`);
    }
    return 0;
  } finally {
    c.close();
  }
}
