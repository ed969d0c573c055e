// The HTTP edge on both engines over real sockets: oversize bodies are answered (not reset), slow clients
// are cut off by the documented timeouts, URL limits answer 414 with the envelope, and the request forms
// this uWS build does not serve are pinned down (node serves them; uWS's behaviour is asserted as it is, so
// a change of the uWS build shows up here and in docs/http.md).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, createApp } from '../app.js';
import {
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_MAX_HEADER_BYTES,
  DEFAULT_MAX_URL_BYTES,
  MAX_DISCARD_BYTES,
  UWS_BODY_TIMEOUT_MS,
} from '../edge.js';
import { dataEnvelope } from '../errors.js';
import { Router } from '../router.js';
import type { HttpServer } from '../types.js';
import { BodyCollector, MAX_BODY_PIECES, uwsBodyLength } from './body.js';
import { nodeServerOptions, originForm, serveNode } from './node.js';
import { serveUws } from './uws.js';

const HOST = '127.0.0.1';
type EngineName = 'uws' | 'node';

function makeApp(): App {
  const router = new Router<object>();
  router.add('GET', '/x', (req) =>
    dataEnvelope({ path: req.path, query: req.rawQuery.length, underscore: req.headers.x_y ?? null }),
  );
  router.add('POST', '/x', (req) => dataEnvelope({ bytes: req.body.length }));
  router.add('POST', '/headers', (req) =>
    dataEnvelope({ contentType: req.headers['content-type'] ?? null, accept: req.headers.accept ?? null }),
  );
  router.add('GET', '/slow', () => new Promise((done) => setTimeout(() => done(dataEnvelope({ slow: true })), 150)));
  router.add(
    'POST',
    '/slow',
    (req) => new Promise((done) => setTimeout(() => done(dataEnvelope({ bytes: req.body.length })), 1_200)),
  );
  return createApp({ router });
}

interface EdgeOptions {
  maxConnections?: number;
  /** node: headersTimeout; both: the body (request) timeout. */
  headers_ms?: number;
  body_ms?: number;
}

function serveEngine(engine: EngineName, app: App, o: EdgeOptions = {}): Promise<HttpServer> {
  const base = { host: HOST, port: 0, ...(o.maxConnections !== undefined ? { maxConnections: o.maxConnections } : {}) };
  if (engine === 'uws')
    return serveUws(app, { ...base, ...(o.body_ms !== undefined ? { bodyTimeout_ms: o.body_ms } : {}) });
  return serveNode(app, {
    ...base,
    ...(o.headers_ms !== undefined ? { headersTimeout_ms: o.headers_ms } : {}),
    ...(o.body_ms !== undefined ? { requestTimeout_ms: o.body_ms } : {}),
  });
}

interface RawReply {
  data: string;
  /** how the exchange ended: the server closed, reset, or we gave up waiting */
  end: 'closed' | 'reset' | 'timeout';
  elapsed_ms: number;
}

/** Writes bytes as they are; collects what comes back until the server closes or `wait_ms` passes. */
/** Sends `text` on a new connection (and `later`, if given, 150 ms after), collecting what comes back. */
function raw(port: number, text: string, wait_ms = 2_000, later?: string): Promise<RawReply> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = net.connect(port, HOST, () => {
      socket.write(text);
      if (later !== undefined) setTimeout(() => socket.writable && socket.write(later), 150);
    });
    let data = '';
    let done = false;
    const finish = (end: RawReply['end']) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ data, end, elapsed_ms: Date.now() - started });
    };
    const timer = setTimeout(() => finish('timeout'), wait_ms);
    socket.on('data', (c) => {
      data += c.toString('latin1');
    });
    socket.on('close', () => finish('closed'));
    socket.on('error', () => finish('reset'));
  });
}

function statusOf(text: string): number {
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
  return m === null ? 0 : Number(m[1]);
}

function envelopeOf(text: string): any {
  const at = text.indexOf('\r\n\r\n');
  return JSON.parse(text.slice(at + 4));
}

