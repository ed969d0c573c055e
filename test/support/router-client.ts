/**
 * A minimal edge router for tests: enrolls over the client API (`POST /enroll/erott` with CSRs made in-process),
 * then connects to the controller's router control listener over mutual TLS with its enrolled client certificate
 * and says hello through a tRPC client (src/routers/control.ts). `probe()` opens the WebSocket without tRPC, to
 * see refusals (the upgrade's HTTP status) and closes (the close code).
 */
import { createTRPCClient, createWSClient, wsLink } from '@trpc/client';
import { expect } from 'vitest';
import WebSocket from 'ws';
import { type CryptoKeyPair, exportKeyPem, generateKeyPair, x509 } from '../../src/pki/crypto.js';
import { ROUTER_CONTROL_PATH, type RouterControlRouter, type RouterHello } from '../../src/routers/control.js';
import { call } from './server.js';

/** What a router holds after enrolling: its key, its client certificate chain and the CAs it trusts. */
export interface RouterCreds {
  id: string;
  key: string;
  cert: string;
  ca: string;
}

export const DEFAULT_HELLO: RouterHello = {
  version: 'v1.1.0',
  revision: 'abc123',
  buildDate: '2026-11-26',
  os: 'linux',
  arch: 'amd64',
  hostname: 'router1.example.test',
  listeners: ['tls:router1.example.test:3022', 'wss:router1.example.test:3023'],
};

export async function csr(cn: string, keys: CryptoKeyPair): Promise<string> {
  const req = await x509.Pkcs10CertificateRequestGenerator.create({
    name: `CN=${cn}`,
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
  });
  return req.toString('pem');
}

/** Creates an edge router (`body`: its create fields) and enrolls it; answers its credentials. */
export async function enrolledRouter(
  mgmt: string,
  client: string,
  admin: string,
  body: Record<string, unknown>,
): Promise<RouterCreds> {
  const created = await call('POST', `${mgmt}/edge-routers`, { token: admin, body });
  expect(created.status).toBe(201);
  return enrollRouter(mgmt, client, admin, created.body.data.id as string);
}

/** Enrolls the edge router `id` (created, not yet enrolled) with its `erott` token; answers its credentials. */
export async function enrollRouter(mgmt: string, client: string, admin: string, id: string): Promise<RouterCreds> {
  const token = (await call('GET', `${mgmt}/edge-routers/${id}`, { token: admin })).body.data.enrollmentToken;
  const keys = await generateKeyPair();
  const csrPem = await csr(id, keys);
  const r = await call('POST', `${client}/enroll/erott`, { body: { token, serverCsr: csrPem, clientCsr: csrPem } });
  expect(r.status).toBe(200);
  return { id, key: await exportKeyPem(keys.privateKey), cert: r.body.data.cert, ca: r.body.data.ca };
}

function url(port: number, path = ROUTER_CONTROL_PATH): string {
  return `wss://127.0.0.1:${port}${path}`;
}

/** A connected router: its hello's answer, and how to go away. */
export interface ConnectedRouter {
  answer: { routerId: string; name: string };
  close(): void;
}

/** Connects with `creds` and says `hello` through tRPC (rejects when the controller refuses either). */
export async function connectRouter(
  port: number,
  creds: RouterCreds,
  hello: RouterHello = DEFAULT_HELLO,
): Promise<ConnectedRouter> {
  const Ws = class extends WebSocket {
    constructor(u: string | URL, protocols?: string | string[]) {
      super(u, protocols, { key: creds.key, cert: creds.cert, ca: creds.ca });
    }
  };
  // no reconnects within a test: a refused or closed connection fails the hello
  let failed: (err: Error) => void = () => {};
  const failure = new Promise<never>((_, reject) => {
    failed = reject;
  });
  const ws = createWSClient({
    url: url(port),
    WebSocket: Ws as unknown as typeof globalThis.WebSocket,
    retryDelayMs: () => 600_000,
    onError: () => failed(new Error('router control connection failed')),
    onClose: () => failed(new Error('router control connection closed')),
  });
  const api = createTRPCClient<RouterControlRouter>({ links: [wsLink({ client: ws })] });
  try {
    const answer = await Promise.race([api.hello.mutate(hello), failure]);
    return { answer, close: () => void ws.close() };
  } catch (err) {
    void ws.close();
    throw err;
  }
}

/** What a raw connection attempt met: the upgrade refused (HTTP status), or an open socket. */
export type Probe = { refused: number } | { ws: WebSocket; closed: Promise<number> };

/** Opens the control WebSocket with `creds` (no tRPC): see refusals and close codes. */
export function probe(port: number, creds: Pick<RouterCreds, 'key' | 'cert' | 'ca'>, path?: string): Promise<Probe> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url(port, path), { key: creds.key, cert: creds.cert, ca: creds.ca });
    const closed = new Promise<number>((res) => ws.once('close', (code) => res(code)));
    ws.once('unexpected-response', (_req, res) => {
      resolve({ refused: res.statusCode ?? 0 });
      ws.terminate();
    });
    ws.once('open', () => resolve({ ws, closed }));
    ws.once('error', (err) => reject(err));
  });
}

/** Sends one tRPC mutation over a raw socket and answers the reply (`result` or `error`). */
export function rawMutation(ws: WebSocket, path: string, input: unknown): Promise<any> {
  return new Promise((resolve) => {
    const id = Math.floor(Math.random() * 1e9);
    const onMessage = (data: WebSocket.RawData) => {
      const text = data.toString();
      if (text === 'PING') return void ws.send('PONG');
      const msg = JSON.parse(text);
      if (msg.id !== id) return;
      ws.off('message', onMessage);
      resolve(msg);
    };
    ws.on('message', onMessage);
    ws.send(JSON.stringify({ id, method: 'mutation', params: { path, input } }));
  });
}
