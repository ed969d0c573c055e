import { describe, expect, it } from 'vitest';
import { ID_CHARS, shortId } from './ids.js';

describe('shortId', () => {
  it('draws fresh ids across refills of its random pool: all distinct, of the alphabet, never starting or ending with "."', () => {
    // 454 ids per pool refill: 5 000 ids cross a dozen refills, all in the same few milliseconds
    const ids = Array.from({ length: 5000 }, () => shortId());
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) {
      expect(id).toHaveLength(ID_CHARS);
      expect(id).toMatch(/^[0-9a-zA-Z][0-9a-zA-Z.-]*[0-9a-zA-Z-]$/);
    }
    // every character of the alphabet shows up in the random parts: the pool's bytes are spread, not reused
    expect(new Set(ids.map((id) => id.slice(7)).join('')).size).toBe(64);
  });

  it('sorts ids by creation time (code-unit order, as the store keeps rows) across every digit of the time part', () => {
    // a carry into each digit (64 ** k), from the earliest time whose first digit is not punctuation to the last
    const base = 2 * 64 ** 6;
    const times = [base, base + 1, base + 63, base + 64, base + 65, base + 4095, base + 4096, base + 64 ** 5];
    times.push(1_700_000_000_000, 1_700_000_000_001, 1_800_000_000_000, 64 ** 7 - 1);
    const ids = times.map((t) => shortId(t));
    for (let i = 1; i < ids.length; i++) expect(ids[i - 1]! < ids[i]!).toBe(true);
    // any two times, in either order of making, compare as their times do
    const a = shortId(1_790_000_000_123);
    const b = shortId(1_790_000_000_122);
    expect(b < a).toBe(true);
    expect(a.slice(0, 7)).not.toBe(b.slice(0, 7));
    // same millisecond: same time part, distinct ids
    const c = shortId(1_790_000_000_123);
    expect(c.slice(0, 7)).toBe(a.slice(0, 7));
    expect(c).not.toBe(a);
  });

  it('refuses a time it cannot encode in order (negative, fractional, past 2109, or so early its first digit is punctuation)', () => {
    for (const t of [-1, 1.5, 64 ** 7, Number.NaN, 0, 64 ** 6]) expect(() => shortId(t)).toThrow(/invariant violated/);
    expect(shortId(64 ** 6 * 2)).toHaveLength(ID_CHARS);
  });
});
