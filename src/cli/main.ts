import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';
import type { StoreFailedError } from '../../storage/types.js';
import type { ClusterOptions } from '../cluster/node.js';
import { isPeerAddress } from '../cluster/peer-address.js';
import type { PeerTlsOptions } from '../cluster/peer-api.js';
import { EXIT_REMOVED, RemovedFromClusterError } from '../cluster/removal.js';
import { Controller, DEFAULT_SESSION_TIMEOUT_MS, defaultBaseUrl } from '../controller.js';
import { importRootCa, isLoopbackHost, loadPeerTlsOptions, PKI_FILES, PkiError } from '../pki/index.js';
import type { RouterControlOptions } from '../routers/control.js';
import { KEEL_VERSION } from '../version.js';
import { clusterCommand } from './cluster.js';
import { pkiMain } from './pki.js';

const USAGE = `keel ${KEEL_VERSION}: an OpenZiti-compatible overlay-network controller

Usage:
  keel run [options]      run a controller node (alone, or as a cluster member)
  keel cluster ...        run a local 3-node cluster; list, add, remove members; transfer leadership
                          (keel cluster --help)
  keel pki ...            the cluster's certificates (keel pki --help)

Options of run:
  --data-dir DIR          data directory (default ./data); created and initialised on first start
  --listen HOST:PORT      API listener (default 127.0.0.1:1280)
  --advertise URL         base URL clients use to reach the listener (default https://<listen>)
  --admin-password P      password of the default admin on first start (or KEEL_ADMIN_PASSWORD);
                          without either, a strong password is generated and printed once
  --insecure-http         serve plain HTTP instead of HTTPS; refused unless --listen is a loopback address
  --engine node|uws       HTTP engine: node (node:https, the default; asks for client certificates) or uws
                          (uWebSockets.js, plain HTTP only: needs --insecure-http; default with it)
  --pki-dir DIR           the PKI directory (default DIR/pki): root CA, signing CA, API certificate, made on
                          first start where missing; an operator's own root CA may be put there first
  --root-ca-cert FILE --root-ca-key FILE
                          on first start, the PKI's root CA is this one (a self-signed CA certificate and its
                          key, PEM) instead of a new one; Keel makes the signing CA under it
  --tls                   HTTPS (the default; kept for older scripts)
  --session-timeout DUR   idle timeout of API sessions, e.g. 30m, 90s, 2h (default 30m)
  --max-connections N     connections (node engine) / requests in flight (uws) before 429 (default 10000)
  --router-listen H:P     router control listener: enrolled routers connect here (mutual TLS) and are online
                          while connected (docs/routers.md); default: none
  --router-advertise H:P  address routers dial to reach that listener, this node's ctrlAddress in the
                          controllers list (default: the --router-listen host and port)
  --metrics-listen H:P    serve Prometheus metrics at /metrics on this listener (HTTPS with the API's
                          certificate; plain HTTP with --insecure-http, loopback only); default: none
  -h, --help              this text

Cluster options of run (without --node-id the node runs alone, as above):
  --node-id ID            this member's id (letters, digits, '.', '_', '-'; unique in the cluster)
  --peer-listen HOST:PORT peer listener: Raft traffic and the internal peer API (default 127.0.0.1:6262)
  --peer-advertise H:P    address other members dial (default: the peer listener's)
  --cluster-init          first start of a new cluster, this node its first voter (initialises the state)
  --join ADDR             first start of a new member: join through the member at peer address ADDR
  --force-new-cluster     quorum lost for good: restart this member as the only voter, with its data; the
                          others are removed (docs/cluster.md, "Quorum lost for good"). Unsafe if they come back
  --snapshot-every N      flush the store, record a snapshot, compact the Raft log every N entries (default 40000)
  --pipeline-proposals    as leader, append new writes while earlier ones are still uncommitted (default: they
                          wait for those to commit and are appended together; docs/cluster.md)
  --raft-wal-mib N        size of the Raft log's write-ahead file, made on first start (default 64); 0: none,
                          every Raft write is a synced LevelDB batch (docs/raft.md)
  Every peer link is mutual TLS, with this node's peer certificate from the PKI directory (made by keel cluster
  init on the first node; a join bundle from keel pki issue-node, copied there, on the others): a cluster member
  does not start without one. --peer-tls (the default) is accepted for older scripts.
  After the first start a member restarts with the same --node-id and --data-dir (no --cluster-init/--join).

Exit status of run: 0 after SIGTERM/SIGINT, 1 on bad options or a failed start, 74 after a failed
data store write (restart it: the data on disk is recovered), 70 after a cluster member stopped itself
(a broken Raft invariant or a failing Raft log: restart it), 78 when the node was removed from the cluster
(at start or while running, or its --join refused as removed: do not restart it on that data; add
it again with keel cluster add --learner, delete its data directory and join again).
`;

