/**
 * `npm run bench -- metrics [--quick] [--identities N] [--services S] [--scrapes K]`: what a Prometheus scrape of
 * a node's `/metrics` costs, on an empty node and on one holding the access benchmark's data (bench/data.ts:
 * 100 000 identities, 10 000 services, 1 000 routers, 2 000 policies by default), beside a baseline measured in
 * the same run: a bare node:http server answering prom-client's default process metrics (what any Node service
 * exporting metrics pays). K scrapes each, sequential over one keep-alive connection, the two alternated in blocks
 * of 20; medians and p99 in µs, and their ratio. Each of Keel's scrapes collects (as a node's scrapes a second or
 * more apart do); its figures are read at the collection (src/metrics.ts), so it should not grow with the rows held.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { Controller } from '../src/controller.js';
import { applyAll, benchCommands, type DataSizes, dataSizes } from './data.js';
import { benchOptions } from './options.js';

const { quick, opt } = benchOptions(process.argv.slice(2));
const SIZES: DataSizes = dataSizes(opt, quick);
const SCRAPES = opt('--scrapes', quick ? 200 : 1_000);
const BLOCK = 20;

/** The baseline: prom-client's default metrics on a bare node:http server. */
async function bareServer(): Promise<{ url: string; close(): Promise<void> }> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const server = createServer((_req, res) => {
    void registry.metrics().then((text) => {
      res.writeHead(200, { 'content-type': registry.contentType });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/metrics`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** One scrape's time in µs (the whole body read). */
async function scrapeUs(url: string): Promise<number> {
  const t0 = performance.now();
  const r = await fetch(url);
  if (r.status !== 200) throw new Error(`${url}: HTTP ${r.status}`);
  await r.text();
  return (performance.now() - t0) * 1000;
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

/** K scrapes of `keel` and of `bare`, alternated in blocks; their times. */
async function measure(keel: string, bare: string): Promise<{ keel: number[]; bare: number[] }> {
  const out = { keel: [] as number[], bare: [] as number[] };
  for (let i = 0; i < 50; i++) {
    await scrapeUs(keel);
    await scrapeUs(bare);
  }
  while (out.keel.length < SCRAPES) {
    for (let i = 0; i < BLOCK; i++) out.keel.push(await scrapeUs(keel));
    for (let i = 0; i < BLOCK; i++) out.bare.push(await scrapeUs(bare));
  }
  return out;
}

function report(label: string, m: { keel: number[]; bare: number[] }, bytes: number): void {
  const k50 = quantile(m.keel, 0.5);
  const b50 = quantile(m.bare, 0.5);
  console.log(
    `  ${label}: keel /metrics p50 ${k50.toFixed(0)} µs, p99 ${quantile(m.keel, 0.99).toFixed(0)} µs (${bytes} bytes); ` +
      `baseline p50 ${b50.toFixed(0)} µs, p99 ${quantile(m.bare, 0.99).toFixed(0)} µs; ratio ${(k50 / b50).toFixed(2)}×`,
  );
}

const dataDir = mkdtempSync(join(tmpdir(), 'keel-bench-metrics-'));
const bare = await bareServer();
const ctl = await Controller.start({
  dataDir,
  host: '127.0.0.1',
  port: 0,
  engine: 'uws',
  adminPassword: 'metrics-bench-pw',
  sync: false,
  // every scrape collects (a node collects at most once a second: METRICS_MIN_INTERVAL_MS): the collection is measured
  metrics: { host: '127.0.0.1', port: 0, minInterval_ms: 0 },
});
try {
  const url = `http://127.0.0.1:${ctl.metricsPort}/metrics`;
  console.log(`metrics: ${SCRAPES} scrapes per level, sequential, alternated with the baseline in blocks of ${BLOCK}`);
  report('empty node', await measure(url, bare.url), (await (await fetch(url)).text()).length);
  const t0 = performance.now();
  // written straight into the idle node's store (nothing else writes meanwhile), as the startup benchmark's data
  await applyAll(ctl.svc.store, benchCommands(SIZES));
  const rows = SIZES.identities + SIZES.services + SIZES.routers + SIZES.policies;
  console.log(`  (${rows} rows written in ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  report(
    `${SIZES.identities} identities, ${SIZES.services} services`,
    await measure(url, bare.url),
    (await (await fetch(url)).text()).length,
  );
} finally {
  await ctl.stop();
  await bare.close();
  rmSync(dataDir, { recursive: true, force: true });
}
