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
    let out = '';
    for (let i = 0; i < SHORT_ID_CHARS; i++) out += ALPHABET[pool[at + i]! & 63];
    if (out[0] !== '.' && out[SHORT_ID_CHARS - 1] !== '.' && out[0] !== '-') return out;
  }
}

export function uuid(): string {
  return randomUUID();
}
