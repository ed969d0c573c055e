import { randomFillSync, randomUUID } from 'node:crypto';
import { assert } from '../../storage/types.js';

/**
 * Entity ids: strings of OpenZiti's id alphabet (`common/eid`: `0-9a-zA-Z.-`), in two parts.
 *
 * - **Time** (TIME_CHARS): the creation time in milliseconds, in base 64 over the alphabet sorted by code unit, so
 *   that ids made later sort after earlier ones. Each collection keeps its rows in id order (storage/sorted-rows.ts)
 *   and the store's LevelDB keys are ids: a new row then lands at the end of both, where a random id would land
 *   anywhere and move up to a chunk of entries in memory (and spread LevelDB's compactions over the whole key range).
 *   The order is only as good as the clocks of the members creating rows (a member whose clock lags puts its rows a
 *   little earlier): nothing relies on it for correctness, only for speed.
 * - **Random** (RANDOM_CHARS): 54 bits from the CSPRNG, so ids made in the same millisecond, on any member, differ
 *   (a repeat would be refused by the create, never stored twice) and an id says nothing but its creation time,
 *   which the entity's `createdAt` shows anyway.
 *
 * Never starts or ends with '.' (safe as a URL path segment).
 */
const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-';
/** The same characters in ascending code-unit order: the digits of the time part. */
const SORTED = [...ALPHABET].sort().join('');
/** 7 base-64 digits: 42 bits of milliseconds, until the year 2109. */
export const TIME_CHARS = 7;
export const RANDOM_CHARS = 9;
export const ID_CHARS = TIME_CHARS + RANDOM_CHARS;
/** Random bytes for 454 ids per refill: an id costs no call into the CSPRNG (creates are the hot write). */
const POOL_BYTES = RANDOM_CHARS * 454;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let poolOffset = POOL_BYTES;

/** RANDOM_CHARS fresh random bytes from the pool (each byte is handed out once). */
function randomChars(): number {
  if (poolOffset + RANDOM_CHARS > POOL_BYTES) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const at = poolOffset;
  poolOffset += RANDOM_CHARS;
  return at;
}

/** A new id: the time part of `now_ms` and fresh random characters (see the module comment). */
export function shortId(now_ms: number = Date.now()): string {
  if (!(Number.isSafeInteger(now_ms) && now_ms >= 0 && now_ms < TIME_LIMIT_MS))
    assert(false, 'shortId: time out of range');
  let t = now_ms;
  for (let i = TIME_CHARS - 1; i >= 0; i--) {
    idChars[i] = SORTED_CODES[t % 64]!;
    t = Math.floor(t / 64);
  }
  // the first digit of any time since 1974-05 (2 × 64^6 ms) is a digit or a letter, never '-' or '.' (the lowest two)
  if (idChars[0] === DOT || idChars[0] === DASH) assert(false, 'shortId: time part starts with punctuation');
  for (;;) {
    const at = randomChars();
    const last = ALPHABET_CODES[pool[at + RANDOM_CHARS - 1]! & 63]!;
    if (last === DOT) continue;
    // one string, built at once (appending character by character makes a string per character)
    for (let i = 0; i < RANDOM_CHARS; i++) idChars[TIME_CHARS + i] = ALPHABET_CODES[pool[at + i]! & 63]!;
    return idChars.toString('latin1', 0, ID_CHARS);
  }
}

const TIME_LIMIT_MS = 64 ** TIME_CHARS;
const ALPHABET_CODES = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));
const SORTED_CODES = Uint8Array.from(SORTED, (c) => c.charCodeAt(0));
const DOT = '.'.charCodeAt(0);
const DASH = '-'.charCodeAt(0);
const idChars = Buffer.allocUnsafe(ID_CHARS);

export function uuid(): string {
  return randomUUID();
}
