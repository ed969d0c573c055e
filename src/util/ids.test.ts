import { describe, expect, it } from 'vitest';
import { shortId } from './ids.js';

describe('shortId', () => {
  it('draws fresh ids across refills of its random pool: all distinct, 10 characters of the alphabet', () => {
    // 409 ids per pool refill: 5 000 ids cross a dozen refills
    const ids = Array.from({ length: 5000 }, () => shortId());
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) {
      expect(id).toMatch(/^[0-9a-zA-Z][0-9a-zA-Z.-]{8}[0-9a-zA-Z-]$/);
    }
    // every character of the alphabet shows up: the pool's bytes are spread, not reused
    expect(new Set(ids.join('')).size).toBe(64);
  });
});
