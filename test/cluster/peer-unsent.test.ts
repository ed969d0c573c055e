/**
 * A peer-API or forward connection may not leave more than a bound of answers unread (src/cluster/node.ts,
 * boundUnsent): a caller that keeps asking and never reads is closed, and this member's memory stays bounded.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { boundUnsent, MAX_PEER_UNSENT_BYTES } from '../../src/cluster/node.js';

const cleanup: Array<() => void> = [];
afterEach(() => {
  for (const f of cleanup.splice(0)) f();
});

describe('answers left unread on a peer connection', () => {
  it('the bound is finite and far above a member’s own traffic', () => {
    expect(MAX_PEER_UNSENT_BYTES).toBeGreaterThanOrEqual(1 << 20);
    expect(MAX_PEER_UNSENT_BYTES).toBeLessThanOrEqual(64 << 20);
  });

  it('a caller that asks and never reads is closed once its unread answers pass the bound', async () => {
    const server = createServer();
    const wss = new WebSocketServer({ server });
    boundUnsent(wss, 256 << 10);
    // every frame asked is answered with 64 KiB, as a status or members answer would be (smaller, many of them)
    wss.on('connection', (ws) => ws.on('message', () => ws.send(Buffer.alloc(64 << 10))));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => {
      wss.close();
      server.closeAllConnections();
      server.close();
    });
    const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`);
    await new Promise((r) => client.once('open', r));
    // it reads nothing: the answers pile up in the server's socket (the kernel's buffers first)
    (client as unknown as { _socket: { pause(): void } })._socket.pause();
    const closed = new Promise<number>((r) => client.once('close', (code) => r(code)));
    let sent = 0;
    const asking = setInterval(() => {
      if (client.readyState === WebSocket.OPEN) {
        client.send('status?');
        sent++;
      }
    }, 2);
    cleanup.push(() => clearInterval(asking));
    const code = await Promise.race([closed, new Promise<string>((r) => setTimeout(() => r('still open'), 3_000))]);
    expect(code).toBe(1006); // terminated by the server
    // far fewer answers than the 3 s would have let it ask for: memory bounded, not just slow
    expect(sent * (64 << 10)).toBeLessThan(1 << 30);
  });
});
