import { randomBytes, randomUUID } from 'node:crypto';

/** OpenZiti's id alphabet (`common/eid`): shortids such as `Xk3.9aZ1Q`. */
const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-';
const SHORT_ID_CHARS = 10;

/** A random shortid (60 bits of entropy). Never starts or ends with '.' so that it is safe as a URL path segment. */
export function shortId(): string {
  for (;;) {
    const bytes = randomBytes(SHORT_ID_CHARS);
    let out = '';
    for (let i = 0; i < SHORT_ID_CHARS; i++) out += ALPHABET[bytes[i]! & 63];
    if (out[0] !== '.' && out[SHORT_ID_CHARS - 1] !== '.' && out[0] !== '-') return out;
  }
}

export function uuid(): string {
  return randomUUID();
}
