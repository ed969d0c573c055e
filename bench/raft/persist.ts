/**
 * Microbenchmark of the Raft log's persist batch (raft/storage/level-log.ts): what one synced LevelDB write of a
 * persist-shaped batch (one segment of `--entries` entries, the state record) costs on the main thread, written
 * as abstract-level's array batch (`db.batch(ops, opts)`) and as a chained batch (`db.batch().put(…).write(opts)`,
 * what levelLogDb does). Printed per form: the synchronous main-thread time of the call (the batch handed to
 * LevelDB; the fsync runs on a libuv thread) and the wall time per awaited write. The forms alternate in rounds.
 *
 *   node dist/bench/raft/persist.js [--writes 2000] [--entries 1] [--ops 2]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ClassicLevel } from 'classic-level';
import { chainedBatch, type LogDbOp } from '../../raft/storage/log-db.js';

const { values } = parseArgs({
  options: {
    writes: { type: 'string', default: '2000' },
    entries: { type: 'string', default: '1' },
    ops: { type: 'string', default: '2' },
  },
});
const writes = Number(values.writes);
const entry_bytes = 200 * Number(values.entries);
const opsPerWrite = Number(values.ops);
const ROUNDS = 4;

const dir = mkdtempSync(join(tmpdir(), 'keel-persist-bench-'));
const db = new ClassicLevel<Buffer, Buffer>(dir, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
await db.open();

let seq = 0;
function opsOf(): LogDbOp[] {
  const ops: LogDbOp[] = [];
  for (let i = 0; i < opsPerWrite - 1; i++) {
    const key = Buffer.alloc(9);
    key[0] = 0x65;
    key.writeBigUInt64BE(BigInt(++seq), 1);
    ops.push({ type: 'put', key, value: Buffer.alloc(entry_bytes, seq & 0xff) });
  }
  ops.push({ type: 'put', key: Buffer.from('state'), value: Buffer.alloc(40, seq & 0xff) });
  return ops;
}

const forms = {
  array: (ops: LogDbOp[]) => db.batch(ops, { sync: true }),
  chained: (ops: LogDbOp[]) => chainedBatch(db, ops, { sync: true }),
};
const totals = { array: { call_ms: 0, wall_ms: 0, n: 0 }, chained: { call_ms: 0, wall_ms: 0, n: 0 } };
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, write] of Object.entries(forms) as [keyof typeof forms, (ops: LogDbOp[]) => Promise<void>][]) {
    const t = totals[name];
    for (let i = 0; i < writes / ROUNDS; i++) {
      const ops = opsOf();
      const t0 = performance.now();
      const done = write(ops);
      const t1 = performance.now();
      await done;
      t.call_ms += t1 - t0;
      t.wall_ms += performance.now() - t0;
      t.n++;
    }
  }
}
await db.close();
rmSync(dir, { recursive: true, force: true });

console.log(
  `persist batch: ${opsPerWrite} ops (${opsPerWrite - 1} × ${entry_bytes} B + a 40 B state record), synced, ${writes} writes per form`,
);
for (const [name, t] of Object.entries(totals)) {
  console.log(
    `  ${name.padEnd(8)} main thread ${((t.call_ms * 1000) / t.n).toFixed(1).padStart(6)} µs/write   wall ${((t.wall_ms * 1000) / t.n).toFixed(0).padStart(6)} µs/write`,
  );
}
