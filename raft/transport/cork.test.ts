import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type WebSocket from 'ws';
import { corkForTurn } from './cork.js';

/** A socket that records each write it is given: a single chunk, or the chunks of one writev. */
function recordingSocket(): { socket: Writable; writes: string[][] } {
  const writes: string[][] = [];
  const socket = new Writable({
    write(chunk: Buffer, _enc, cb) {
      writes.push([chunk.toString()]);
      cb();
    },
    writev(chunks, cb) {
      writes.push(chunks.map((c) => (c.chunk as Buffer).toString()));
      cb();
    },
  });
  return { socket, writes };
}

const asWs = (socket: Writable | null) => ({ _socket: socket }) as unknown as WebSocket;
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('corkForTurn', () => {
  it('sends of one turn, from several callbacks, leave in one write, in order', async () => {
    const { socket, writes } = recordingSocket();
    const ws = asWs(socket);
    corkForTurn(ws);
    socket.write('a');
    await Promise.resolve();
    corkForTurn(ws); // once per turn: a second cork would hold the bytes past the turn
    socket.write('b');
    process.nextTick(() => socket.write('c'));
    await new Promise((resolve) => process.nextTick(resolve));
    expect(writes).toEqual([]);
    await nextTurn();
    expect(writes).toEqual([['a', 'b', 'c']]);
    expect(socket.writableCorked).toBe(0);
    socket.write('d'); // a later turn is not held
    expect(writes).toEqual([['a', 'b', 'c'], ['d']]);
  });

  it('leaves a socket that is missing or destroyed alone', async () => {
    corkForTurn(asWs(null));
    const { socket } = recordingSocket();
    socket.destroy();
    corkForTurn(asWs(socket));
    expect(socket.writableCorked).toBe(0);
  });
});
