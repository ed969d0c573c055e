import { describe, expect, it } from 'vitest';
import { checkAgainstSchema, compileUserSchema } from './user-schema.js';

describe('user schema patterns run in linear time', () => {
  it('a catastrophic-backtracking pattern answers at once (found by test/api/fuzz.test.ts probes)', () => {
    const schema = { type: 'object', properties: { x: { type: 'string', pattern: '^(a+)+$' } } };
    const t0 = performance.now();
    // backtracking would take about 2^30 steps (seconds) here
    const err = checkAgainstSchema(schema, { x: `${'a'.repeat(30)}!` }, 'data');
    expect(performance.now() - t0).toBeLessThan(500);
    expect(err?.field).toBe('x');
    expect(checkAgainstSchema(schema, { x: 'aaa' }, 'data')).toBeNull();
    const alt = { type: 'string', pattern: '^(a|a)*$' };
    expect(checkAgainstSchema(alt, `${'a'.repeat(100_000)}!`, 'data')?.field).toBe('(root)');
    const keys = { type: 'object', patternProperties: { '^(b+)+$': { type: 'number' } } };
    expect(checkAgainstSchema(keys, { [`${'b'.repeat(30)}`]: 'x' }, 'data')).not.toBeNull();
  });

  it('patterns the linear engine cannot run are refused when the schema is compiled', () => {
    for (const pattern of ['(a)\\1', '(?=a)b', '^\\p{L}+$', '[a-z]{3,63}']) {
      const out = compileUserSchema({ type: 'string', pattern });
      expect(typeof out, pattern).toBe('object');
      expect((out as { error: string }).error, pattern).toMatch(/linear time|Invalid regular expression/);
    }
    expect(typeof compileUserSchema({ type: 'string', pattern: '(' })).toBe('object');
    expect(typeof compileUserSchema({ type: 'string', pattern: '^[0-9]+(h|m|s|ms)$' })).toBe('function');
  });
});
