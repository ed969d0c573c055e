/**
 * The single-node floor: the same payloads written by `concurrency` closed-loop writers into one LevelDB,
 * group-committed (every write waiting when a batch starts joins it) with one synced batch per group.
 * No replication, no Raft: the best a durable log on this disk can do.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClassicLevel } from 'classic-level';
import { closedLoop, type LoadResult } from './stats.js';

export async function levelDbFloor(
  concurrencies: number[],
  payload_bytes: number,
  warmup_ms: number,
  duration_ms: number,
): Promise<LoadResult[]> {
  const dir = mkdtempSync(join(tmpdir(), 'keel-bench-floor-'));
  const db = new ClassicLevel<Buffer, Buffer>(dir, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  await db.open();
  let seq = 0;
  let waiting: Array<{ key: Buffer; value: Buffer; done: () => void; fail: (e: Error) => void }> = [];
  let writing = false;
  const flush = async (): Promise<void> => {
    if (writing) return;
    writing = true;
    while (waiting.length > 0) {
      const group = waiting;
      waiting = [];
      try {
        await db.batch(
          group.map((w) => ({ type: 'put' as const, key: w.key, value: w.value })),
          { sync: true },
        );
        for (const w of group) w.done();
      } catch (err) {
        for (const w of group) w.fail(err as Error);
      }
    }
    writing = false;
  };
  const payload = Buffer.alloc(payload_bytes, 7);
  const results: LoadResult[] = [];
  try {
    for (const c of concurrencies) {
      results.push(
        await closedLoop(c, warmup_ms, duration_ms, () => {
          const key = Buffer.alloc(8);
          key.writeBigUInt64BE(BigInt(++seq));
          const p = new Promise<void>((done, fail) => waiting.push({ key, value: payload, done, fail }));
          void flush();
          return p;
        }),
      );
    }
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
}
