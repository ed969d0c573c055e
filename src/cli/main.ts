import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';
import type { StoreFailedError } from '../../storage/types.js';
import { Controller, DEFAULT_SESSION_TIMEOUT_MS } from '../controller.js';
import { KEEL_VERSION } from '../version.js';
import { pkiMain } from './pki.js';

const USAGE = `keel ${KEEL_VERSION}: an OpenZiti-compatible overlay-network controller

Usage:
  keel run [options]      run a controller node
  keel pki ...            the cluster's certificates (keel pki --help)

Options of run:
  --data-dir DIR          data directory (default ./data); created and initialised on first start
  --listen HOST:PORT      API listener (default 127.0.0.1:1280)
  --advertise URL         base URL clients use to reach the listener (default http://<listen>)
  --admin-password P      password of the default admin on first start (or KEEL_ADMIN_PASSWORD);
                          without either, a strong password is generated and printed once
  --engine uws|node       HTTP engine (default uws; node with --tls)
  --tls                   serve the API over HTTPS with a certificate from DIR/pki (made on first start)
  --session-timeout DUR   idle timeout of API sessions, e.g. 30m, 90s, 2h (default 30m)
  --max-connections N     connections (node engine) / requests in flight (uws) before 429 (default 10000)
  -h, --help              this text

Exit status of run: 0 after SIGTERM/SIGINT, 1 on bad options or a failed start, 74 after a failed
data store write (restart it: the data on disk is recovered).
`;

/** Exit status after the data store failed (sysexits EX_IOERR): a supervisor restarts Keel, LevelDB recovers. */
export const EXIT_STORE_FAILED = 74;
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

export function parseListen(text: string): { host: string; port: number } {
  const i = text.lastIndexOf(':');
  if (i <= 0) throw new Error(`invalid --listen '${text}' (use HOST:PORT)`);
  const host = text.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  const port = Number(text.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid port in --listen '${text}'`);
  return { host, port };
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
      'session-timeout': { type: 'string' },
      'max-connections': { type: 'string' },
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
  const engineName = values.engine ?? (values.tls ? 'node' : 'uws');
  const engine = engineName === 'node' ? 'node' : engineName === 'uws' ? 'uws' : null;
  if (!engine) throw new Error(`invalid --engine '${values.engine}' (uws or node)`);
  const advertise = values.advertise ? parseAdvertise(values.advertise) : undefined;
  const sessionTimeout_ms = values['session-timeout']
    ? parseDuration(values['session-timeout'])
    : DEFAULT_SESSION_TIMEOUT_MS;
  if (sessionTimeout_ms < 10_000) throw new Error('--session-timeout must be at least 10s');
  const dataDir = resolve(values['data-dir']!);
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
    dataDir,
    host,
    port,
    engine,
    apiTls: values.tls === true,
    adminPassword: values['admin-password'] ?? process.env.KEEL_ADMIN_PASSWORD ?? undefined,
    sessionTimeout_ms: values['session-timeout']
      ? parseDuration(values['session-timeout'])
      : DEFAULT_SESSION_TIMEOUT_MS,
    maxConnections: values['max-connections'] ? positiveInt(values['max-connections'], '--max-connections') : undefined,
    apiBaseUrls: advertise ? [advertise] : undefined,
    log: (level, msg, extra) => logger[level](extra ?? {}, msg),
    onFatal,
  });
  const base = ctl.baseUrl;
  const lines = [
    `Keel ${KEEL_VERSION} controller running (single node, data in ${dataDir})`,
    `  Client API:      ${base}/edge/client/v1`,
    `  Management API:  ${base}/edge/management/v1`,
    `  Admin username:  admin`,
  ];
  if (ctl.generatedAdminPassword) {
    lines.push(`  Admin password:  ${ctl.generatedAdminPassword}   (generated: shown this once, keep it safe)`);
  } else {
    lines.push('  Admin password:  (as configured on first start)');
  }
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
    return 1;
  }
}
