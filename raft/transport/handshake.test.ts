/**
 * `rejectUpgrade` on a real upgrade socket (in process): the refusal is written, and the socket is gone within
 * REFUSAL_LINGER_MS even when the client never closes its side and keeps writing (an upgrade socket has no timeout
 * of its own).
 */
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFUSAL_LINGER_MS, rejectUpgrade } from './handshake.js';

describe('rejectUpgrade', () => {
  let server: Server;
  let port: number;
  const clients: Socket[] = [];
  beforeAll(async () => {
    server = createServer();
    server.on('upgrade', (_req, socket) => rejectUpgrade(socket, 403, { 'x-why': 'no' }));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const c of clients) c.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('a client that never closes its side sees the connection closed within the bound', async () => {
    const bound_ms = REFUSAL_LINGER_MS + 2_000;
    const t0 = Date.now();
    const { answer, closedAfter_ms } = await new Promise<{ answer: string; closedAfter_ms: number }>((resolve) => {
      let answer = '';
      // allowHalfOpen: the client never ends its side, even after the server's end
      const c = connect({ host: '127.0.0.1', port, allowHalfOpen: true }, () =>
        c.write(
          'GET /raft HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
            'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
        ),
      );
      clients.push(c);
      c.on('error', () => {});
      c.on('data', (d) => (answer += d));
      // the server's end arrives at once; whether its socket is gone shows when the client writes (a reset)
      const probe = setInterval(() => c.writable && c.write('x'), 100);
      const never = setTimeout(() => resolve({ answer, closedAfter_ms: Number.POSITIVE_INFINITY }), bound_ms);
      c.once('close', () => {
        clearInterval(probe);
        clearTimeout(never);
        resolve({ answer, closedAfter_ms: Date.now() - t0 });
      });
    });
    expect(answer).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
    expect(answer).toContain('x-why: no\r\n');
    expect(closedAfter_ms).toBeLessThan(bound_ms);
  });
});
