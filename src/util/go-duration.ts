/**
 * Go's `time.ParseDuration` syntax, as OpenZiti's APIs take durations: a sequence of decimal numbers, each with a
 * unit (`ns`, `us`/`µs`, `ms`, `s`, `m`, `h`), optionally signed: `300ms`, `1.5h`, `2h45m`.
 */
const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};
/** Longer text is refused before parsing (Go's int64 nanoseconds end near 2.5 million hours anyway). */
const MAX_TEXT = 64;
const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

/** Milliseconds of a Go duration, or null when `text` is not one. `0` needs no unit, as in Go. */
export function parseGoDuration(text: string): number | null {
  if (text.length === 0 || text.length > MAX_TEXT) return null;
  let i = 0;
  let sign = 1;
  if (text[0] === '-' || text[0] === '+') {
    sign = text[0] === '-' ? -1 : 1;
    i = 1;
  }
  if (text.slice(i) === '0') return 0;
  if (i === text.length) return null;
  let total = 0;
  while (i < text.length) {
    PART.lastIndex = i;
    const m = PART.exec(text);
    if (!m) return null;
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
    i = PART.lastIndex;
  }
  return sign * total;
}
