/**
 * The read-back check's comparison without decoding (storage/encodes-as.ts): it vouches for bytes only when they
 * decode to the value, and leaves everything else to the decoding check (storage/codec.ts).
 */
import { describe, expect, it } from 'vitest';
import { encodeChecked, packr, UnstorableError } from '../../storage/codec.js';
import { encodesAs } from '../../storage/encodes-as.js';

const row = {
  name: 'k0064-07-000000123',
  isAdmin: false,
  authPolicyId: 'default',
  roleAttributes: ['a', 'b'],
  id: 'i000000123',
  createdAt: '2026-11-26T00:00:00.000Z',
  tags: { k: 'v', n: 1 },
};

describe('encodesAs', () => {
  it.each([
    ['a row', row],
    ['unicode of 1 to 4 bytes', { s: 'aé✓😀', k: { ключ: '値' } }],
    ['strings of every header size', { a: 'x'.repeat(31), b: 'x'.repeat(200), c: 'é'.repeat(40_000) }],
    [
      'integers of every width',
      [0, 127, 128, 255, 256, 65_535, 65_536, 2 ** 32 - 1, -1, -32, -33, -128, -129, -(2 ** 31)],
    ],
    ['floats, NaN, -0', [1.5, -2.25, 1e300, Number.NaN, -0]],
    ['null, booleans, empty containers', [null, true, false, [], {}]],
    [
      'arrays and objects of 16 and more',
      {
        a: Array.from({ length: 20 }, (_, i) => i),
        o: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, i])),
      },
    ],
  ])('vouches for the bytes of %s', (_, value) => {
    expect(encodesAs(packr.pack(value), value)).toBe(true);
  });

  it.each([
    ['a changed character', { ...row, name: 'k0064-07-000000124' }],
    ['a changed unicode character', { ...row, name: 'k0064-07-00000012é' }],
    ['a changed number', { ...row, tags: { k: 'v', n: 2 } }],
    ['a renamed key', { ...row, tags: { K: 'v', n: 1 } }],
    ['a missing key', { ...row, tags: { k: 'v' } }],
    ['an extra key', { ...row, tags: { k: 'v', n: 1, x: null } }],
    ['a shorter array', { ...row, roleAttributes: ['a'] }],
    ['another type', { ...row, isAdmin: 0 }],
  ])('refuses the bytes of a row for a value with %s', (_, value) => {
    expect(encodesAs(packr.pack(row), value)).toBe(false);
  });

  it('refuses truncated bytes and bytes with more after the value', () => {
    const bytes = packr.pack(row);
    expect(encodesAs(bytes.subarray(0, bytes.length - 1), row)).toBe(false);
    expect(encodesAs(Buffer.concat([bytes, Buffer.from([0xc0])]), row)).toBe(false);
  });

  it.each([
    ['a lone surrogate (short string)', { s: 'a\ud800b' }],
    ['a lone surrogate (long string)', { s: `${'x'.repeat(100)}\udc00` }],
    ['a __proto__ key', JSON.parse('{"__proto__":{"x":1}}')],
    ['an undefined field', { a: undefined }],
    ['a date', { d: new Date(0) }],
    ['bytes', { b: new Uint8Array([1, 2]) }],
  ])('leaves %s to the decoding check', (_, value) => {
    expect(encodesAs(packr.pack(value), value)).toBe(false);
  });
});

describe('encodeChecked', () => {
  it('stores what the comparison does not model when it decodes the same, and refuses what does not', () => {
    const value = { d: new Date(5), b: new Uint8Array([1]), u: undefined };
    expect(packr.unpack(encodeChecked(value))).toEqual({ d: new Date(5), b: Buffer.from([1]), u: undefined });
    expect(() => encodeChecked({ tags: { s: 'a\ud800' } })).toThrow(UnstorableError);
  });
});
