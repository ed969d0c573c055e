/**
 * Prometheus metrics: `GET /metrics` on a listener of its own (`--metrics-listen`), in Prometheus's text format.
 *
 * Every figure is read when collected (a gauge's `collect`, the cluster's state sampled once per collection), so a
 * request, a write or an apply pays nothing for it, except the HTTP responses per status code and their response
 * times, which the app counts in typed arrays (http/app.ts). The process's own
 * metrics (CPU, memory, event loop delay, GC: prom-client's defaults) are registered once per process and served
 * beside this controller's. No metric carries a secret or a per-entity value: counts, indexes and states only.
 */
import { Counter, collectDefaultMetrics, Gauge, type Metric, Registry } from 'prom-client';
import {
  type App,
  createApp,
  RESPONSE_TIME_BOUNDS_MS,
  type ResponseTimes,
  ROUTE_STATUS_CLASS_NAMES,
  ROUTE_STATUS_CLASSES,
} from '../http/app.js';
import { Router } from '../http/router.js';
import { serve } from '../http/serve.js';
import type { HttpServer } from '../http/types.js';
import type { Services } from './api/services.js';
import type { ClusterNode } from './cluster/node.js';
import type { RouterControl } from './routers/control.js';
import { KEEL_VERSION } from './version.js';

export const METRICS_PATH = '/metrics';
/** Bound on connections to the metrics listener: a handful of scrapers, never thousands. */
export const METRICS_MAX_CONNECTIONS = 64;
/**
 * Scrapes closer together than this get the previous answer: a scraper asks every 15 s or so, and anyone hammering
 * the listener then costs the node the sends, not a collection of every metric per request (about 0.7 ms each).
 */
export const METRICS_MIN_INTERVAL_MS = 1_000;

/** What the gauges read, each time they are scraped. */
export interface MetricsSources {
  svc: Services;
  /** The API's app: its responses per status code. */
  app: App;
  cluster: ClusterNode | null;
  routerControl: RouterControl | null;
}

/** A controller's metrics: the registry, and what its gauges read, sampled once per collection. */
export interface ControllerMetrics {
  registry: Registry;
  /** Samples the state the gauges read (the cluster's Raft status and members), before a collection. */
  sample(): void;
}

let processRegistry: Registry | null = null;

