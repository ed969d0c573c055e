import argon2 from 'argon2';
import { Errors } from '../../http/errors.js';

/**
 * Password hashing: argon2id with OWASP's minimum parameters (19 MiB, 2 passes, 1 lane). The encoded hash
 * carries its own salt and parameters, so stronger settings can be introduced without a migration.
 *
 * argon2 is deliberately expensive, so it runs through a bounded gate: at most MAX_IN_FLIGHT hashes at once and
 * MAX_WAITING queued; beyond that the caller gets 429 SERVER_TOO_MANY_REQUESTS (as from OpenZiti's
 * authentication rate limiter) instead of piling up work.
 */
const OPTIONS = { type: argon2.argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;
export const MAX_IN_FLIGHT = 4;
export const MAX_WAITING = 64;

let inFlight = 0;
const waiting: (() => void)[] = [];

async function gated<T>(work: () => Promise<T>): Promise<T> {
  if (inFlight >= MAX_IN_FLIGHT) {
    if (waiting.length >= MAX_WAITING) throw Errors.SERVER_TOO_MANY_REQUESTS();
    await new Promise<void>((resolve) => waiting.push(resolve));
  } else {
    inFlight++;
  }
  try {
    return await work();
  } finally {
    const next = waiting.shift();
    if (next)
      next(); // the slot passes straight to the next waiter
    else inFlight--;
  }
}

export function hashPassword(password: string): Promise<string> {
  return gated(() => argon2.hash(password, OPTIONS));
}

export function verifyPassword(hash: string, password: string): Promise<boolean> {
  return gated(async () => {
    try {
      return await argon2.verify(hash, password);
    } catch {
      return false;
    }
  });
}

/** A hash of a random password, verified against when the username is unknown so that timing does not tell. */
let dummy: Promise<string> | null = null;
export async function verifyAgainstDummy(password: string): Promise<void> {
  dummy ??= hashPassword(`dummy-${Math.random()}`);
  await verifyPassword(await dummy, password);
}

/** For tests: current gate occupancy. */
export function passwordGate(): { inFlight: number; waiting: number } {
  return { inFlight, waiting: waiting.length };
}
