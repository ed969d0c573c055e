import { describe, expect, it } from 'vitest';
import { ForwardBatcher, MAX_FORWARD_BATCH_BYTES, MAX_FORWARD_BATCH_ITEMS } from '../../src/cluster/forward-batch.js';
import type { ForwardResult } from '../../src/cluster/forward-channel.js';

const bytes = (...b: number[]) => new Uint8Array(b);

/** A transmit that records each message and answers it with `answer`. */
function recorder(answer: (leader: string, items: Uint8Array[]) => Promise<ForwardResult[]>) {
  const sent: Array<{ leader: string; term: number; items: Uint8Array[] }> = [];
  const batcher = new ForwardBatcher((leader, term, items) => {
    sent.push({ leader, term, items });
    return answer(leader, items);
  });
  return { sent, batcher };
}

const acceptAll = async (_leader: string, items: Uint8Array[]) => items.map((): ForwardResult => ({ ok: true }));

describe('ForwardBatcher', () => {
  it('sends the forwards of one turn as one message per leader, each command with its own answer', async () => {
    const { sent, batcher } = recorder(async (_leader, items) =>
      items.map((item): ForwardResult => (item[0] === 2 ? { ok: false, code: 'overloaded' } : { ok: true })),
    );
    const results = await Promise.all([
      batcher.send('a', 1, bytes(1)),
      batcher.send('a', 1, bytes(2)),
      batcher.send('b', 1, bytes(3)),
      batcher.send('a', 1, bytes(4)),
    ]);
    expect(sent).toEqual([
      { leader: 'a', term: 1, items: [bytes(1), bytes(2), bytes(4)] },
      { leader: 'b', term: 1, items: [bytes(3)] },
    ]);
    expect(results).toEqual([{ ok: true }, { ok: false, code: 'overloaded' }, { ok: true }, { ok: true }]);
    // a later turn starts a new message
    await batcher.send('a', 1, bytes(5));
    expect(sent.at(-1)).toEqual({ leader: 'a', term: 1, items: [bytes(5)] });
  });

  it('keeps forwards addressed to one leader in different terms in different messages, each with its term', async () => {
    const { sent, batcher } = recorder(acceptAll);
    await Promise.all([batcher.send('a', 1, bytes(1)), batcher.send('a', 3, bytes(2)), batcher.send('a', 1, bytes(3))]);
    expect(sent).toEqual([
      { leader: 'a', term: 1, items: [bytes(1), bytes(3)] },
      { leader: 'a', term: 3, items: [bytes(2)] },
    ]);
  });

  it('sends a message as soon as it holds the most commands allowed', async () => {
    const { sent, batcher } = recorder(acceptAll);
    const all = [];
    for (let i = 0; i < MAX_FORWARD_BATCH_ITEMS + 1; i++) all.push(batcher.send('a', 1, bytes(i % 256)));
    expect(sent.map((m) => m.items.length)).toEqual([MAX_FORWARD_BATCH_ITEMS]); // before the turn ends
    await Promise.all(all);
    expect(sent.map((m) => m.items.length)).toEqual([MAX_FORWARD_BATCH_ITEMS, 1]);
  });

  it('keeps a message within its byte bound; a command larger than the bound travels alone', async () => {
    const { sent, batcher } = recorder(acceptAll);
    const quarter = new Uint8Array(MAX_FORWARD_BATCH_BYTES / 4);
    const big = new Uint8Array(MAX_FORWARD_BATCH_BYTES + 1);
    await Promise.all([
      ...[1, 2, 3, 4, 5].map(() => batcher.send('a', 1, quarter)),
      batcher.send('a', 1, big),
      batcher.send('a', 1, bytes(1)),
    ]);
    expect(sent.map((m) => m.items.length)).toEqual([4, 1, 1, 1]);
    expect(sent[0]!.items.reduce((n, s) => n + s.byteLength, 0)).toBe(MAX_FORWARD_BATCH_BYTES);
  });

  it('leaves every command of an unanswered message with an unknown outcome (a rejection), never a refusal', async () => {
    const { batcher } = recorder(async () => {
      throw new Error('socket closed');
    });
    const results = await Promise.allSettled([batcher.send('a', 1, bytes(1)), batcher.send('a', 1, bytes(2))]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
  });

  it('treats an answer that does not match the message as unknown for every command in it', async () => {
    const { batcher } = recorder(async () => [{ ok: true }]);
    const results = await Promise.allSettled([batcher.send('a', 1, bytes(1)), batcher.send('a', 1, bytes(2))]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
  });
});
