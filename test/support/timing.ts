/** Helpers for tests that compare durations measured in the same run (rather than against wall-clock bounds). */

/** The median of some durations (the lower middle one of an even count); there must be at least one. */
export function median(values_ms: readonly number[]): number {
  if (values_ms.length === 0) throw new RangeError('median of no values');
  const sorted = [...values_ms].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}
