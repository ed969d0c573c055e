import argon2 from 'argon2';
import { gated, type LoginSource } from './rate-limit.js';

/**
 * Password hashing: argon2id with OWASP's minimum parameters (19 MiB, 2 passes, 1 lane). The encoded hash
 * carries its own salt and parameters, so stronger settings can be introduced without a migration.
 *
 * argon2 is deliberately expensive, so every hash and check runs through the authentication rate limiter
 * (src/auth/rate-limit.ts): bounded, adaptive, fair per source; beyond it the caller gets 429
 * SERVER_TOO_MANY_REQUESTS. Checks of an admin's password have a lane of their own.
 */
const OPTIONS = { type: argon2.argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

const INTERNAL: LoginSource = { source: 'internal' };

export function hashPassword(password: string, who: LoginSource = INTERNAL): Promise<string> {
  return gated(who, () => argon2.hash(password, OPTIONS));
}

export function verifyPassword(hash: string, password: string, who: LoginSource = INTERNAL): Promise<boolean> {
  return gated(who, async () => {
    try {
      return await argon2.verify(hash, password);
    } catch {
      return false;
    }
  });
}

/** A hash of a random password, verified against when the username is unknown so that timing does not tell. */
let dummy: Promise<string> | null = null;
export async function verifyAgainstDummy(password: string, who: LoginSource = INTERNAL): Promise<void> {
  dummy ??= argon2.hash(`dummy-${Math.random()}`, OPTIONS);
  await verifyPassword(await dummy, password, { source: who.source });
}
