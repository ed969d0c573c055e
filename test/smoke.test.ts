import { describe, expect, it } from 'vitest';

describe('toolchain', () => {
  it('runs TypeScript tests', () => {
    expect([1, 2, 3].map((x) => x * 2)).toEqual([2, 4, 6]);
  });
});
