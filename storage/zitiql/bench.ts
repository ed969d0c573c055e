// Micro-benchmark of ZitiQL parse/compile/execute over a synthetic in-memory source.
// Run after a build: node dist/storage/zitiql/bench.js [rows=100000] [runs=20]

import { performance } from 'node:perf_hooks';
import { compileQuery } from './compile.js';
import { executeQuery } from './executor.js';
import { SYNTHETIC_SYMBOLS, syntheticRows, syntheticSource } from './fixture.js';
import { parseQuery } from './parser.js';

const MAX_ROWS = 5_000_000;
const MAX_RUNS = 10_000;

function main(argv: string[]): void {
  const rowCount = Math.min(Number(argv[0] ?? 100_000), MAX_ROWS);
  const runs = Math.min(Number(argv[1] ?? 20), MAX_RUNS);
  if (!Number.isInteger(rowCount) || rowCount <= 0 || !Number.isInteger(runs) || runs <= 0) {
    throw new Error('usage: bench.js [rows] [runs]');
  }
  const rows = syntheticRows(rowCount);
  const source = syntheticSource(rows);
  const probe = rows[Math.floor(rowCount / 2)]!;
  const cases: [string, string][] = [
    ['parse+compile only', `name = "${probe.name}" and size > 10 sort by name desc limit 10`],
    ['indexed equality', `name = "${probe.name}"`],
    ['id in [3]', `id in ["${rows[0]!.id}", "${probe.id}", "${rows[rowCount - 1]!.id}"]`],
    ['contains scan', 'name contains "x"'],
    ['icontains scan', 'name icontains "XY"'],
    ['sort by name desc limit 10', 'sort by name desc limit 10'],
    ['datetime range + sort', 'createdAt >= datetime(2021-01-01T00:00:00Z) sort by size desc limit 10'],
    ['no filter, offset 50000', 'skip 50000 limit 10'],
  ];
  for (const [label, filter] of cases) {
    const samples: number[] = [];
    let total = 0;
    for (let i = 0; i <= runs; i++) {
      const start = performance.now();
      const compiled = compileQuery(parseQuery(filter), SYNTHETIC_SYMBOLS);
      if (label !== 'parse+compile only') {
        const result = executeQuery(source, compiled, { limit: compiled.limit ?? 10, offset: compiled.skip ?? 0 });
        total = result.totalCount;
      }
      if (i > 0) samples.push(performance.now() - start); // the first run is a warm-up
    }
    samples.sort((a, b) => a - b);
    const median = samples[Math.floor(samples.length / 2)]!;
    const p90 = samples[Math.floor(samples.length * 0.9)]!;
    console.log(
      `${label.padEnd(28)} median ${median.toFixed(3).padStart(9)} ms  p90 ${p90.toFixed(3).padStart(9)} ms  totalCount ${total}`,
    );
  }
}

main(process.argv.slice(2));