function headerLines(n: number): string {
  let out = '';
  for (let i = 0; i < n; i++) out += `x-h${i}: ${i}\r\n`;
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('originForm', () => {
  it('strips the scheme and authority of an absolute-form target', () => {
    expect(originForm('/a?b')).toBe('/a?b');
    expect(originForm('http://h:1/a/b?c=1')).toBe('/a/b?c=1');
    expect(originForm('https://h')).toBe('/');
    expect(originForm('http://h?q')).toBe('/?q');
    expect(originForm('*')).toBe('*');
  });
});

describe('uwsBodyLength', () => {
  it('refuses what this uWS build frames otherwise than a proxy may, else reads as bodyLength', () => {
    expect(uwsBodyLength({ 'content-length': '2, 3' })).toEqual({ kind: 'invalid' }); // two lines, joined
    expect(uwsBodyLength({ 'transfer-encoding': 'chunked', 'content-length': '5' })).toEqual({ kind: 'invalid' });
    expect(uwsBodyLength({ 'transfer-encoding': 'chunked, chunked' })).toEqual({ kind: 'invalid' });
    expect(uwsBodyLength({ 'transfer-encoding': '' })).toEqual({ kind: 'invalid' });
    expect(uwsBodyLength({ 'transfer-encoding': 'Chunked' })).toEqual({ kind: 'chunked' });
    expect(uwsBodyLength({ 'content-length': '007' })).toEqual({ kind: 'fixed', bytes: 7 });
    expect(uwsBodyLength({})).toEqual({ kind: 'none' });
  });
});

describe('node engine defaults', () => {
  it('are the documented timeouts and header bound', () => {
    expect(nodeServerOptions({ host: HOST, port: 0 })).toEqual({
      headersTimeout: 10_000,
      requestTimeout: 30_000,
      keepAliveTimeout: 5_000,
      connectionsCheckingInterval: 500,
      maxHeaderSize: 80 * 1024,
    });
    expect(() =>
      nodeServerOptions({ host: HOST, port: 0, headersTimeout_ms: 5_000, requestTimeout_ms: 1_000 }),
    ).toThrow(RangeError);
  });
});

describe('uWS engine body timer', () => {
  it(`is at most ${UWS_BODY_TIMEOUT_MS} ms: this uWS build's own idle timer closes a body still arriving soon after`, () => {
    expect(() => serveUws(makeApp(), { host: HOST, port: 0, bodyTimeout_ms: UWS_BODY_TIMEOUT_MS + 1 })).toThrow(
      RangeError,
    );
    expect(() => serveUws(makeApp(), { host: HOST, port: 0, bodyTimeout_ms: 0 })).toThrow(RangeError);
  });
});

describe('BodyCollector', () => {
  it('copies every piece into one buffer: the body holds no view of the reads it came in, whatever its length', () => {
    const read = Buffer.alloc(64 * 1024, 0x61);
    for (const expected of [null, 3_000]) {
      const c = new BodyCollector(1024 * 1024, expected);
      for (let i = 0; i < 3_000; i++) expect(c.push(read.subarray(i, i + 1))).toBe(true);
      const body = c.finish();
      expect(body.length).toBe(3_000);
      expect(body.buffer).not.toBe(read.buffer);
      // a chunked body's buffer grows by doubling, never past twice what it holds
      expect(body.buffer.byteLength).toBeLessThanOrEqual(2 * Math.max(3_000, 16 * 1024));
    }
  });

  it(`refuses past the limit, past the announced length and past ${MAX_BODY_PIECES} pieces`, () => {
    const over = new BodyCollector(10, null);
    expect([over.push(Buffer.alloc(6)), over.push(Buffer.alloc(6)), over.tooManyPieces]).toEqual([true, false, false]);
    const announced = new BodyCollector(100, 4);
    expect([announced.push(Buffer.alloc(3)), announced.push(Buffer.alloc(3))]).toEqual([true, false]);
    const pieces = new BodyCollector(1024 * 1024, null);
    for (let i = 0; i < MAX_BODY_PIECES; i++) pieces.push(Buffer.alloc(1));
    expect([pieces.tooManyPieces, pieces.push(Buffer.alloc(1)), pieces.tooManyPieces]).toEqual([false, false, true]);
  });
});

describe.each(['uws', 'node'] as const)('HTTP edge on the %s engine', (engine) => {
  let server: HttpServer;
  let port: number;
  let url: string;
  beforeAll(async () => {
    server = await serveEngine(engine, makeApp());
    port = server.port;
    url = `http://${HOST}:${port}`;
  });
  afterAll(async () => {
    await server.close();
  });

  it("answers a 2 MiB body with a 413 envelope that Node's fetch can read (no reset)", async () => {
    const body = Buffer.alloc(2 * 1024 * 1024, 0x61);
    const res = await fetch(`${url}/x`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(413);
    expect(res.headers.get('connection')?.toLowerCase()).toBe('close');
    expect(((await res.json()) as any).error.code).toBe('REQUEST_ENTITY_TOO_LARGE');
  });

  it('answers an oversize chunked body after reading it, with the 413 envelope', async () => {
    async function* chunks() {
      for (let i = 0; i < 24; i++) yield Buffer.alloc(64 * 1024, 0x62);
    }
    const res = await fetch(`${url}/x`, {
      method: 'POST',
      body: chunks() as never,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).error.code).toBe('REQUEST_ENTITY_TOO_LARGE');
  });

  it('a content-type sent twice is read by its first value (as Go and Node read it); other headers are joined', async () => {
    const reply = await raw(
      port,
      'POST /headers HTTP/1.1\r\nhost: a\r\nconnection: close\r\ncontent-type: application/json\r\n' +
        'content-type: text/plain\r\naccept: a/b\r\naccept: c/d\r\ncontent-length: 2\r\n\r\n{}',
    );
    expect(statusOf(reply.data), reply.data.slice(0, 200)).toBe(200);
    expect(envelopeOf(reply.data).data).toEqual({ contentType: 'application/json', accept: 'a/b, c/d' });
  });

  it(`a chunked body in more than ${MAX_BODY_PIECES} pieces is refused (413), one in fewer is served`, async () => {
    const chunks = (n: number) => `${'1\r\na\r\n'.repeat(n)}0\r\n\r\n`;
    const head =
      'POST /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\ntransfer-encoding: chunked\r\ncontent-type: application/json\r\n\r\n';
    const under = await raw(port, head + chunks(MAX_BODY_PIECES - 1000), 5_000);
    expect(statusOf(under.data), under.data.slice(0, 200)).toBe(200);
    expect(envelopeOf(under.data).data.bytes).toBe(MAX_BODY_PIECES - 1000);
    const over = await raw(port, head + chunks(4 * MAX_BODY_PIECES), 5_000);
    expect(statusOf(over.data), over.data.slice(0, 200)).toBe(413);
    expect(envelopeOf(over.data).error.code).toBe('REQUEST_ENTITY_TOO_LARGE');
  });

  it('a client waiting for 100 Continue with an oversize body: node answers 413 at once; uWS says continue, then 413', async () => {
    const reply = await new Promise<string>((resolve) => {
      const socket = net.connect(port, HOST, () =>
        socket.write('POST /x HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 2000000\r\n\r\n'),
      );
      let data = '';
      let sent = false;
      socket.on('data', (c) => {
        data += c.toString('latin1');
        if (!sent && data.startsWith('HTTP/1.1 100 Continue\r\n\r\n')) {
          sent = true;
          socket.write(Buffer.alloc(2_000_000, 0x61)); // the body, as a client told to continue sends it
        }
      });
      socket.on('close', () => resolve(data));
      socket.on('error', () => resolve(data));
      setTimeout(() => socket.destroy(), 3_000).unref();
    });
    const final = reply.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '');
    expect(reply.startsWith('HTTP/1.1 100 Continue')).toBe(engine === 'uws');
    expect(statusOf(final)).toBe(413);
    expect(envelopeOf(final).error.code).toBe('REQUEST_ENTITY_TOO_LARGE');
    // a body within the limit is continued by both
    const small = await raw(
      port,
      'POST /x HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 2\r\nconnection: close\r\n\r\n',
      500,
    );
    expect(small.data).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\n$/);
  });

  it('refuses a body announced beyond the discard bound at once', async () => {
    // at once: the body never completes, and a server waiting for it would answer at its body timeout (30 s); the
    // 413 must come long before (not within a tight wall-clock bound a loaded machine can miss) and close
    const r = await raw(
      port,
      `POST /x HTTP/1.1\r\nhost: a\r\ncontent-length: ${MAX_DISCARD_BYTES + 1}\r\n\r\n{`,
      DEFAULT_BODY_TIMEOUT_MS / 3,
    );
    expect(statusOf(r.data)).toBe(413);
    expect(r.end).not.toBe('timeout');
  });

  it(`answers a request target over ${DEFAULT_MAX_URL_BYTES} bytes with 414 and the envelope`, async () => {
    const ok = await raw(
      port,
      `GET /x?${'a'.repeat(DEFAULT_MAX_URL_BYTES - 3)} HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n`,
    );
    expect(statusOf(ok.data)).toBe(200);
    const long = await raw(
      port,
      `GET /x?${'a'.repeat(DEFAULT_MAX_URL_BYTES)} HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n`,
    );
    expect(statusOf(long.data)).toBe(414);
    const env = envelopeOf(long.data);
    expect(env.error.code).toBe('URI_TOO_LONG');
    expect(env.error.requestId).toMatch(/^[0-9a-zA-Z.-]{9}$/);
  });

  it('a malformed request pipelined behind one still being answered: node answers the first, then refuses', async () => {
    // GET /slow answers after 150 ms: the request behind it is read, and refused, while that answer is pending
    const first = 'GET /slow HTTP/1.1\r\nhost: a\r\n\r\n';
    const badChunk = 'POST /x HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n';
    const seconds = [
      'GARBAGE / HTTP/1.1\r\n\r\n',
      'GET /x HTTP/1.1\r\nhost: a\r\nbad header\r\n\r\n',
      // a request whose headers are complete, then a bad chunk: its error comes after the first answer too
      badChunk,
    ];
    const replies = await Promise.all(seconds.map((second) => raw(port, first + second, 1_000)));
    seconds.forEach((second, i) => {
      const r = replies[i]!;
      const statuses = [...r.data.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
      if (engine === 'node') {
        // the answer owed to the first request goes out, not lost with the connection
        expect(statuses, r.data).toEqual([200, second.startsWith('GARBAGE') ? 405 : 400]);
        expect(r.end).toBe('closed');
      } else {
        // this uWS build answers the first, then nothing: the connection stays open until its idle timer; a bad
        // chunk behind it makes uWS close the connection, the pending answer lost (docs/http.md)
        expect(statuses, r.data).toEqual(second === badChunk ? [] : [200]);
        expect(r.end).toBe(second === badChunk ? 'closed' : 'timeout');
      }
    });
  });

  it('serves absolute-form request targets (node) / gives no answer (this uWS build)', async () => {
    const r = await raw(port, 'GET http://a/x?q=1 HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n', 1_200);
    if (engine === 'node') {
      expect(statusOf(r.data)).toBe(200);
      expect(envelopeOf(r.data).data.path).toBe('/x');
    } else {
      expect(r.data).toBe('');
      expect(r.end).not.toBe('closed'); // uWS neither answers nor closes (its idle timeout ends it later)
    }
  });

  it('HTTP/1.0, `_` in header names, more than 48 header lines: node serves them, this uWS build gives no answer', async () => {
    const cases = await Promise.all([
      raw(port, 'GET /x HTTP/1.0\r\n\r\n', 1_200),
      raw(port, 'GET /x HTTP/1.1\r\nhost: a\r\nx_y: 1\r\nconnection: close\r\n\r\n', 1_200),
      raw(port, `GET /x HTTP/1.1\r\nhost: a\r\n${headerLines(47)}connection: close\r\n\r\n`, 1_200), // 49 lines
      raw(port, `GET /x HTTP/1.1\r\nhost: a\r\n${headerLines(46)}connection: close\r\n\r\n`, 1_200), // 48 lines
    ]);
    const [http10, underscore, lines49, lines48] = cases;
    expect(statusOf(lines48!.data)).toBe(200); // the last count uWS serves
    if (engine === 'node') {
      expect(statusOf(http10!.data)).toBe(200);
      expect(statusOf(underscore!.data)).toBe(200);
      expect(envelopeOf(underscore!.data).data.underscore).toBe('1');
      expect(statusOf(lines49!.data)).toBe(200);
    } else {
      for (const r of [http10!, underscore!, lines49!]) {
        expect(r.data).toBe('');
        expect(r.end).toBe('timeout');
      }
    }
  });

  it('unknown method tokens and CONNECT: node answers 405 with the envelope; this uWS build gives no answer', async () => {
    const cases = await Promise.all(
      ['FOO /x', 'get /x', 'PROPFIND /x', 'CONNECT a:1'].map((line) =>
        raw(port, `${line} HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n`, 600),
      ),
    );
    const [foo, lower, propfind, connect] = cases;
    if (engine === 'node') {
      for (const r of [foo!, lower!, connect!]) {
        expect(statusOf(r.data), r.data).toBe(405);
        expect(envelopeOf(r.data).error.code).toBe('METHOD_NOT_ALLOWED');
      }
      expect(statusOf(propfind!.data)).toBe(405); // a method node knows reaches the router
    } else {
      for (const r of [foo!, lower!, propfind!]) expect(r.data).toBe('');
    }
  });

  it('ambiguous framing and no Host: node answers 400; this uWS build closes without an answer', async () => {
    const post = 'POST /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n';
    const [both, teFirst, negative, noHost] = await Promise.all([
      raw(port, `${post}content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`, 600),
      raw(port, `${post}transfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n2\r\n{}\r\n0\r\n\r\n`, 600),
      raw(port, `${post}content-length: -1\r\n\r\n{}`, 600),
      raw(port, 'GET /x HTTP/1.1\r\nconnection: close\r\n\r\n', 600),
    ]);
    for (const r of [both!, teFirst!, negative!, noHost!]) {
      if (engine === 'node') expect(statusOf(r.data), r.data).toBe(400);
      else expect(r.data).toBe(''); // uWS's parser refuses them before Keel sees the request
      expect(r.end).toBe('closed');
    }
  });

  it('framing uWS reads otherwise than a proxy may (two lengths, repeated or unknown codings): 400, closed', async () => {
    const post = 'POST /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n';
    const chunked = '\r\n2\r\n{}\r\n0\r\n\r\n';
    const refused = await Promise.all([
      raw(port, `${post}content-length: 2\r\ncontent-length: 3\r\n\r\n{}`, 1_000),
      raw(port, `${post}content-length: 3\r\ncontent-length: 2\r\n\r\n{}`, 1_000),
      raw(port, `${post}content-length: 2\r\ncontent-length: 2\r\n\r\n{}`, 1_000),
      raw(port, `${post}transfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n${chunked}`, 1_000),
      raw(port, `${post}transfer-encoding: xchunked\r\n${chunked}`, 1_000),
    ]);
    for (const r of refused) {
      expect(statusOf(r.data), r.data).toBe(400);
      if (engine === 'uws') expect(envelopeOf(r.data).error.code).toBe('COULD_NOT_PARSE_BODY');
      expect(r.end).toBe('closed');
    }
    // one chunked line is served; a coding before chunked only by node (Keel decodes none: the body stays coded)
    const [ok, gzip] = await Promise.all([
      raw(port, `${post}transfer-encoding: chunked\r\n${chunked}`, 1_000),
      raw(port, `${post}transfer-encoding: gzip, chunked\r\n${chunked}`, 1_000),
    ]);
    expect(envelopeOf(ok!.data).data.bytes).toBe(2);
    expect(statusOf(gzip!.data)).toBe(engine === 'node' ? 200 : 400);
  });

  it('two lengths smuggling a pipelined request in the same write: the connection is closed, that request unserved', async () => {
    // a proxy reading the second length forwards the GET as this POST's body; uWS reads the first (0)
    const get = 'GET /x HTTP/1.1\r\nhost: a\r\n\r\n';
    const r = await raw(
      port,
      `POST /x HTTP/1.1\r\nhost: a\r\ncontent-length: 0\r\ncontent-length: ${get.length}\r\n\r\n${get}`,
      1_000,
    );
    expect(r.data.match(/HTTP\/1\.1 \d{3}/g) ?? []).toEqual(engine === 'node' ? ['HTTP/1.1 400'] : []);
    expect(r.end).toBe('closed');
  });

  it('a request smuggled in a later write behind refused framing is never served, HEAD included', async () => {
    const get = 'GET /x HTTP/1.1\r\nhost: a\r\n\r\n';
    for (const method of ['POST', 'HEAD']) {
      for (const framing of [`content-length: 0\r\ncontent-length: ${get.length}`, 'transfer-encoding: xchunked']) {
        const r = await raw(port, `${method} /x HTTP/1.1\r\nhost: a\r\n${framing}\r\n\r\n`, 1_000, get);
        expect(r.data.match(/HTTP\/1\.1 \d{3}/g), `${method} ${framing}: ${r.data}`).toEqual(['HTTP/1.1 400']);
        expect(r.end).not.toBe('timeout');
      }
    }
  });

  it('chunk extensions: node reads the body; this uWS build closes without an answer', async () => {
    const r = await raw(
      port,
      'POST /x HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n2;ext=1\r\n{}\r\n0\r\n\r\n',
      1_200,
    );
    if (engine === 'node') {
      expect(statusOf(r.data)).toBe(200);
      expect(envelopeOf(r.data).data.bytes).toBe(2);
    } else {
      expect(r.data).toBe('');
      expect(r.end).not.toBe('timeout');
    }
  });

  it('pipelined requests behind an asynchronous response: node answers both; this uWS build drops the connection', async () => {
    const r = await raw(
      port,
      'GET /slow HTTP/1.1\r\nhost: a\r\n\r\nGET /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n',
      1_500,
    );
    if (engine === 'node') {
      expect(r.data.match(/HTTP\/1\.1 200/g)?.length).toBe(2);
      expect(r.data.indexOf('"slow":true')).toBeLessThan(r.data.indexOf('"path":"/x"'));
    } else {
      expect(r.data).toBe('');
      expect(r.end).not.toBe('timeout');
    }
    // pipelined requests answered synchronously are served by both
    const sync = await raw(
      port,
      'GET /x HTTP/1.1\r\nhost: a\r\n\r\nGET /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n',
    );
    expect(sync.data.match(/HTTP\/1\.1 200/g)?.length).toBe(2);
  });
});

describe('node engine: connections past twice maxConnections', () => {
  it('are dropped at once (the engine bounds sockets itself)', async () => {
    const server = await serveEngine('node', makeApp(), { maxConnections: 2 });
    const idle: net.Socket[] = [];
    try {
      for (let i = 0; i < 4; i++) {
        const s = net.connect(server.port, HOST);
        s.on('error', () => {});
        idle.push(s);
        await new Promise((r) => s.once('connect', r));
      }
      await sleep(50);
      const fifth = await raw(server.port, 'GET /x HTTP/1.1\r\nhost: a\r\n\r\n', 1_500);
      expect(fifth.data).toBe('');
      expect(fifth.end).not.toBe('timeout');
      for (const s of idle) s.destroy();
      await sleep(100);
      const later = await raw(server.port, 'GET /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n');
      expect(statusOf(later.data)).toBe(200);
    } finally {
      for (const s of idle) s.destroy();
      await server.close();
    }
  });
});

describe('URL and header limits of the engines themselves', () => {
  it(`node: request line and headers over ${DEFAULT_MAX_HEADER_BYTES} bytes → 431 with the envelope`, async () => {
    const server = await serveEngine('node', makeApp());
    try {
      const r = await raw(server.port, `GET /x?${'a'.repeat(DEFAULT_MAX_HEADER_BYTES)} HTTP/1.1\r\nhost: a\r\n\r\n`);
      expect(statusOf(r.data)).toBe(431);
      expect(envelopeOf(r.data).error.code).toBe('REQUEST_HEADER_FIELDS_TOO_LARGE');
    } finally {
      await server.close();
    }
  });

  it('uws: a request line of 128 KiB gets no HTTP answer (the parser drops the connection)', async () => {
    const server = await serveEngine('uws', makeApp());
    try {
      const r = await raw(server.port, `GET /x?${'a'.repeat(128 * 1024)} HTTP/1.1\r\nhost: a\r\n\r\n`);
      expect(r.data).toBe('');
      expect(r.end).not.toBe('timeout');
    } finally {
      await server.close();
    }
  });
});

describe.each(['uws', 'node'] as const)('slow clients on the %s engine', (engine) => {
  const HEADERS_MS = 1_000;
  const BODY_MS = 1_500;
  const TICK_MS = 100;

  it('a stalled body is answered 408 and closed after the body timeout', async () => {
    const server = await serveEngine(engine, makeApp(), { headers_ms: HEADERS_MS, body_ms: BODY_MS });
    try {
      const r = await raw(
        server.port,
        'POST /x HTTP/1.1\r\nhost: a\r\ncontent-length: 100\r\n\r\n{"a":',
        BODY_MS + 8_000, // slack for a loaded machine: the 408 comes after BODY_MS, a success does not wait longer
      );
      expect(statusOf(r.data)).toBe(408);
      expect(envelopeOf(r.data).error.code).toBe('REQUEST_TIMEOUT');
      expect(r.elapsed_ms).toBeGreaterThanOrEqual(BODY_MS - 100);
      expect(r.end).toBe('closed');
    } finally {
      await server.close();
    }
  });

  it('a body that arrived in time is answered by its handler even past the body timeout', async () => {
    const server = await serveEngine(engine, makeApp(), { headers_ms: 500, body_ms: 800 });
    try {
      const r = await raw(
        server.port,
        'POST /slow HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}',
        4_000,
      );
      expect(statusOf(r.data)).toBe(200);
      expect(envelopeOf(r.data).data.bytes).toBe(2);
    } finally {
      await server.close();
    }
  });

  it('60 trickling clients with max-connections 50 lock a normal client out for at most the timeouts', async () => {
    const server = await serveEngine(engine, makeApp(), {
      maxConnections: 50,
      headers_ms: HEADERS_MS,
      body_ms: BODY_MS,
    });
    const sockets: net.Socket[] = [];
    let trickling = true;
    let ticker: NodeJS.Timeout | undefined;
    try {
      // uWS bounds requests in flight (bodies being read), node bounds connections (headers count too): every
      // trickler sends its body one byte every 200 ms, on node half of them trickle their headers instead
      for (let i = 0; i < 60; i++) {
        const s = net.connect(server.port, HOST);
        s.on('error', () => {});
        sockets.push(s);
        const headersOnly = engine === 'node' && i % 2 === 0;
        s.write(
          headersOnly
            ? 'GET /x HTTP/1.1\r\nhost: a\r\n'
            : 'POST /x HTTP/1.1\r\nhost: a\r\ncontent-length: 100000\r\n\r\n',
        );
      }
      void (async () => {
        while (trickling) {
          for (const s of sockets) if (!s.destroyed && s.writable) s.write('a');
          await sleep(200);
        }
      })();
      await sleep(300);
      // Time counted in ticks of this event loop (as the server's timeouts are), not in wall-clock ms: a loaded
      // machine stretches both alike, where a wall-clock bound (BODY_MS + 3 s) could fail.
      let ticks = 0;
      ticker = setInterval(() => ticks++, TICK_MS);
      const started = Date.now();
      const first = await raw(server.port, 'GET /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n');
      expect(statusOf(first.data)).toBe(429); // the tricklers hold every slot
      let status = 0;
      while (Date.now() - started < BODY_MS + 10_000) {
        const r = await raw(server.port, 'GET /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n');
        status = statusOf(r.data);
        if (status === 200) break;
        await sleep(100);
      }
      clearInterval(ticker);
      expect(status).toBe(200);
      // served within the longest timeout (plus the check interval and slack)
      expect(ticks).toBeLessThan((BODY_MS + 3_000) / TICK_MS);
    } finally {
      clearInterval(ticker);
      trickling = false;
      for (const s of sockets) s.destroy();
      await server.close();
    }
  });
});
