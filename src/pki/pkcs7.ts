/** PKCS#7 "certs-only" (degenerate SignedData) bundles, as served by `GET /.well-known/est/cacerts` (RFC 7030). */
import { parseCertificates, x509 } from './crypto.js';
import { PkiError } from './errors.js';

/** Bound on the certificates of one bundle. */
export const MAX_PKCS7_CERTS = 1000;

/**
 * The certificates of the given PEM texts as a PKCS#7 certs-only structure, base64 in lines of 64 characters with a
 * trailing newline (what OpenZiti serves with content type application/pkcs7-mime).
 */
export function pkcs7CaCerts(certsPem: string[]): string {
  const certs = new x509.X509Certificates();
  for (const pem of certsPem) certs.push(...parseCertificates(pem));
  if (certs.length === 0) throw new PkiError('CERT_MALFORMED', 'no certificate to bundle');
  if (certs.length > MAX_PKCS7_CERTS)
    throw new PkiError('INVALID_ARGUMENT', `more than ${MAX_PKCS7_CERTS} certificates`);
  const b64 = certs.export('base64');
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += 64) lines.push(b64.slice(i, i + 64));
  return `${lines.join('\n')}\n`;
}
