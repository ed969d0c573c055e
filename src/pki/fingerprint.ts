import { createHash, X509Certificate } from 'node:crypto';
import { x509 } from './crypto.js';
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

/**
 * A certificate's common name as Go's `pkix.Name.CommonName` reads it (OpenZiti): the value of the subject's last
 * CN attribute, unescaped (a multi-valued RDN's CN included), '' when there is none or the DER does not parse.
 */
export function commonNameOf(der: Uint8Array): string {
  try {
    return lastCommonName(new x509.X509Certificate(der));
  } catch {
    return '';
  }
}

/** commonNameOf for a parsed certificate: the subject's last CN attribute, '' without one. */
export function lastCommonName(cert: x509.X509Certificate): string {
  const cns = cert.subjectName.getField('CN');
  return cns.length > 0 ? cns[cns.length - 1]! : '';
}
