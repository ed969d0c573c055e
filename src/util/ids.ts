import { randomFillSync, randomUUID } from 'node:crypto';

/** OpenZiti's id alphabet (`common/eid`): shortids such as `Xk3.9aZ1Q`. */
const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-';
const SHORT_ID_CHARS = 10;
/** Random bytes for 409 ids per refill: an id costs no call into the CSPRNG (creates are the hot write). */
const POOL_BYTES = 4090;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let poolOffset = POOL_BYTES;

/** SHORT_ID_CHARS fresh random bytes from the pool (each byte is handed out once). */
function randomChars(): number {
  if (poolOffset + SHORT_ID_CHARS > POOL_BYTES) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const at = poolOffset;
  poolOffset += SHORT_ID_CHARS;
  return at;
}

/** A random shortid (60 bits of entropy). Never starts or ends with '.' so that it is safe as a URL path segment. */
export function shortId(): string {
  for (;;) {
    const at = randomChars();
    const first = ALPHABET_CODES[pool[at]! & 63]!;
    const last = ALPHABET_CODES[pool[at + SHORT_ID_CHARS - 1]! & 63]!;
    if (first === DOT || first === DASH || last === DOT) continue;
    // one string, built at once (appending character by character makes a string per character)
    for (let i = 0; i < SHORT_ID_CHARS; i++) idChars[i] = ALPHABET_CODES[pool[at + i]! & 63]!;
    return idChars.toString('latin1', 0, SHORT_ID_CHARS);
  }
}

const ALPHABET_CODES = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));
const DOT = '.'.charCodeAt(0);
const DASH = '-'.charCodeAt(0);
const idChars = Buffer.allocUnsafe(SHORT_ID_CHARS);

export function uuid(): string {
  return randomUUID();
}
