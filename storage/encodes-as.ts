/**
 * Whether MessagePack `bytes` decode to `value`, decided by reading the bytes against the value, without decoding
 * them (storage/codec.ts: the read-back check every stored row takes, on its common path). Nothing is allocated.
 *
 * It models what msgpackr (mapsAsObjects, no records) decodes, for the tokens it knows: nil → null, booleans,
 * integers of up to 32 bits and float64 → numbers, strings (UTF-8) → strings, arrays → arrays, maps with string keys
 * → plain objects with those own keys (a key `__proto__` is renamed by msgpackr: never vouched for). It answers true
 * only when every byte was read as a token of the value, in order, and the bytes end with it; false for any
 * difference and for anything it does not model (other tokens: 64-bit integers, float32, binary, extensions such
 * as dates or undefined; values that are not plain), which the caller then checks by decoding.
 *
 * Differences are judged like codec.ts's `firstDifference`: numbers by `===` (so -0 equals 0) or both NaN; object
 * keys as sets of own enumerable keys (here also in order: msgpackr writes them in `for…in` order). Recursive, as deep
 * as `value` (codec.ts bounds that before encoding).
 */

/** Read position in the bytes being compared (module state: the comparison is synchronous and not re-entrant). */
let at = 0;
let src: Buffer = Buffer.alloc(0);

export function encodesAs(bytes: Uint8Array, value: unknown): boolean {
  src = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  at = 0;
  try {
    return same(value) && at === src.length;
  } finally {
    src = EMPTY;
  }
}

const EMPTY = Buffer.alloc(0);

/** Reads one value at `at` and compares it with `value`; false as soon as they differ (or the bytes run out). */
function same(value: unknown): boolean {
  if (at >= src.length) return false;
  const t = src[at++]!;
  if (t <= 0x7f) return value === t; // positive fixint
  if (t >= 0xe0) return value === t - 0x100; // negative fixint
  if (t <= 0x8f) return sameObject(value, t & 0x0f);
  if (t <= 0x9f) return sameArray(value, t & 0x0f);
  if (t <= 0xbf) return sameString(value, t & 0x1f);
  switch (t) {
    case 0xc0:
      return value === null;
    case 0xc2:
      return value === false;
    case 0xc3:
      return value === true;
    case 0xcb:
      return number(8) && sameNumber(value, src.readDoubleBE(at - 8));
    case 0xcc:
      return number(1) && value === src[at - 1];
    case 0xcd:
      return number(2) && value === src.readUInt16BE(at - 2);
    case 0xce:
      return number(4) && value === src.readUInt32BE(at - 4);
    case 0xd0:
      return number(1) && value === src.readInt8(at - 1);
    case 0xd1:
      return number(2) && value === src.readInt16BE(at - 2);
    case 0xd2:
      return number(4) && value === src.readInt32BE(at - 4);
    case 0xd9:
      return number(1) && sameString(value, src[at - 1]!);
    case 0xda:
      return number(2) && sameString(value, src.readUInt16BE(at - 2));
    case 0xdb:
      return number(4) && sameString(value, src.readUInt32BE(at - 4));
    case 0xdc:
      return number(2) && sameArray(value, src.readUInt16BE(at - 2));
    case 0xdd:
      return number(4) && sameArray(value, src.readUInt32BE(at - 4));
    case 0xde:
      return number(2) && sameObject(value, src.readUInt16BE(at - 2));
    case 0xdf:
      return number(4) && sameObject(value, src.readUInt32BE(at - 4));
    default:
      return false; // not modelled: the caller decodes
  }
}

/** Skips `n` bytes of a token's argument; false when the bytes end first. */
function number(n: number): boolean {
  if (at + n > src.length) return false;
  at += n;
  return true;
}

function sameNumber(value: unknown, decoded: number): boolean {
  return typeof value === 'number' && (value === decoded || (Number.isNaN(value) && Number.isNaN(decoded)));
}

function sameArray(value: unknown, length: number): boolean {
  if (!Array.isArray(value) || value.length !== length) return false;
  for (let i = 0; i < length; i++) if (!same(value[i])) return false;
  return true;
}

function sameObject(value: unknown, size: number): boolean {
  if (typeof value !== 'object' || value === null || Object.getPrototypeOf(value) !== Object.prototype) return false;
  let n = 0;
  for (const k in value) {
    if (!Object.hasOwn(value, k)) continue;
    // msgpackr renames the key `__proto__` when decoding
    if (n === size || k === '__proto__' || !sameKey(k) || !same((value as Record<string, unknown>)[k])) return false;
    n++;
  }
  return n === size;
}

/** A map key: a string token (fixstr, str8/16/32) holding `k`. */
function sameKey(k: string): boolean {
  if (at >= src.length) return false;
  const t = src[at++]!;
  if (t >= 0xa0 && t <= 0xbf) return sameString(k, t & 0x1f);
  if (t === 0xd9) return number(1) && sameString(k, src[at - 1]!);
  if (t === 0xda) return number(2) && sameString(k, src.readUInt16BE(at - 2));
  if (t === 0xdb) return number(4) && sameString(k, src.readUInt32BE(at - 4));
  return false;
}

/**
 * Whether the next `length` bytes are the UTF-8 of `value`. Encodes `value` code point by code point as it goes; a
 * lone surrogate has no UTF-8 (msgpackr would store a replacement), so it is a difference.
 */
function sameString(value: unknown, length: number): boolean {
  if (typeof value !== 'string' || at + length > src.length) return false;
  const end = at + length;
  let p = at;
  for (let i = 0; i < value.length; i++) {
    let c = value.charCodeAt(i);
    if (c < 0x80) {
      if (p >= end || src[p++] !== c) return false;
      continue;
    }
    if (c < 0x800) {
      if (p + 2 > end || src[p++] !== (0xc0 | (c >> 6)) || src[p++] !== (0x80 | (c & 0x3f))) return false;
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const d = i + 1 < value.length ? value.charCodeAt(i + 1) : 0;
      if (c > 0xdbff || d < 0xdc00 || d > 0xdfff) return false; // a lone surrogate
      c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
      i++;
      if (
        p + 4 > end ||
        src[p++] !== (0xf0 | (c >> 18)) ||
        src[p++] !== (0x80 | ((c >> 12) & 0x3f)) ||
        src[p++] !== (0x80 | ((c >> 6) & 0x3f)) ||
        src[p++] !== (0x80 | (c & 0x3f))
      ) {
        return false;
      }
      continue;
    }
    if (
      p + 3 > end ||
      src[p++] !== (0xe0 | (c >> 12)) ||
      src[p++] !== (0x80 | ((c >> 6) & 0x3f)) ||
      src[p++] !== (0x80 | (c & 0x3f))
    ) {
      return false;
    }
  }
  if (p !== end) return false;
  at = end;
  return true;
}