/** prom-client's process metrics, registered once per process (they install process-wide observers). */
function processMetrics(): Registry {
  if (processRegistry === null) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

function gauge(
  registry: Registry,
  name: string,
  help: string,
  labelNames: string[],
  collect: (g: Gauge<string>) => void,
): void {
  new Gauge({
    name,
    help,
    labelNames,
    registers: [registry],
    collect(this: Gauge<string>) {
      this.reset();
      collect(this);
    },
  });
}

/** A gauge without labels whose value `value()` gives at each collection. */
function scalar(registry: Registry, name: string, help: string, value: () => number): void {
  gauge(registry, name, help, [], (g) => g.set(value()));
}

/** This controller's metrics (see the module comment). */
export function controllerMetrics(src: MetricsSources): ControllerMetrics {
  // the process metrics start with the first controller, not its first scrape: prom-client's CPU counters count
  // from their registration
  processMetrics();
  const registry = new Registry();
  const { svc, app, cluster } = src;
  const store = svc.store;
  gauge(
    registry,
    'keel_info',
    'This controller: its version and cluster member id ("" alone); always 1',
    ['version', 'node_id'],
    (g) => g.set({ version: KEEL_VERSION, node_id: cluster?.id ?? '' }, 1),
  );
  gauge(registry, 'keel_store_rows', 'Rows held per entity type', ['entity'], (g) => {
    for (const [entity, c] of store.collections) g.set({ entity }, c.size);
  });
  scalar(
    registry,
    'keel_store_applied_index',
    'Index of the last command applied to the store',
    () => store.appliedIndex,
  );
  scalar(
    registry,
    'keel_store_durable_index',
    'Index of the last command the store has on disk',
    () => store.durableIndex,
  );
  scalar(registry, 'keel_store_failed', '1 once the store failed a write (it then refuses writes), else 0', () =>
    store.failed === null ? 0 : 1,
  );
  new Counter({
    name: 'keel_http_responses_total',
    help: 'API responses since the start, per HTTP status code',
    labelNames: ['code'],
    registers: [registry],
    collect(this: Counter<string>) {
      this.reset();
      const counts = app.responseCounts;
      for (let code = 0; code < counts.length; code++) {
        if (counts[code]! > 0) this.inc({ code: String(code) }, counts[code]!);
      }
    },
  });
  registry.registerMetric(responseTimeHistogram(app.responseTimes));
  routeMetrics(registry, app);
  scalar(
    registry,
    'keel_router_connections',
    "Routers connected to this controller's router control listener",
    () => src.routerControl?.connectionCount ?? 0,
  );
  const sample = cluster === null ? () => {} : clusterMetrics(registry, cluster);
  return { registry, sample };
}

/** One sample of a metric of Keel's own: its series name (`<name>_sum`, …), labels and value. */
type Sample = { metricName: string; labels: Record<string, string>; value: number };

/**
 * A metric whose samples `samples()` gives at each collection, formatted by prom-client's registry (it reads `name`,
 * `help`, `type` and `get()`'s values): for figures counted in typed arrays, which prom-client's Histogram and
 * Summary (they observe values one by one) cannot take.
 */
function precounted(name: string, help: string, type: 'histogram' | 'summary', samples: () => Sample[]): Metric {
  const metric = {
    name,
    help,
    type,
    aggregator: 'sum',
    get: async () => ({ name, help, type, aggregator: 'sum', values: samples() }),
    reset: () => {},
  };
  return metric as unknown as Metric;
}

/**
 * `keel_http_request_duration_seconds`: the app's response-time histogram (http/app.ts counts it, one bucket increment
 * per response) as a Prometheus histogram.
 */
function responseTimeHistogram(times: ResponseTimes): Metric {
  const name = 'keel_http_request_duration_seconds';
  const bounds = RESPONSE_TIME_BOUNDS_MS.map((ms) => String(ms / 1000));
  const help = 'API response times, from the request read to the response handed to the HTTP engine';
  return precounted(name, help, 'histogram', () => {
    const values: Sample[] = [];
    let cumulative = 0;
    for (let i = 0; i < times.counts.length; i++) {
      cumulative += times.counts[i]!;
      const le = i < bounds.length ? bounds[i]! : '+Inf';
      values.push({ metricName: `${name}_bucket`, labels: { le }, value: cumulative });
    }
    values.push({ metricName: `${name}_sum`, labels: {}, value: times.sum_ms[0]! / 1000 });
    values.push({ metricName: `${name}_count`, labels: {}, value: cumulative });
    return values;
  });
}

/**
 * Per route (method and pattern, e.g. `GET /edge/management/v1/identities/{id}`): `keel_http_route_responses_total`
 * by status class, and `keel_http_route_duration_seconds` (a summary: `_sum` and `_count`, no quantiles), for the
 * routes answered at least once. The labels are the router's patterns, never a request's own path, so their number
 * is bounded by the routes (about 500), not by what clients send.
 */
function routeMetrics(registry: Registry, app: App): void {
  const stats = app.routeStats;
  new Counter({
    name: 'keel_http_route_responses_total',
    help: 'API responses since the start, per route and status class (requests that matched no route are not counted here)',
    labelNames: ['method', 'route', 'class'],
    registers: [registry],
    collect(this: Counter<string>) {
      this.reset();
      const routes = app.router.routes();
      for (let slot = 0; slot < routes.length; slot++) {
        for (let c = 0; c < ROUTE_STATUS_CLASSES; c++) {
          const n = stats.counts[slot * ROUTE_STATUS_CLASSES + c]!;
          if (n > 0) {
            const r = routes[slot]!;
            this.inc({ method: r.method, route: r.pattern, class: ROUTE_STATUS_CLASS_NAMES[c]! }, n);
          }
        }
      }
    },
  });
  const name = 'keel_http_route_duration_seconds';
  const help = 'API response times per route, from the request read to the response handed to the HTTP engine';
  const summary = precounted(name, help, 'summary', () => {
    const values: Sample[] = [];
    const routes = app.router.routes();
    for (let slot = 0; slot < routes.length; slot++) {
      const n = stats.timed[slot]!;
      if (n === 0) continue;
      const labels = { method: routes[slot]!.method, route: routes[slot]!.pattern };
      values.push({ metricName: `${name}_sum`, labels, value: stats.sum_ms[slot]! / 1000 });
      values.push({ metricName: `${name}_count`, labels, value: n });
    }
    return values;
  });
  registry.registerMetric(summary);
}

/**
 * A cluster member's Raft and membership gauges, all read from one sample of its state (the returned function takes
 * it), so that one collection never shows, say, a term and a leader of two different moments.
 */
function clusterMetrics(registry: Registry, cluster: ClusterNode): () => void {
  let status = cluster.status();
  let members = cluster.memberView();
  scalar(registry, 'keel_raft_term', 'Current Raft term', () => status.term);
  scalar(registry, 'keel_raft_commit_index', 'Highest log index known committed', () => status.commit);
  scalar(registry, 'keel_raft_applied_index', 'Highest log index applied on this member', () => status.applied);
  scalar(
    registry,
    'keel_raft_snapshot_index',
    'Index of the latest snapshot (the log is compacted up to it)',
    () => status.snapshotIndex,
  );
  scalar(registry, 'keel_raft_is_leader', '1 while this member leads, else 0', () =>
    status.role === 'leader' ? 1 : 0,
  );
  scalar(registry, 'keel_raft_has_leader', '1 while this member knows a leader, else 0', () =>
    status.leader === null ? 0 : 1,
  );
  gauge(registry, 'keel_cluster_members', 'Members of the applied configuration, by role', ['role'], (g) => {
    const voters = members.filter((m) => m.voter).length;
    g.set({ role: 'voter' }, voters);
    g.set({ role: 'learner' }, members.length - voters);
  });
  scalar(
    registry,
    'keel_cluster_members_online',
    'Members that answered their last status poll (this one included)',
    () => members.filter((m) => m.online).length,
  );
  let clusterVersion = cluster.clusterStateMachineVersion();
  scalar(
    registry,
    'keel_state_machine_version',
    'State-machine version this member applies (its release)',
    () => cluster.stateMachineVersion,
  );
  scalar(
    registry,
    'keel_cluster_state_machine_version',
    "The cluster's state-machine version as applied here: below keel_state_machine_version while an upgrade is under way",
    () => clusterVersion,
  );
  return () => {
    status = cluster.status();
    members = cluster.memberView();
    clusterVersion = cluster.clusterStateMachineVersion();
  };
}

/** The metrics text: this controller's metrics (its state sampled first), then the process's. */
export async function scrape(metrics: ControllerMetrics): Promise<string> {
  metrics.sample();
  const own = await metrics.registry.metrics();
  return `${own}${await processMetrics().metrics()}`;
}

/** Where the metrics listener listens, and how often it collects (METRICS_MIN_INTERVAL_MS by default). */
export interface MetricsListenOptions {
  host: string;
  port: number;
  minInterval_ms?: number;
}

/**
 * Serves `GET /metrics` (nothing else) on `host:port`: HTTPS with `tls`, else plain HTTP. Concurrent scrapes share one
 * collection, and one made less than `minInterval_ms` after the last collection began gets its text.
 */
export function serveMetrics(
  metrics: ControllerMetrics,
  opts: MetricsListenOptions & { tls?: { key: string; cert: string } },
): Promise<HttpServer> {
  const minInterval_ms = opts.minInterval_ms ?? METRICS_MIN_INTERVAL_MS;
  const headers = Object.freeze({ 'content-type': metrics.registry.contentType });
  let last: { at_ms: number; text: Promise<string> } | null = null;
  const collect = (): Promise<string> => {
    const now_ms = performance.now();
    if (last === null || now_ms - last.at_ms >= minInterval_ms) {
      const text = scrape(metrics);
      const entry = { at_ms: now_ms, text };
      last = entry;
      // a failed collection is not served again: the next scrape collects anew
      text.catch(() => {
        if (last === entry) last = null;
      });
    }
    return last.text;
  };
  const router = new Router();
  router.add('GET', METRICS_PATH, async () => ({ status: 200, headers, body: await collect() }));
  const app = createApp({ router, cors: false, maxBodyBytes: 0 });
  return serve(app, {
    engine: 'node',
    host: opts.host,
    port: opts.port,
    maxConnections: METRICS_MAX_CONNECTIONS,
    ...(opts.tls ? { tls: opts.tls } : {}),
  });
}
