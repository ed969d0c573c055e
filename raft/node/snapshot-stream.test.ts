import { describe, expect, it } from 'vitest';
import { chunksOf, collectSnapshot, restoreSnapshot, takeSnapshot } from './snapshot-stream.js';
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
  it('cuts data into bounded chunks that are views, not copies', async () => {
    const data = Uint8Array.from([1, 2, 3, 4, 5]);
    expect(await all(chunksOf(data, 2))).toEqual([[1, 2], [3, 4], [5]]);
    const first = (await chunksOf(data, 2).next()).value as Uint8Array;
    expect(first.buffer).toBe(data.buffer);
    expect(await all(chunksOf(new Uint8Array(0), 2))).toEqual([]);
    await expect(chunksOf(data, 0).next()).rejects.toThrow(RangeError);
  });

  it('assembles a stream with or without its announced size', async () => {
    for (const size_bytes of [5, undefined]) {
      const got = await collectSnapshot({ index: 9, chunks: yieldAll([[1, 2], [], [3, 4, 5]]), size_bytes });
      expect(got.index).toBe(9);
      expect([...got.data]).toEqual([1, 2, 3, 4, 5]);
    }
  });

  it('rejects a stream that yields more or less than its announced size', async () => {
    await expect(collectSnapshot({ index: 1, chunks: yieldAll([[1, 2, 3]]), size_bytes: 2 })).rejects.toThrow(
      /more than its size_bytes 2/,
    );
    await expect(collectSnapshot({ index: 1, chunks: yieldAll([[1]]), size_bytes: 2 })).rejects.toThrow(
      /yields 1 bytes, size_bytes 2/,
    );
    await expect(collectSnapshot({ index: 1, chunks: yieldAll([]), size_bytes: -1 })).rejects.toThrow(RangeError);
  });

  it('prefers the streaming forms of a state machine and falls back to the whole-buffer ones', async () => {
    const calls: string[] = [];
    const plain: StateMachine = {
      apply: () => undefined,
      snapshot: async () => {
        calls.push('snapshot');
        return { index: 3, data: Uint8Array.from([7]) };
      },
      restore: async () => {
        calls.push('restore');
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
    const snap = {
      meta: {
        index: 4,
        term: 1,
        conf: { voters: ['a'], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false },
      },
      data: Uint8Array.from([8, 9]),
    };
    expect([...(await takeSnapshot(plain)).data]).toEqual([7]);
    expect([...(await takeSnapshot(streaming)).data]).toEqual([8, 9]);
    await restoreSnapshot(plain, snap);
    await restoreSnapshot(streaming, snap);
    expect(calls).toEqual(['snapshot', 'snapshotStream', 'restore', 'restoreStream@4:[[8,9]]']);
  });
});
