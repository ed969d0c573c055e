// Request ids shaped like OpenZiti's `eid.New()` shortids: 9 characters over the 64-character
// alphabet `0-9a-zA-Z.-` (openziti/ziti common/eid/id.go). 54 random bits each, drawn from a
// pooled CSPRNG buffer so an id costs no syscall.
import { randomFillSync } from 'node:crypto';

export const REQUEST_ID_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-';
export const REQUEST_ID_LENGTH = 9;

const CODES = Uint8Array.from(REQUEST_ID_ALPHABET, (c) => c.charCodeAt(0));
if (CODES.length !== 64) throw new Error('request id alphabet must have 64 characters');

/** Random bytes for 455 ids per refill. */
const POOL_BYTES = 4095;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let poolOffset = POOL_BYTES;

export function newRequestId(): string {
  if (poolOffset + REQUEST_ID_LENGTH > POOL_BYTES) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const o = poolOffset;
  poolOffset += REQUEST_ID_LENGTH;
  return String.fromCharCode(
    CODES[pool[o]! & 63]!,
    CODES[pool[o + 1]! & 63]!,
    CODES[pool[o + 2]! & 63]!,
    CODES[pool[o + 3]! & 63]!,
    CODES[pool[o + 4]! & 63]!,
    CODES[pool[o + 5]! & 63]!,
    CODES[pool[o + 6]! & 63]!,
    CODES[pool[o + 7]! & 63]!,
    CODES[pool[o + 8]! & 63]!,
  );
}
