/** Latency samples → percentiles. Samples are kept in a bounded array (reservoir beyond the bound). */
export class LatencySamples {
  private readonly samples: number[] = [];
  private seen = 0;

  constructor(private readonly max = 200_000) {}

  add(ms: number): void {
    this.seen++;
    if (this.samples.length < this.max) {
      this.samples.push(ms);
      return;
    }
    const j = Math.floor(Math.random() * this.seen);
    if (j < this.max) this.samples[j] = ms;
  }

  percentile(p: number): number {
    if (this.samples.length === 0) return Number.NaN;
    const sorted = [...this.samples].sort((a, b) => a - b);
    const at = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
    return sorted[at]!;
  }

  get count(): number {
    return this.seen;
  }
}

export interface LoadResult {
  concurrency: number;
  ops: number;
  errors: number;
  duration_ms: number;
  opsPerSec: number;
  p50_ms: number;
  p99_ms: number;
}

/**
 * Closed-loop load: `concurrency` workers each run `op` back to back for warmup_ms (not measured) and then
 * duration_ms (measured). Errors are counted, not retried.
 */
export async function closedLoop(
  concurrency: number,
  warmup_ms: number,
  duration_ms: number,
  op: () => Promise<void>,
): Promise<LoadResult> {
  const lat = new LatencySamples();
  let ops = 0;
  let errors = 0;
  const start = performance.now();
  const measureFrom = start + warmup_ms;
  const end = measureFrom + duration_ms;
  const worker = async (): Promise<void> => {
    for (;;) {
      const t0 = performance.now();
      if (t0 >= end) return;
      let ok = true;
      try {
        await op();
      } catch {
        ok = false;
      }
      const t1 = performance.now();
      if (t0 >= measureFrom && t1 <= end) {
        if (ok) {
          ops++;
          lat.add(t1 - t0);
        } else errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return {
    concurrency,
    ops,
    errors,
    duration_ms,
    opsPerSec: (ops * 1000) / duration_ms,
    p50_ms: lat.percentile(50),
    p99_ms: lat.percentile(99),
  };
}
