import { describe, expect, it } from 'vitest';
import { ForwardBatcher, MAX_FORWARD_BATCH_CHARS, MAX_FORWARD_BATCH_ITEMS } from '../../src/cluster/forward-batch.js';
import type { ForwardResult } from '../../src/cluster/peer-api.js';

const bytes = (...b: number[]) => new Uint8Array(b);
const b64 = (...b: number[]) => Buffer.from(b).toString('base64');

/** A transmit that records each message and answers it with `answer`. */
function recorder(answer: (leader: string, items: string[]) => Promise<ForwardResult[]>) {
  const sent: Array<{ leader: string; items: string[] }> = [];
  const batcher = new ForwardBatcher((leader, items) => {
    sent.push({ leader, items });
    return answer(leader, items);
  });
  return { sent, batcher };
}

const acceptAll = async (_leader: string, items: string[]) => items.map((): ForwardResult => ({ ok: true }));

describe('ForwardBatcher', () => {
  it('sends the forwards of one turn as one message per leader, each command with its own answer', async () => {
    const { sent, batcher } = recorder(async (_leader, items) =>
      items.map((item): ForwardResult => (item === b64(2) ? { ok: false, code: 'overloaded' } : { ok: true })),
    );
    const results = await Promise.all([
      batcher.send('a', bytes(1)),
      batcher.send('a', bytes(2)),
      batcher.send('b', bytes(3)),
      batcher.send('a', bytes(4)),
    ]);
    expect(sent).toEqual([
      { leader: 'a', items: [b64(1), b64(2), b64(4)] },
      { leader: 'b', items: [b64(3)] },
    ]);
    expect(results).toEqual([{ ok: true }, { ok: false, code: 'overloaded' }, { ok: true }, { ok: true }]);
    // a later turn starts a new message
    await batcher.send('a', bytes(5));
    expect(sent.at(-1)).toEqual({ leader: 'a', items: [b64(5)] });
  });

  it('sends a message as soon as it holds the most commands allowed', async () => {
    const { sent, batcher } = recorder(acceptAll);
    const all = [];
    for (let i = 0; i < MAX_FORWARD_BATCH_ITEMS + 1; i++) all.push(batcher.send('a', bytes(i % 256)));
    expect(sent.map((m) => m.items.length)).toEqual([MAX_FORWARD_BATCH_ITEMS]); // before the turn ends
    await Promise.all(all);
    expect(sent.map((m) => m.items.length)).toEqual([MAX_FORWARD_BATCH_ITEMS, 1]);
  });

  it('keeps a message within its character bound; a command larger than the bound travels alone', async () => {
    const { sent, batcher } = recorder(acceptAll);
    const quarter = new Uint8Array((MAX_FORWARD_BATCH_CHARS / 4 / 4) * 3); // a quarter of the bound, in base64
    const big = new Uint8Array(MAX_FORWARD_BATCH_CHARS); // its base64 is a third larger than the bound
    await Promise.all([
      ...[1, 2, 3, 4, 5].map(() => batcher.send('a', quarter)),
      batcher.send('a', big),
      batcher.send('a', bytes(1)),
    ]);
    expect(sent.map((m) => m.items.length)).toEqual([4, 1, 1, 1]);
    expect(sent[0]!.items.reduce((n, s) => n + s.length, 0)).toBe(MAX_FORWARD_BATCH_CHARS);
  });

  it('leaves every command of an unanswered message with an unknown outcome (a rejection), never a refusal', async () => {
    const { batcher } = recorder(async () => {
      throw new Error('socket closed');
    });
    const results = await Promise.allSettled([batcher.send('a', bytes(1)), batcher.send('a', bytes(2))]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
  });

  it('treats an answer that does not match the message as unknown for every command in it', async () => {
    const { batcher } = recorder(async () => [{ ok: true }]);
    const results = await Promise.allSettled([batcher.send('a', bytes(1)), batcher.send('a', bytes(2))]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
  });
});
