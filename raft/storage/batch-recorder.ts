import { ClassicLevel } from 'classic-level';

/**
 * Tests only: records the options of every ClassicLevel batch write (the chained form's `write(opts)` and the array
 * form's `batch(ops, opts)`) until `restore()`, to check that a production LevelDB adapter hands `sync` on (the
 * power-loss tests inject other databases, so they cannot see it).
 */
export function recordBatchWrites(): { seen: unknown[]; restore(): void } {
  const seen: unknown[] = [];
  const proto = ClassicLevel.prototype as unknown as { batch: (...args: unknown[]) => unknown };
  const batch = proto.batch;
  proto.batch = function (this: unknown, ...args: unknown[]) {
    const out = batch.apply(this, args);
    if (args.length === 0) {
      const chained = out as { write(o: unknown): Promise<void> };
      const write = chained.write.bind(chained);
      chained.write = (o: unknown) => {
        seen.push(o);
        return write(o);
      };
    } else {
      seen.push(args[1]);
    }
    return out;
  };
  return {
    seen,
    restore: () => {
      proto.batch = batch;
    },
  };
}
