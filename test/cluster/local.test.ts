/**
 * `npm run cluster` (`keel cluster local`): three HTTPS members under one root on first start, each with its
 * metrics listener, and a restart on the same data (the members start at once: a restarting member needs a majority
 * for a leader).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLocalCluster } from '../../src/cluster/local.js';
import { type NodeProcess, stopNode } from '../../src/cluster/processes.js';
import { tlsCall } from '../support/tls-call.js';
import { buildOnce } from './support.js';

const PASSWORD = 'local-cluster-pass';
/** Attempts at finding three consecutive free ports for the API and three for the peer listeners. */
const PORT_ATTEMPTS = 20;

function free(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** A base port P with P..P+8 free (API ports P..P+2, peer ports P+3..P+5, metrics ports P+6..P+8). */
async function freeRange(): Promise<number> {
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 30_000);
    const ok = await Promise.all(Array.from({ length: 9 }, (_, i) => free(base + i)));
    if (ok.every(Boolean)) return base;
  }
  throw new Error('no free port range');
}

describe('keel cluster local', () => {
  const dir = mkdtempSync(join(tmpdir(), 'keel-local-'));
  let nodes: NodeProcess[] = [];
  beforeAll(() => buildOnce(), 120_000);
  afterAll(async () => {
    await Promise.all(nodes.map((n) => stopNode(n, 5_000)));
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts three HTTPS members under one root, prints how to trust it, and restarts on the same data', async () => {
    const base = await freeRange();
    const opts = {
      basePort: base,
      peerBasePort: base + 3,
      metricsBasePort: base + 6,
      dataDir: dir,
      nodes: 3,
      adminPassword: PASSWORD,
    };
    const lines: string[] = [];
    nodes = await runLocalCluster(opts, (l) => lines.push(l));
    const caFile = join(dir, 'n1', 'pki', 'ca.cert.pem');
    expect(lines.join('\n')).toContain(`CA certificate:  ${caFile}`);
    const ca = readFileSync(caFile, 'utf8');
    const login = async (n: NodeProcess) =>
      tlsCall('POST', `${n.base}/edge/management/v1/authenticate?method=password`, {
        ca,
        body: { username: 'admin', password: PASSWORD },
      });
    for (const [i, n] of nodes.entries()) {
      expect(n.base).toBe(`https://127.0.0.1:${base + i}`);
      expect((await login(n)).status).toBe(200);
      // the admin password reaches n1 in its environment: no member's command line (ps) shows it
      const argv = readFileSync(`/proc/${n.child.pid}/cmdline`, 'utf8');
      expect(argv).toContain(`--node-id\u0000n${i + 1}`);
      expect(argv).not.toContain(PASSWORD);
      // each member's metrics, over HTTPS with its API certificate, at the URL printed for it
      const url = `https://127.0.0.1:${base + 6 + i}/metrics`;
      expect(lines.join('\n')).toContain(`metrics ${url}`);
      const metrics = await tlsCall('GET', url, { ca });
      expect(metrics.status).toBe(200);
      expect(metrics.text).toContain(`node_id="n${i + 1}"`);
    }
    await Promise.all(nodes.map((n) => stopNode(n)));

    const again: string[] = [];
    nodes = await runLocalCluster(opts, (l) => again.push(l));
    expect(again.join('\n')).toContain('as set when this cluster was created');
    expect(nodes.map((n) => n.spec.id)).toEqual(['n1', 'n2', 'n3']);
    for (const n of nodes) expect((await login(n)).status).toBe(200);

    // n3 removed: it stops itself (exit 78), and the next run starts the other two and says why n3 is not there
    const token = (await login(nodes[0]!)).body.data.token as string;
    const removed = await tlsCall('POST', `${nodes[0]!.base}/fabric/v1/cluster/remove-member`, {
      ca,
      token,
      body: { id: 'n3' },
    });
    expect(removed.status, removed.text).toBe(200);
    expect((await nodes[2]!.exited).code).toBe(78);
    await Promise.all(nodes.map((n) => stopNode(n)));
    const third: string[] = [];
    nodes = await runLocalCluster(opts, (l) => third.push(l));
    expect(nodes.map((n) => n.spec.id)).toEqual(['n1', 'n2']);
    expect(third.join('\n')).toContain(
      `n3: removed from the cluster, not started (add it again with keel cluster add, delete ${join(dir, 'n3')}`,
    );
    for (const n of nodes) expect((await login(n)).status).toBe(200);
  }, 180_000);
});
