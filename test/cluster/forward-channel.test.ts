/** The forward channel (src/cluster/forward-channel.ts): msgpack frames over a WebSocket, each outcome kept apart. */
import { pack } from 'msgpackr';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { MAX_FORWARD_BATCH_ITEMS } from '../../src/cluster/forward-batch.js';
import {
  decodeForwardAnswer,
  decodeForwardRequest,
  encodeForwardAnswer,
  encodeForwardRequest,
  FORWARD_PATH,
  ForwardClient,
  ForwardFrameError,
  type ForwardResult,
  MAX_FORWARD_ITEM_BYTES,
} from '../../src/cluster/forward-channel.js';
import { serveForwardChannel } from '../support/peer-api-server.js';

const cleanup: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A peer listener serving the channel with `handle`; returns its address. */
const listener = (handle: (items: Uint8Array[], term: number) => Promise<ForwardResult[]>, hold_ms?: number) =>
  serveForwardChannel(handle, cleanup, hold_ms === undefined ? {} : { hold_ms });

function client(address: string): ForwardClient {
  const c = new ForwardClient(address);
  cleanup.push(() => c.close());
  return c;
}

const bytes = (...b: number[]) => new Uint8Array(b);

describe('forward channel', () => {
  it('carries the commands as bytes and answers each one in order: accepted or refused with the leader', async () => {
    const seen: number[][] = [];
    const terms: number[] = [];
    const { address } = await listener(async (items, term) => {
      seen.push(items.map((i) => i[0]!));
      terms.push(term);
      return items.map(
        (i): ForwardResult => (i[0] === 2 ? { ok: false, code: 'not-leader', leader: 'n3' } : { ok: true }),
      );
    });
    const c = client(address);
    // two messages in flight on one connection, each answered as its own
    const [a, b] = await Promise.all([
      c.send(4, [bytes(1), bytes(2)], 2_000, 2_000),
      c.send(5, [bytes(3)], 2_000, 2_000),
    ]);
    expect(a).toEqual([{ ok: true }, { ok: false, code: 'not-leader', leader: 'n3' }]);
    expect(b).toEqual([{ ok: true }]);
    expect(seen).toEqual([[1, 2], [3]]);
    expect(terms).toEqual([4, 5]); // each with the term of the leader it was addressed to
  });

  it('holds an answer that only accepts; a refusal leaves at once, with what was held', async () => {
    const hold_ms = 400;
    const { address } = await listener(
      async (items) => items.map((i): ForwardResult => (i[0] === 9 ? { ok: false, code: 'overloaded' } : { ok: true })),
      hold_ms,
    );
    const c = client(address);
    await c.send(1, [bytes(0)], 2_000, 2_000); // connected
    let t0 = Date.now();
    expect(await c.send(1, [bytes(1)], 2_000, 2_000)).toEqual([{ ok: true }]);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(hold_ms - 50);

    t0 = Date.now();
    let acceptedAt = 0;
    const accepted = c.send(1, [bytes(2)], 2_000, 2_000).then((r) => {
      acceptedAt = Date.now() - t0;
      return r;
    });
    await new Promise((r) => setTimeout(r, 50)); // answered and held by now
    const refused = await c.send(1, [bytes(9)], 2_000, 2_000);
    const refusedAt = Date.now() - t0;
    expect(refused).toEqual([{ ok: false, code: 'overloaded', leader: null }]);
    expect(await accepted).toEqual([{ ok: true }]);
    expect(refusedAt).toBeLessThan(hold_ms - 100);
    expect(acceptedAt).toBeLessThanOrEqual(refusedAt);
  });

  it('not sent (nothing listens) is null, a definite refusal; sent and cut off is a rejection, never a refusal', async () => {
    const nobody = await listener(async (items) => items.map(() => ({ ok: true })));
    const address = nobody.address;
    await new Promise<void>((r) => {
      nobody.server.closeAllConnections();
      nobody.server.close(() => r());
    });
    expect(await client(address).send(1, [bytes(1)], 500, 500)).toBeNull();

    let sentOn: (() => void) | null = null;
    const { address: hanging, wss } = await listener(
      () =>
        new Promise<ForwardResult[]>(() => {
          sentOn?.();
        }),
    );
    const c = client(hanging);
    const received = new Promise<void>((r) => (sentOn = r));
    const pending = c.send(1, [bytes(1)], 2_000, 5_000);
    await received;
    for (const ws of wss.clients) ws.terminate(); // the leader's process dies with the forward in its hands
    await expect(pending).rejects.toThrow(/closed before answering/);
  });

  it('a leader that fails to tell, or does not answer in time, leaves the outcome unknown (a rejection)', async () => {
    const failing = await listener(async () => {
      throw new Error('boom');
    });
    await expect(client(failing.address).send(1, [bytes(1)], 2_000, 2_000)).rejects.toThrow(/failed to tell/);
    const silent = await listener(() => new Promise<ForwardResult[]>(() => {}));
    await expect(client(silent.address).send(1, [bytes(1)], 2_000, 100)).rejects.toThrow(/no answer within 100 ms/);
  });

  it('refuses frames its client never sends: a bad shape, no or too many commands, an empty or oversized one', () => {
    const bad = [
      Buffer.from('not msgpack at all \xc1'),
      encodeForwardAnswer(1, []),
      encodeForwardRequest(0, 1, [bytes(1)]),
      encodeForwardRequest(1, 1, []),
      encodeForwardRequest(
        1,
        1,
        Array.from({ length: MAX_FORWARD_BATCH_ITEMS + 1 }, () => bytes(1)),
      ),
      encodeForwardRequest(1, 1, [new Uint8Array(0)]),
      encodeForwardRequest(1, 1, [new Uint8Array(MAX_FORWARD_ITEM_BYTES + 1)]),
      // the term of the leader it is addressed to: a positive integer, always present
      encodeForwardRequest(1, 0, [bytes(1)]),
      encodeForwardRequest(1, -2, [bytes(1)]),
      encodeForwardRequest(1, 1.5, [bytes(1)]),
      encodeForwardRequest(1, Number.MAX_SAFE_INTEGER + 2, [bytes(1)]),
      encodeForwardRequest(1, '1' as unknown as number, [bytes(1)]),
      encodeForwardRequest(1, null as unknown as number, [bytes(1)]),
      pack([1, [bytes(1)]]), // [id, items]: no term
    ];
    for (const frame of bad) expect(() => decodeForwardRequest(frame)).toThrow(ForwardFrameError);
    expect(decodeForwardRequest(encodeForwardRequest(7, 9, [bytes(1, 2)]))).toEqual({
      id: 7,
      term: 9,
      items: [Buffer.from([1, 2])],
    });
    expect(() => decodeForwardAnswer(encodeForwardRequest(1, 1, [bytes(1)]))).toThrow(ForwardFrameError);
    expect(decodeForwardAnswer(encodeForwardAnswer(3, null))).toEqual({ id: 3, results: null });
  });

  it('closes the connection on a request without a valid term, handing nothing to the leader', async () => {
    const handled: number[] = [];
    const { address } = await listener(async (items, term) => {
      handled.push(term);
      return items.map(() => ({ ok: true }));
    });
    const ws = new WebSocket(`ws://${address}${FORWARD_PATH}`);
    cleanup.push(() => ws.terminate());
    await new Promise((r, j) => ws.once('open', r).once('error', j));
    const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
    ws.send(encodeForwardRequest(1, 0, [bytes(1)]), { binary: true });
    expect(await closed).toBe(1007);
    expect(handled).toEqual([]);
  });
});