/** Exit status after the data store failed (sysexits EX_IOERR): a supervisor restarts Keel, LevelDB recovers. */
export const EXIT_STORE_FAILED = 74;
/** Exit status after a cluster member stopped itself (a broken Raft invariant, a failing Raft log). */
export const EXIT_CLUSTER_FATAL = 70;
/** After a store failure: time for the answers already decided (503s) to be written before stopping. */
const FATAL_GRACE_MS = 100;
/** After a store failure the process is gone by then, whatever a stop still waits for. */
const FATAL_EXIT_MS = 1_000;

export function parseDuration(text: string): number {
  const m = /^(\d+)(ms|s|m|h)$/.exec(text.trim());
  if (!m) throw new Error(`invalid duration '${text}' (use e.g. 500ms, 90s, 30m, 2h)`);
  const n = Number(m[1]);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 'ms' | 's' | 'm' | 'h'];
  return n * unit;
}

/** `--advertise`: an absolute http(s) URL without path, query or fragment. */
export function parseAdvertise(text: string): string {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new Error(`invalid --advertise '${text}' (use e.g. https://ctrl.example.com:1280)`);
  }
  if (
    (u.protocol !== 'http:' && u.protocol !== 'https:') ||
    (u.pathname !== '/' && u.pathname !== '') ||
    u.search ||
    u.hash
  ) {
    throw new Error(`invalid --advertise '${text}' (an http(s) URL with a host and optional port, no path)`);
  }
  return `${u.protocol}//${u.host}`;
}

function positiveInt(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new Error(`invalid ${flag} '${text}' (a positive integer)`);
  return n;
}

/** --raft-wal-mib: 0 (no write-ahead file) or 1 to 4096 MiB, as bytes. */
function walMib(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > 4096) throw new Error(`invalid --raft-wal-mib '${text}' (0 to 4096)`);
  return n * 1024 * 1024;
}

