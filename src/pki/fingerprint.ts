import { createHash, X509Certificate } from 'node:crypto';
import { pemBlocks } from './pem.js';

/** OpenZiti's certificate fingerprint: lower-case hex SHA-1 of the DER encoding, no separators. */
export function fingerprintOfDer(der: Buffer): string {
  return createHash('sha1').update(der).digest('hex');
}

/** Parses exactly one PEM certificate; null when the text is not one. */
export function parseSinglePem(pem: string): X509Certificate | null {
  const blocks = pemBlocks(pem, 'CERTIFICATE');
  if (blocks.length !== 1) return null;
  try {
    return new X509Certificate(blocks[0]!);
  } catch {
    return null;
  }
}
