import { describe, expect, it } from 'vitest';
import { checkedChunks, joinChunks, restoreSnapshot, takeSnapshot } from './snapshot-stream.js';
import type { StateMachine } from './state-machine.js';

async function* yieldAll(parts: number[][]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield Uint8Array.from(p);
}

async function all(it: AsyncIterable<Uint8Array>): Promise<number[][]> {
  const out: number[][] = [];
  for await (const c of it) out.push([...c]);
  return out;
}

describe('snapshot streams', () => {
  it('passes a stream on chunk by chunk, with or without its announced size', async () => {
    for (const size_bytes of [5, undefined]) {
      const chunks = checkedChunks({ index: 9, chunks: yieldAll([[1, 2], [], [3, 4, 5]]), size_bytes });
      expect(await all(chunks)).toEqual([[1, 2], [], [3, 4, 5]]);
    }
    expect([...(await joinChunks(yieldAll([[1], [2, 3]])))]).toEqual([1, 2, 3]);
  });

  it('rejects a stream that yields more or less than its announced size', async () => {
    await expect(all(checkedChunks({ index: 1, chunks: yieldAll([[1, 2, 3]]), size_bytes: 2 }))).rejects.toThrow(
      /more than its size_bytes 2/,
    );
    await expect(all(checkedChunks({ index: 1, chunks: yieldAll([[1]]), size_bytes: 2 }))).rejects.toThrow(
      /yields 1 bytes, size_bytes 2/,
    );
    await expect(all(checkedChunks({ index: 1, chunks: yieldAll([]), size_bytes: -1 }))).rejects.toThrow(RangeError);
  });

  it('prefers the streaming forms of a state machine and falls back to the whole-buffer ones', async () => {
    const calls: string[] = [];
    const plain: StateMachine = {
      apply: () => undefined,
      snapshot: async () => {
        calls.push('snapshot');
        return { index: 3, data: Uint8Array.from([7]) };
      },
      restore: async (snap) => {
        calls.push(`restore@${snap.meta.index}:${JSON.stringify([...snap.data])}`);
      },
    };
    const streaming: StateMachine = {
      ...plain,
      snapshotStream: async () => {
        calls.push('snapshotStream');
        return { index: 4, chunks: yieldAll([[8], [9]]) };
      },
      restoreStream: async (meta, chunks) => {
        calls.push(`restoreStream@${meta.index}:${JSON.stringify(await all(chunks))}`);
      },
    };
    const meta = {
      index: 4,
      term: 1,
      conf: { voters: ['a'], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false },
    };
    const plainTaken = await takeSnapshot(plain);
    expect(plainTaken.data).toBeInstanceOf(Uint8Array);
    const streamTaken = await takeSnapshot(streaming);
    expect(streamTaken.index).toBe(4);
    // The stream is passed on lazily: nothing is joined.
    expect(streamTaken.data).not.toBeInstanceOf(Uint8Array);
    expect(await all(streamTaken.data as AsyncIterable<Uint8Array>)).toEqual([[8], [9]]);
    await restoreSnapshot(plain, meta, yieldAll([[8], [9]]));
    await restoreSnapshot(streaming, meta, yieldAll([[8], [9]]));
    expect(calls).toEqual(['snapshot', 'snapshotStream', 'restore@4:[8,9]', 'restoreStream@4:[[8],[9]]']);
  });
});
