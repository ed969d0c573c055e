/**
 * `GET /metrics` (src/metrics.ts) on a single node: Prometheus's text format; the store's rows, the API's responses
 * per status code and the process's own metrics, each following what the API did; nothing but `/metrics` on that
 * listener; no secret in it; its connection bound; scrapes closer than METRICS_MIN_INTERVAL_MS sharing one collection;
 * HTTPS with the API's certificate when the API is HTTPS. The cluster's metrics are in test/cluster/cli.test.ts.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESPONSE_TIME_BOUNDS_MS } from '../../http/app.js';
import { metricsListenOf } from '../../src/cli/main.js';
import { METRICS_MAX_CONNECTIONS, METRICS_MIN_INTERVAL_MS } from '../../src/metrics.js';
import { KEEL_VERSION } from '../../src/version.js';
import { ADMIN_PASSWORD, call, login, startServer, type TestServer } from '../support/server.js';
import { httpsFetch, trustCa } from '../support/tls-call.js';

let srv: TestServer;
let admin: string;
let metricsUrl: string;

beforeAll(async () => {
  // collected at every scrape here (minInterval_ms 0), so that each one shows the requests just made
  srv = await startServer({ metrics: { host: '127.0.0.1', port: 0, minInterval_ms: 0 } });
  admin = await login(srv.base);
  metricsUrl = `http://127.0.0.1:${srv.ctl.metricsPort}/metrics`;
});
afterAll(() => srv.stop());

/** One sample's value from Prometheus text: `name{labels} value`; undefined when absent. */
function sample(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

async function scrape(): Promise<string> {
  const r = await fetch(metricsUrl);
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return r.text();
}

describe('GET /metrics on a single node', () => {
  it('serves the controller metrics and the process metrics, with their types', async () => {
    const text = await scrape();
    expect(sample(text, `keel_info{version="${KEEL_VERSION}",node_id=""}`)).toBe(1);
    expect(sample(text, 'keel_store_failed')).toBe(0);
    expect(sample(text, 'keel_store_applied_index')).toBeGreaterThan(0);
    expect(sample(text, 'keel_router_connections')).toBe(0);
    expect(text).toContain('# TYPE keel_http_responses_total counter');
    expect(text).toContain('# TYPE keel_store_rows gauge');
    // the process's own (prom-client's defaults)
    expect(sample(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(sample(text, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    // no cluster, no Raft metrics
    expect(text).not.toContain('keel_raft_term');
  });

  it('follows the API: a create adds a row and a 201, a missing id a 404', async () => {
    const before = await scrape();
    const rows = sample(before, 'keel_store_rows{entity="identities"}')!;
    const created = sample(before, 'keel_http_responses_total{code="201"}') ?? 0;
    const missing = sample(before, 'keel_http_responses_total{code="404"}') ?? 0;
    const r = await call('POST', `${srv.mgmt}/identities`, {
      token: admin,
      body: { name: 'metrics-one', type: 'User', isAdmin: false },
    });
    expect(r.status, r.text).toBe(201);
    expect((await call('GET', `${srv.mgmt}/identities/no-such-id`, { token: admin })).status).toBe(404);
    const after = await scrape();
    expect(sample(after, 'keel_store_rows{entity="identities"}')).toBe(rows + 1);
    expect(sample(after, 'keel_http_responses_total{code="201"}')).toBe(created + 1);
    expect(sample(after, 'keel_http_responses_total{code="404"}')).toBe(missing + 1);
    expect(sample(after, 'keel_store_applied_index')).toBeGreaterThan(sample(before, 'keel_store_applied_index')!);
  });

  it('times every response: the histogram counts what the responses counter counts, in cumulative buckets', async () => {
    // the scrape's own request is on the metrics listener, not the API: both figures are read in one collection
    const text = await scrape();
    expect(text).toContain('# TYPE keel_http_request_duration_seconds histogram');
    let responses = 0;
    for (const line of text.split('\n')) {
      if (line.startsWith('keel_http_responses_total{')) responses += Number(line.split(' ')[1]);
    }
    const count = sample(text, 'keel_http_request_duration_seconds_count')!;
    expect(count).toBeGreaterThan(0);
    expect(count).toBe(responses);
    const buckets = RESPONSE_TIME_BOUNDS_MS.map(
      (ms) => sample(text, `keel_http_request_duration_seconds_bucket{le="${ms / 1000}"}`)!,
    );
    expect(buckets.every(Number.isFinite)).toBe(true);
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]).toBeGreaterThanOrEqual(buckets[i - 1]!);
    expect(sample(text, 'keel_http_request_duration_seconds_bucket{le="+Inf"}')).toBe(count);
    // the sum (seconds) lies between what the buckets allow: each response above its bucket's lower bound, at most
    // its upper one (no response here takes the 10 s of the last bound)
    const sum = sample(text, 'keel_http_request_duration_seconds_sum')!;
    expect(sample(text, 'keel_http_request_duration_seconds_bucket{le="+Inf"}')).toBe(buckets.at(-1));
    let low = 0;
    let high = 0;
    for (let i = 0; i < buckets.length; i++) {
      const inBucket = buckets[i]! - (i > 0 ? buckets[i - 1]! : 0);
      low += inBucket * (i > 0 ? RESPONSE_TIME_BOUNDS_MS[i - 1]! / 1000 : 0);
      high += inBucket * (RESPONSE_TIME_BOUNDS_MS[i]! / 1000);
    }
    expect(sum).toBeGreaterThan(low);
    expect(sum).toBeLessThanOrEqual(high);
  });

  it('counts and times the responses per route: by its pattern, never by the path a client sent', async () => {
    const detail = 'method="GET",route="/edge/management/v1/identities/{id}"';
    const create = 'method="POST",route="/edge/management/v1/identities"';
    const before = await scrape();
    const found = sample(before, `keel_http_route_responses_total{${detail},class="2xx"}`) ?? 0;
    const missing = sample(before, `keel_http_route_responses_total{${detail},class="4xx"}`) ?? 0;
    const timed = sample(before, `keel_http_route_duration_seconds_count{${detail}}`) ?? 0;
    const created = sample(before, `keel_http_route_responses_total{${create},class="2xx"}`) ?? 0;
    const r = await call('POST', `${srv.mgmt}/identities`, {
      token: admin,
      body: { name: 'metrics-route', type: 'User', isAdmin: false },
    });
    expect(r.status, r.text).toBe(201);
    const id = r.body.data.id as string;
    expect((await call('GET', `${srv.mgmt}/identities/${id}`, { token: admin })).status).toBe(200);
    expect((await call('GET', `${srv.mgmt}/identities/${id}x`, { token: admin })).status).toBe(404);
    // a path no route matches is not a route of its own
    expect((await call('GET', `${srv.mgmt}/no-such-collection-${id}`, { token: admin })).status).toBe(404);
    const after = await scrape();
    expect(after).toContain('# TYPE keel_http_route_responses_total counter');
    expect(after).toContain('# TYPE keel_http_route_duration_seconds summary');
    expect(sample(after, `keel_http_route_responses_total{${detail},class="2xx"}`)).toBe(found + 1);
    expect(sample(after, `keel_http_route_responses_total{${detail},class="4xx"}`)).toBe(missing + 1);
    expect(sample(after, `keel_http_route_responses_total{${create},class="2xx"}`)).toBe(created + 1);
    expect(sample(after, `keel_http_route_duration_seconds_count{${detail}}`)).toBe(timed + 2);
    expect(sample(after, `keel_http_route_duration_seconds_sum{${detail}}`)).toBeGreaterThan(0);
    expect(after).not.toContain(id);
    expect(after).not.toContain('no-such-collection');
  });

  it('holds no secret: neither the admin password nor a session token', async () => {
    const text = await scrape();
    expect(text).not.toContain(ADMIN_PASSWORD);
    expect(text).not.toContain(admin);
  });

  it('serves nothing else: other paths 404, other methods 405, bodies 413, the APIs are not there', async () => {
    const base = `http://127.0.0.1:${srv.ctl.metricsPort}`;
    const other = await fetch(`${base}/metrics/x`);
    expect(other.status).toBe(404);
    expect(((await other.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
    const post = await fetch(`${base}/metrics`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(((await post.json()) as { error: { code: string } }).error.code).toBe('METHOD_NOT_ALLOWED');
    const body = await fetch(`${base}/metrics`, { method: 'POST', body: 'x' });
    expect(body.status).toBe(413);
    expect(((await body.json()) as { error: { code: string } }).error.code).toBe('REQUEST_ENTITY_TOO_LARGE');
    expect((await fetch(`${base}/edge/management/v1/identities`)).status).toBe(404);
    expect((await fetch(`${base}/version`)).status).toBe(404);
  });

  it(`answers 429 on connections beyond ${METRICS_MAX_CONNECTIONS}`, async () => {
    const port = srv.ctl.metricsPort;
    const held: Socket[] = [];
    try {
      for (let i = 0; i < METRICS_MAX_CONNECTIONS; i++) {
        const s = connect(port, '127.0.0.1');
        await new Promise((resolve, reject) => s.once('connect', resolve).once('error', reject));
        held.push(s);
      }
      expect(await rawStatus(port)).toBe(429);
    } finally {
      for (const s of held) s.destroy();
    }
    // the held ones gone, a new connection is served again
    await expect.poll(() => rawStatus(port), { timeout: 5_000 }).toBe(200);
  });
});

/** The status of `GET /metrics` on a new connection (not one of fetch's pooled ones). */
function rawStatus(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () =>
      s.write('GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n'),
    );
    let head = '';
    s.setTimeout(5_000, () => s.destroy(new Error('no answer')));
    s.on('data', (d: Buffer) => {
      head += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
      if (m) {
        resolve(Number(m[1]));
        s.destroy();
      }
    });
    s.on('error', reject);
  });
}

describe(`scrapes less than ${METRICS_MIN_INTERVAL_MS} ms apart (the default)`, () => {
  it('get the last collection; a later one collects again', async () => {
    const node = await startServer({ metrics: { host: '127.0.0.1', port: 0 } });
    try {
      const url = `http://127.0.0.1:${node.ctl.metricsPort}/metrics`;
      const token = await login(node.base);
      const rows = (text: string) => sample(text, 'keel_store_rows{entity="identities"}');
      const t0 = performance.now();
      const first = await (await fetch(url)).text();
      const r = await call('POST', `${node.mgmt}/identities`, {
        token,
        body: { name: 'metrics-cached', type: 'User', isAdmin: false },
      });
      expect(r.status, r.text).toBe(201);
      // a burst at once: all the first collection's text, the new identity not in it (a few ms of work: well within
      // the interval, said rather than assumed)
      const burst = await Promise.all(Array.from({ length: 20 }, async () => (await fetch(url)).text()));
      expect(performance.now() - t0).toBeLessThan(METRICS_MIN_INTERVAL_MS);
      for (const text of burst) expect(text).toBe(first);
      await new Promise((resolve) => setTimeout(resolve, METRICS_MIN_INTERVAL_MS));
      expect(rows(await (await fetch(url)).text())).toBe(rows(first)! + 1);
    } finally {
      await node.stop();
    }
  });
});

describe('--metrics-listen', () => {
  it('takes HOST:PORT; plain HTTP only on a loopback address', () => {
    expect(metricsListenOf(undefined, true)).toBeUndefined();
    expect(metricsListenOf('0.0.0.0:9100', true)).toEqual({ host: '0.0.0.0', port: 9100 });
    expect(metricsListenOf('127.0.0.1:9100', false)).toEqual({ host: '127.0.0.1', port: 9100 });
    expect(() => metricsListenOf('0.0.0.0:9100', false)).toThrow(/loopback/);
    expect(() => metricsListenOf('9100', true)).toThrow(/HOST:PORT/);
    expect(() => metricsListenOf('127.0.0.1:99999', true)).toThrow(/invalid port/);
  });
});

describe('GET /metrics with API TLS', () => {
  it('is served over HTTPS with the API certificate', async () => {
    const tls = await startServer({ apiTls: true, engine: 'node', metrics: { host: '127.0.0.1', port: 0 } });
    try {
      trustCa(tls.ctl.svc.pki!.caPems[0]!);
      const r = await httpsFetch(`https://127.0.0.1:${tls.ctl.metricsPort}/metrics`, { method: 'GET', headers: {} });
      expect(r.status).toBe(200);
      expect(sample(r.text, 'keel_store_failed')).toBe(0);
      // not in plain HTTP
      await expect(fetch(`http://127.0.0.1:${tls.ctl.metricsPort}/metrics`)).rejects.toThrow();
    } finally {
      await tls.stop();
    }
  });
});