export function parseListen(text: string, flag = '--listen'): { host: string; port: number } {
  const i = text.lastIndexOf(':');
  if (i <= 0) throw new Error(`invalid ${flag} '${text}' (use HOST:PORT)`);
  const host = text.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  const port = Number(text.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid port in ${flag} '${text}'`);
  return { host, port };
}

const NODE_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** `host:port` of a peer address (no scheme, no path). */
export function parsePeerAddress(text: string, flag: string): string {
  const { host, port } = parseListen(text.trim(), flag);
  if (!host || port === 0) throw new Error(`invalid ${flag} '${text}' (use HOST:PORT with a non-zero port)`);
  return text.trim();
}

/**
 * `--metrics-listen`: where `/metrics` is served. It takes the API's scheme, so plain HTTP (`--insecure-http`) is
 * refused here too unless the listener is a loopback address.
 */
export function metricsListenOf(text: string | undefined, https: boolean): { host: string; port: number } | undefined {
  if (text === undefined) return undefined;
  const at = parseListen(text, '--metrics-listen');
  if (!https && !isLoopbackHost(at.host)) {
    throw new Error(
      `--metrics-listen '${text}' with --insecure-http: plain HTTP only on a loopback listener (127.0.0.1, ::1, localhost)`,
    );
  }
  return at;
}

/** `--router-listen` and `--router-advertise` (which needs the listener). */
export function routerControlOf(
  listen: string | undefined,
  advertise: string | undefined,
): RouterControlOptions | undefined {
  if (listen === undefined) {
    if (advertise !== undefined) throw new Error('--router-advertise needs --router-listen');
    return undefined;
  }
  const at = parseListen(listen, '--router-listen');
  if (advertise === undefined) return at;
  const address = parsePeerAddress(advertise, '--router-advertise');
  if (!isPeerAddress(address)) {
    throw new Error(`invalid --router-advertise '${advertise}' (a DNS name, IPv4 or [IPv6] address, and a port)`);
  }
  return { ...at, advertise: address };
}

/**
 * This member's peer TLS material (its certificate, key and the cluster root, from `keel cluster init` or a join
 * bundle from `keel pki issue-node`), checked to chain to the root and to name this node. Peer links are always
 * mutual TLS: a member without it does not start.
 */
async function peerTlsOf(pkiDir: string, id: string): Promise<PeerTlsOptions> {
  let peer: Awaited<ReturnType<typeof loadPeerTlsOptions>>;
  try {
    peer = await loadPeerTlsOptions(pkiDir);
  } catch (err) {
    if (!(err instanceof PkiError)) throw err;
    throw new Error(
      `no valid peer certificate for ${id} in ${pkiDir} (${err.code}: ${err.message}); peer links use mutual TLS: ` +
        `on the first member run keel cluster init --data-dir DIR --node-id ${id}, on the others copy in a join ` +
        `bundle from keel pki issue-node --node-id ${id} (docs/cluster.md)`,
    );
  }
  if (peer.nodeId !== id) throw new Error(`the peer certificate in ${pkiDir} names ${peer.nodeId}, not ${id}`);
  return peer;
}

export async function clusterOptions(
  values: Record<string, string | boolean | undefined>,
  pkiDir: string,
): Promise<ClusterOptions | undefined> {
  const id = values['node-id'] as string | undefined;
  const clusterFlags = [
    'peer-listen',
    'peer-advertise',
    'cluster-init',
    'join',
    'peer-tls',
    'snapshot-every',
    'pipeline-proposals',
    'raft-wal-mib',
    'force-new-cluster',
  ];
  if (id === undefined) {
    const stray = clusterFlags.find((f) => values[f] !== undefined);
    if (stray) throw new Error(`--${stray} needs --node-id (cluster mode)`);
    return undefined;
  }
  if (!NODE_ID.test(id)) throw new Error(`invalid --node-id '${id}' (1-64 of letters, digits, '.', '_', '-')`);
  if (values['cluster-init'] && values.join) throw new Error('--cluster-init and --join exclude each other');
  if (values['force-new-cluster'] && (values['cluster-init'] || values.join)) {
    throw new Error('--force-new-cluster restarts a member on its data: not with --cluster-init or --join');
  }
  const tls = await peerTlsOf(pkiDir, id);
  return {
    nodeId: id,
    peerListen: parseListen((values['peer-listen'] as string | undefined) ?? '127.0.0.1:6262', '--peer-listen'),
    ...(values['peer-advertise']
      ? { peerAdvertise: parsePeerAddress(values['peer-advertise'] as string, '--peer-advertise') }
      : {}),
    init: values['cluster-init'] === true,
    ...(values.join ? { join: parsePeerAddress(values.join as string, '--join') } : {}),
    tls,
    ...(values['snapshot-every']
      ? { snapshotEvery_entries: positiveInt(values['snapshot-every'] as string, '--snapshot-every') }
      : {}),
    ...(values['pipeline-proposals'] === true ? { holdWhileCommitting: false } : {}),
    ...(values['raft-wal-mib'] !== undefined ? { raftWal_bytes: walMib(values['raft-wal-mib'] as string) } : {}),
    ...(values['force-new-cluster'] === true ? { forceNewCluster: true } : {}),
  };
}

/**
 * HTTPS (node engine) unless `--insecure-http`, which only a loopback listener may use; uWS serves plain HTTP
 * only (it takes no TLS options and cannot expose client certificates), so it needs `--insecure-http`.
 */
export function listenerScheme(
  values: { engine?: string; tls?: boolean; 'insecure-http'?: boolean },
  listenHost: string,
): { https: boolean; engine: 'node' | 'uws' } {
  const insecure = values['insecure-http'] === true;
  if (insecure && values.tls) throw new Error('--tls and --insecure-http exclude each other');
  if (insecure && !isLoopbackHost(listenHost)) {
    throw new Error(
      `--insecure-http is refused on '${listenHost}': plain HTTP only on a loopback listener (127.0.0.1, ::1, localhost)`,
    );
  }
  const engine = values.engine ?? (insecure ? 'uws' : 'node');
  if (engine !== 'node' && engine !== 'uws') throw new Error(`invalid --engine '${values.engine}' (node or uws)`);
  if (engine === 'uws' && !insecure) {
    throw new Error('--engine uws serves plain HTTP only: add --insecure-http (loopback) or use --engine node (HTTPS)');
  }
  return { https: !insecure, engine };
}

/** `--root-ca-cert` / `--root-ca-key`: the operator's root CA goes into the PKI directory before it is opened. */
async function operatorRootCa(certFile: string | undefined, keyFile: string | undefined, pkiDir: string) {
  if (certFile === undefined && keyFile === undefined) return;
  if (certFile === undefined || keyFile === undefined) throw new Error('--root-ca-cert and --root-ca-key go together');
  try {
    await importRootCa(pkiDir, await readFile(certFile, 'utf8'), await readFile(keyFile, 'utf8'));
  } catch (err) {
    if (err instanceof PkiError) throw new Error(`--root-ca-cert: ${err.code}: ${err.message}`);
    throw err;
  }
}

/** What `keel run` prints about trusting the API's certificate. */
function trustLines(https: boolean, base: string, pkiDir: string): string[] {
  if (!https) return ['  Plain HTTP (--insecure-http): reachable from this machine only'];
  const caFile = join(pkiDir, PKI_FILES.caCert);
  return [
    `  CA certificate:  ${caFile}   (the root the API certificate chains to; trust it in clients)`,
    `  e.g.             curl --cacert ${caFile} ${base}/version`,
    `  CA bundle:       ${base}/.well-known/est/cacerts   (PKCS#7, what SDKs fetch at enrollment)`,
  ];
}

async function run(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      'data-dir': { type: 'string', default: './data' },
      listen: { type: 'string', default: '127.0.0.1:1280' },
      advertise: { type: 'string' },
      'admin-password': { type: 'string' },
      engine: { type: 'string' },
      tls: { type: 'boolean' },
      'insecure-http': { type: 'boolean' },
      'pki-dir': { type: 'string' },
      'root-ca-cert': { type: 'string' },
      'root-ca-key': { type: 'string' },
      'session-timeout': { type: 'string' },
      'max-connections': { type: 'string' },
      'router-listen': { type: 'string' },
      'router-advertise': { type: 'string' },
      'metrics-listen': { type: 'string' },
      'node-id': { type: 'string' },
      'peer-listen': { type: 'string' },
      'peer-advertise': { type: 'string' },
      'cluster-init': { type: 'boolean' },
      join: { type: 'string' },
      'peer-tls': { type: 'boolean' },
      'snapshot-every': { type: 'string' },
      'pipeline-proposals': { type: 'boolean' },
      'raft-wal-mib': { type: 'string' },
      'force-new-cluster': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const logger = pino({ name: 'keel', level: process.env.KEEL_LOG_LEVEL ?? 'info' }, pino.destination(2));
  const { host, port } = parseListen(values.listen!);
  const { https, engine } = listenerScheme(values, host);
  const advertise = values.advertise ? parseAdvertise(values.advertise) : undefined;
  const sessionTimeout_ms = values['session-timeout']
    ? parseDuration(values['session-timeout'])
    : DEFAULT_SESSION_TIMEOUT_MS;
  if (sessionTimeout_ms < 10_000) throw new Error('--session-timeout must be at least 10s');
  const dataDir = resolve(values['data-dir']!);
  const pkiDir = values['pki-dir'] ? resolve(values['pki-dir']) : join(dataDir, 'pki');
  await operatorRootCa(values['root-ca-cert'], values['root-ca-key'], pkiDir);
  const cluster = await clusterOptions(values, pkiDir);
  const metrics = metricsListenOf(values['metrics-listen'], https);
  let ctl: Controller | null = null;
  let stopping = false;
  // Fail-stop: a failed disk write means nothing more may be acknowledged; exit so that a supervisor restarts the
  // controller and LevelDB recovers its log from the files (docs/architecture.md, "Disk failures").
  const onFatal = (failure: StoreFailedError) => {
    if (stopping) return;
    stopping = true;
    const exit = () => {
      logger.fatal(
        { stage: failure.stage, reason: failure.reason, exitCode: EXIT_STORE_FAILED },
        'exiting: the data store failed a write; restart the controller to recover from the data on disk',
      );
      logger.flush();
      process.exit(EXIT_STORE_FAILED);
    };
    setTimeout(exit, FATAL_EXIT_MS);
    setTimeout(() => {
      void (ctl?.stop() ?? Promise.resolve()).then(exit, exit);
    }, FATAL_GRACE_MS);
  };
  ctl = await Controller.start({
    cluster,
    onClusterFatal: (err) => {
      if (err instanceof RemovedFromClusterError) {
        logger.fatal({ err: err.message, exitCode: EXIT_REMOVED }, 'exiting: this node was removed from the cluster');
        logger.flush();
        process.exit(EXIT_REMOVED);
      }
      logger.fatal({ err: err.message, exitCode: EXIT_CLUSTER_FATAL }, 'exiting: this cluster member stopped itself');
      logger.flush();
      process.exit(EXIT_CLUSTER_FATAL);
    },
    dataDir,
    host,
    port,
    engine,
    pkiDir,
    apiTls: https,
    adminPassword: values['admin-password'] ?? (process.env.KEEL_ADMIN_PASSWORD || undefined),
    sessionTimeout_ms: values['session-timeout']
      ? parseDuration(values['session-timeout'])
      : DEFAULT_SESSION_TIMEOUT_MS,
    maxConnections: values['max-connections'] ? positiveInt(values['max-connections'], '--max-connections') : undefined,
    apiBaseUrls: advertise ? [advertise] : undefined,
    routerControl: routerControlOf(values['router-listen'], values['router-advertise']),
    ...(metrics ? { metrics } : {}),
    log: (level, msg, extra) => logger[level](extra ?? {}, msg),
    onFatal,
  });
  const base = ctl.baseUrl;
  const lines = [
    cluster
      ? `Keel ${KEEL_VERSION} controller running (cluster member ${cluster.nodeId}, peer address ${ctl.cluster?.peerAddress}, data in ${dataDir})`
      : `Keel ${KEEL_VERSION} controller running (single node, data in ${dataDir})`,
    `  Client API:      ${base}/edge/client/v1`,
    `  Management API:  ${base}/edge/management/v1`,
    `  Admin username:  admin`,
  ];
  if (ctl.routerControl) {
    lines.push(
      `  Router control:  ${values['router-listen']} (port ${ctl.routerControl.port}; routers dial ${ctl.routerControl.address})`,
    );
  }
  if (ctl.metricsPort !== 0 && metrics) {
    lines.push(`  Metrics:         ${defaultBaseUrl(metrics.host, ctl.metricsPort, https ? 'https' : 'http')}/metrics`);
  }
  if (ctl.generatedAdminPassword) {
    lines.push(`  Admin password:  ${ctl.generatedAdminPassword}   (generated: shown this once, keep it safe)`);
  } else {
    lines.push(`  Admin password:  (as configured on the ${cluster ? "cluster's " : ''}first start)`);
  }
  lines.push(...trustLines(https, base, pkiDir));
  process.stdout.write(`${lines.join('\n')}\n`);
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    try {
      await ctl?.stop();
      logger.flush();
      process.exit(0);
    } catch (err) {
      logger.error({ err: String(err) }, 'error during shutdown');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    if (cmd === 'run') {
      await run(rest);
      return -1; // keeps running
    }
    if (cmd === 'pki') return await pkiMain(rest);
    if (cmd === 'cluster') return await clusterCommand(rest, (line) => process.stdout.write(`${line}\n`));
    if (cmd === undefined || cmd === '-h' || cmd === '--help' || cmd === 'help') {
      process.stdout.write(USAGE);
      return 0;
    }
    if (cmd === 'version' || cmd === '--version') {
      process.stdout.write(`${KEEL_VERSION}\n`);
      return 0;
    }
    process.stderr.write(`keel: unknown command '${cmd}'\n\n${USAGE}`);
    return 2;
  } catch (err) {
    process.stderr.write(`keel: ${(err as Error).message}\n`);
    return err instanceof RemovedFromClusterError ? EXIT_REMOVED : 1;
  }
}
