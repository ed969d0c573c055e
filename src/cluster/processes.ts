/**
 * Keel nodes as OS processes on this machine: `npm run cluster` (keel cluster local) and the process-level tests
 * start them through here. Each node is `bin/keel.js run` with its own data directory, API port and peer port.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** `bin/keel.js` of this checkout (this module runs from src/ under tests and from dist/src/ when built). */
function findBin(): string {
  let dir = import.meta.dirname;
  for (let up = 0; up < 4; up++, dir = dirname(dir)) {
    const bin = join(dir, 'bin', 'keel.js');
    if (existsSync(bin)) return bin;
  }
  throw new Error('bin/keel.js not found above this module');
}

export const KEEL_BIN = findBin();

/**
 * V8 heap sizing every Keel process is started with (here, by `npm start` and by deploy/keel.service;
 * docs/operations.md, "Heap sizing"). The old generation starts at 256 MiB instead of a few MiB that V8 grows step
 * by step: a member under write load otherwise runs a full collection every 2–3 s while its heap grows (10–17 ms
 * pauses, on every member), most of the cluster's p99 at 16 and 64 connections (docs/benchmarks.md). It sets where
 * the first full collection happens, not a reservation: a small controller's heap stays small. The young
 * generation's semi-spaces are 32 MiB from the start (V8 starts them at 1 MiB and grows them step by step): a write
 * allocates a few KiB that die young, so scavenges come less often and copy less per write; about a tenth less CPU
 * per write in the cluster benchmark (docs/benchmarks.md, "Semi-space size").
 */
export const NODE_HEAP_FLAGS: readonly string[] = Object.freeze([
  '--initial-old-space-size=256',
  '--max-semi-space-size=32',
  '--min-semi-space-size=32',
]);

/** The Node flags for a node started here: NODE_HEAP_FLAGS, then KEEL_NODE_FLAGS (a later flag wins). */
export function nodeFlags(env: NodeJS.ProcessEnv = process.env): string[] {
  return [...NODE_HEAP_FLAGS, ...extraNodeFlags(env)];
}

/**
 * Extra Node flags for every node started here, from `KEEL_NODE_FLAGS` (space separated; for diagnosis, e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof` or `--import=./scripts/prof/alloc-sampling.mjs`: docs/benchmarks.md).
 * Bounded: at most 16 flags, each starting with `--`.
 */
export function extraNodeFlags(env: NodeJS.ProcessEnv = process.env): string[] {
  const flags = (env.KEEL_NODE_FLAGS ?? '').split(' ').filter((f) => f !== '');
  if (flags.length > 16 || flags.some((f) => !f.startsWith('--'))) {
    throw new Error('KEEL_NODE_FLAGS takes at most 16 Node flags, each starting with --');
  }
  return flags;
}

export interface NodeSpec {
  id: string;
  dataDir: string;
  apiPort: number;
  peerPort: number;
  host?: string;
  /** First start only: found the cluster (`init`) or join through a member's peer address. */
  start?: { init: true } | { join: string };
  adminPassword?: string;
  extraArgs?: string[];
  env?: Record<string, string>;
}

export interface NodeProcess {
  spec: NodeSpec;
  child: ChildProcess;
  /** The API base URL (`https://host:port`; `http://` with `--insecure-http`). */
  base: string;
  /** The root CA certificate (PEM) the API certificate chains to (`<dataDir>/pki/ca.cert.pem`); null for HTTP. */
  ca: string | null;
  peerAddress: string;
  stdout: string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: string | null }>;
}

/** The arguments of `node` for a member: the Node flags (nodeFlags), the keel binary, then nodeArgs. */
export function nodeCommand(spec: NodeSpec, env: NodeJS.ProcessEnv = process.env): string[] {
  return [...nodeFlags(env), KEEL_BIN, ...nodeArgs(spec)];
}

export function nodeArgs(spec: NodeSpec): string[] {
  const host = spec.host ?? '127.0.0.1';
  const args = [
    'run',
    '--node-id',
    spec.id,
    '--data-dir',
    spec.dataDir,
    '--listen',
    `${host}:${spec.apiPort}`,
    '--peer-listen',
    `${host}:${spec.peerPort}`,
  ];
  if (spec.start && 'init' in spec.start) args.push('--cluster-init');
  if (spec.start && 'join' in spec.start) args.push('--join', spec.start.join);
  return [...args, ...(spec.extraArgs ?? [])];
}

/** A node's process exited before it started (its exit status says why: e.g. EXIT_REMOVED). */
export class NodeExitedError extends Error {
  constructor(
    readonly nodeId: string,
    readonly code: number | null,
    readonly signal: string | null,
    output: string,
  ) {
    super(`node ${nodeId} exited (${code ?? signal}) before it started:\n${output}`);
    this.name = 'NodeExitedError';
  }
}

/**
 * The admin password reaches the node in its environment (`KEEL_ADMIN_PASSWORD`), never on its command line, which
 * any local user can read (`ps`) for as long as the node runs. Without one, the variable is cleared: a password
 * this process was given must not become the node's by accident.
 */
export function secretEnv(spec: NodeSpec): Record<string, string> {
  return { KEEL_ADMIN_PASSWORD: spec.adminPassword ?? '' };
}

/** Starts a node and resolves once it printed its API URLs (it has a leader and caught up), or rejects. */
export function startNode(spec: NodeSpec, timeout_ms = 60_000): Promise<NodeProcess> {
  const child = spawn(process.execPath, nodeCommand(spec), {
    env: { ...process.env, KEEL_LOG_LEVEL: process.env.KEEL_LOG_LEVEL ?? 'warn', ...spec.env, ...secretEnv(spec) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const MAX_STDERR_CHARS = 64 * 1024;
  child.stderr!.on('data', (d) => {
    stderr = (stderr + d).slice(-MAX_STDERR_CHARS);
  });
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return new Promise<NodeProcess>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`node ${spec.id} did not start in ${timeout_ms} ms:\n${stdout}\n${stderr}`));
    }, timeout_ms);
    child.stdout!.on('data', (d) => {
      stdout += d;
      const m = /Management API:\s+(https?:\/\/[^\s]+)\/edge\/management\/v1/.exec(stdout);
      const p = /peer address (\S+),/.exec(stdout);
      if (m && p) {
        clearTimeout(timer);
        const base = m[1]!;
        const ca = base.startsWith('https:') ? readFileSync(join(spec.dataDir, 'pki', 'ca.cert.pem'), 'utf8') : null;
        resolve({ spec, child, base, ca, peerAddress: p[1]!, stdout, stderr: () => stderr, exited });
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new NodeExitedError(spec.id, code, signal, `${stdout}\n${stderr}`));
    });
  });
}

/** SIGTERM, then SIGKILL after `grace_ms`; resolves when the process is gone. */
export async function stopNode(n: NodeProcess, grace_ms = 15_000): Promise<void> {
  if (n.child.exitCode !== null || n.child.signalCode !== null) return;
  n.child.kill('SIGTERM');
  const timer = setTimeout(() => n.child.kill('SIGKILL'), grace_ms);
  await n.exited;
  clearTimeout(timer);
}
