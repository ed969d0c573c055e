import { describe, expect, it } from 'vitest';
import { parseGoDuration } from './go-duration.js';

describe("Go's duration syntax", () => {
  it.each([
    ['300ms', 300],
    ['1.5h', 5_400_000],
    ['2h45m', 9_900_000],
    ['90s', 90_000],
    ['-1m', -60_000],
    ['+2s', 2000],
    ['0', 0],
    ['1000us', 1],
    ['.5s', 500],
  ])('%s = %d ms', (text, ms) => {
    expect(parseGoDuration(text)).toBe(ms);
  });

  it.each(['', '5', 'h', '1x', '1h ', ' 1h', '1h-2m', '-', 'x'.repeat(65), `${'1s'.repeat(33)}`])(
    'refuses %j',
    (text) => {
      expect(parseGoDuration(text)).toBeNull();
    },
  );
});
