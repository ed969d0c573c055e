/**
 * The PKI's crypto setup: @peculiar/x509 on Node's WebCrypto, key generation and PEM import/export.
 * Every other file of src/pki imports x509 from here, so the provider is set before first use.
 */
import 'reflect-metadata';
import { createPrivateKey, createPublicKey, randomBytes, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { PkiError } from './errors.js';
import { pemBlocks } from './pem.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export { pemBlocks, x509 };
export type CryptoKey = webcrypto.CryptoKey;
export type CryptoKeyPair = webcrypto.CryptoKeyPair;

/** Keys Keel generates: ECDSA P-256. */
export const KEY_ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const EC_CURVES: Record<string, { namedCurve: string; hash: string }> = {
  prime256v1: { namedCurve: 'P-256', hash: 'SHA-256' },
  secp384r1: { namedCurve: 'P-384', hash: 'SHA-384' },
  secp521r1: { namedCurve: 'P-521', hash: 'SHA-512' },
};

export async function generateKeyPair(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair;
}

/** PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), what node:tls and openssl read. */
export async function exportKeyPem(key: CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key);
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}

/** A private key and the signature algorithm certificates signed with it use. */
export interface SigningKey {
  key: CryptoKey;
  algorithm: { name: string; hash: string };
  /** DER SubjectPublicKeyInfo of the matching public key. */
  spki: Buffer;
}

/** Imports a PEM private key (PKCS#8, or SEC1/PKCS#1 as openssl writes them) of type EC or RSA for signing. */
export async function importSigningKey(pem: string): Promise<SigningKey> {
  let der: Buffer;
  let params: { name: string; namedCurve?: string; hash?: string };
  let algorithm: SigningKey['algorithm'];
  let spki: Buffer;
  try {
    const k = createPrivateKey(pem);
    spki = createPublicKey(k).export({ type: 'spki', format: 'der' });
    der = k.export({ type: 'pkcs8', format: 'der' });
    if (k.asymmetricKeyType === 'ec') {
      const curve = EC_CURVES[k.asymmetricKeyDetails?.namedCurve ?? ''];
      if (!curve) throw new PkiError('KEY_MALFORMED', 'unsupported EC curve');
      params = { name: 'ECDSA', namedCurve: curve.namedCurve };
      algorithm = { name: 'ECDSA', hash: curve.hash };
    } else if (k.asymmetricKeyType === 'rsa') {
      params = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
      algorithm = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
    } else {
      throw new PkiError('KEY_MALFORMED', `unsupported key type ${k.asymmetricKeyType}`);
    }
  } catch (err) {
    if (err instanceof PkiError) throw err;
    throw new PkiError('KEY_MALFORMED', 'not a PEM private key');
  }
  const key = await webcrypto.subtle.importKey('pkcs8', der, params, false, ['sign']);
  return { key, algorithm, spki };
}

/** A positive 127-bit serial number, hex. */
export function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) | 0x01;
  return bytes.toString('hex');
}

/** Parses one certificate (PEM text with exactly one certificate, or DER bytes); null when it is not one. */
export function parseCertificate(input: string | Uint8Array): x509.X509Certificate | null {
  try {
    if (typeof input === 'string') {
      const blocks = pemBlocks(input, 'CERTIFICATE');
      if (blocks.length !== 1) return null;
      return new x509.X509Certificate(blocks[0]!);
    }
    return new x509.X509Certificate(input);
  } catch {
    return null;
  }
}

/** Every certificate in a PEM text (a bundle); throws CERT_MALFORMED on a block that does not parse. */
export function parseCertificates(text: string): x509.X509Certificate[] {
  return pemBlocks(text, 'CERTIFICATE').map((block) => {
    try {
      return new x509.X509Certificate(block);
    } catch {
      throw new PkiError('CERT_MALFORMED', 'a certificate block does not parse');
    }
  });
}
