import { describe, expect, it } from 'vitest';
import { planSnapshotAt } from './snapshot-plan.js';

const base = { every: 30, stagger: true, voters: ['a', 'b', 'c'] };

describe('planSnapshotAt', () => {
  it('not staggered: N after the last snapshot', () => {
    expect(planSnapshotAt({ ...base, stagger: false, self: 'b', last: 45, applied: 46 })).toBe(75);
  });

  it('staggered: the next crossing of a multiple of N shifted by rank × N ÷ voters', () => {
    // phases a 0, b 10, c 20
    expect(planSnapshotAt({ ...base, self: 'a', last: 0, applied: 0 })).toBe(30);
    expect(planSnapshotAt({ ...base, self: 'b', last: 0, applied: 0 })).toBe(20);
    expect(planSnapshotAt({ ...base, self: 'c', last: 0, applied: 0 })).toBe(10);
    expect(planSnapshotAt({ ...base, self: 'c', last: 10, applied: 10 })).toBe(40);
    // a snapshot taken late (applied past its point) keeps the grid
    expect(planSnapshotAt({ ...base, self: 'b', last: 23, applied: 23 })).toBe(50);
    // not a voter: phase 0
    expect(planSnapshotAt({ ...base, self: 'z', last: 0, applied: 0 })).toBe(30);
  });

  it('after a membership change moved the phase below the applied index: planned from the applied index', () => {
    // b snapshotted at 45 with phase 15 (voters a, b); c joins, b's phase becomes 10 and its next point 50, while b
    // has applied 52 already: due at 80, not at once
    const after = { ...base, self: 'b', last: 45, applied: 52 };
    expect(planSnapshotAt(after)).toBe(80);
    // the new point still ahead: kept
    expect(planSnapshotAt({ ...after, applied: 48 })).toBe(50);
  });
});
