import argon2 from 'argon2';

/**
 * Password hashing: argon2id with OWASP's minimum parameters (19 MiB, 2 passes, 1 lane). The encoded hash
 * carries its own salt and parameters, so stronger settings can be introduced without a migration.
 */
const OPTIONS = { type: argon2.argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export function hashPassword(password: string): Promise<string> {
  return argon2.hash(password, OPTIONS);
}

export async function verifyPassword(hash: string, password: string): Promise<boolean> {
  try {
    return await argon2.verify(hash, password);
  } catch {
    return false;
  }
}

/** A hash of a random password, verified against when the username is unknown so that timing does not tell. */
let dummy: Promise<string> | null = null;
export async function verifyAgainstDummy(password: string): Promise<void> {
  dummy ??= hashPassword(`dummy-${Math.random()}`);
  await verifyPassword(await dummy, password);
}
