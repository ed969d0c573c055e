import { describe, expect, it } from 'vitest';
import { checkAgainstSchema, compileUserSchema, expandCountedRepetition } from './user-schema.js';

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
    for (const pattern of ['(a)\\1', '(?=a)b', '^\\p{L}+$', 'a{1001}', 'a{2,1001}', 'a{5,3}']) {
      const out = compileUserSchema({ type: 'string', pattern });
      expect(typeof out, pattern).toBe('object');
      expect((out as { error: string }).error, pattern).toMatch(/linear time|Invalid regular expression/);
    }
    expect(typeof compileUserSchema({ type: 'string', pattern: '(' })).toBe('object');
    expect(typeof compileUserSchema({ type: 'string', pattern: '^[0-9]+(h|m|s|ms)$' })).toBe('function');
  });

  it('counted repetitions above 16 run on the linear engine, written out (RE2 takes them too)', () => {
    const host = { type: 'string', pattern: '^[a-z0-9-]{1,63}$' };
    expect(checkAgainstSchema(host, 'a'.repeat(63), 'data')).toBeNull();
    expect(checkAgainstSchema(host, 'a'.repeat(64), 'data')?.field).toBe('(root)');
    expect(checkAgainstSchema(host, '', 'data')?.field).toBe('(root)');
    const nested = { type: 'string', pattern: '^(a{1,30})+$' };
    const t0 = performance.now();
    expect(checkAgainstSchema(nested, `${'a'.repeat(5000)}!`, 'data')?.field).toBe('(root)');
    expect(checkAgainstSchema(nested, 'a'.repeat(5000), 'data')).toBeNull();
    expect(performance.now() - t0).toBeLessThan(2000);
    for (const pattern of ['^x{1000}$', '^[\\]a]{20,}$', '^(?:ab|c){2,40}d\\x41{17}$']) {
      expect(typeof compileUserSchema({ type: 'string', pattern }), pattern).toBe('function');
    }
    expect(checkAgainstSchema({ type: 'string', pattern: '^[\\]a]{20,}$' }, ']a'.repeat(10), 'data')).toBeNull();
    expect(checkAgainstSchema({ type: 'string', pattern: '^[\\]a]{20,}$' }, ']a'.repeat(9), 'data')).not.toBeNull();
  });

  it('writing counted repetitions out keeps the language (random patterns and strings, seeded)', () => {
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const atoms = ['a', 'b', '[ab]', '\\x61', '(?:ab|b)', '(a|bb)', '.'];
    const quant = () => ['', '*', '+', '?', `{${rand(4)}}`, `{${rand(3)},}`, `{${rand(2)},${2 + rand(3)}}`][rand(7)]!;
    for (let k = 0; k < 300; k++) {
      let p = '^';
      for (let n = 1 + rand(4); n > 0; n--) {
        const inner = atoms[rand(atoms.length)]! + quant();
        p += rand(4) === 0 ? `(?:${inner}|c)${quant()}` : inner;
      }
      p += '$';
      const a = new RegExp(p);
      const b = new RegExp(expandCountedRepetition(p));
      for (let t = 0; t < 20; t++) {
        let str = '';
        for (let n = rand(9); n > 0; n--) str += 'abc'[rand(3)];
        expect(b.test(str), `${p} on ${str}`).toBe(a.test(str));
      }
    }
    expect(expandCountedRepetition('x{2,4}')).toBe('xx(?:x(?:x)?)?');
    expect(expandCountedRepetition('a{,3}')).toBe('a{,3}'); // not a quantifier without u: literal braces
  });
});
