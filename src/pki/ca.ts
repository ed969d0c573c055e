/**
 * Certificate authorities and the certificates they issue: a self-signed root, intermediates (pathLen 0) that
 * sign leaves, server/client leaves with fresh P-256 keys, and certificates for PKCS#10 requests (CSRs).
 */
import { createPublicKey } from 'node:crypto';
import { isIP as isIpAddress } from 'node:net';
import { assert } from '../../storage/types.js';
import {
  type CryptoKey,
  exportKeyPem,
  generateKeyPair,
  importSigningKey,
  parseCertificate,
  parseCertificates,
  pemBlocks,
  randomSerial,
  type SigningKey,
  x509,
} from './crypto.js';
import { PkiError } from './errors.js';

/** A CA: its certificate, its private key (PKCS#8 PEM) and its issuers up to the root (nearest first; [] for a root). */
export interface CaMaterial {
  certPem: string;
  keyPem: string;
  chainPem: string[];
}

/** A leaf: its private key, its certificate, and its issuers up to the root (issuing CA first, root last). */
export interface KeyAndCert {
  keyPem: string;
  certPem: string;
  chainPem: string[];
}

/** What a leaf certificate may be used for (extended key usage): TLS client, TLS server, or both. */
export type CertUsage = 'client' | 'server' | 'both';

export const DEFAULT_ROOT_VALIDITY_DAYS = 3650;
export const DEFAULT_INTERMEDIATE_VALIDITY_DAYS = 3650;
export const DEFAULT_LEAF_VALIDITY_DAYS = 365;
export const MAX_VALIDITY_DAYS = 36_500;
/** notBefore is set this far in the past, so a peer whose clock is a little behind accepts a fresh certificate. */
export const BACKDATE_MS = 5 * 60 * 1000;
/** Largest CSR accepted (PEM text). */
export const MAX_CSR_SIZE_BYTES = 64 * 1024;
export const MIN_RSA_BITS = 2048;
export const MAX_RSA_BITS = 8192;
/** X.520 upper bound of a common name. */
export const MAX_COMMON_NAME_LENGTH = 64;
/** Bound on the subject alternative names of one certificate. */
export const MAX_SANS = 100;

const DAY_MS = 24 * 60 * 60 * 1000;
const MIN_SHORT_VALIDITY_MS = 60 * 1000;
const OID_BASIC_CONSTRAINTS = '2.5.29.19';
/** EC curves Keel accepts and verifies signatures on (WebCrypto's): CSR keys, third-party CA keys. */
export const EC_CURVES_ACCEPTED: ReadonlySet<string> = new Set(['prime256v1', 'secp384r1', 'secp521r1']);

/**
 * A controller's peer certificate names its node by a SAN URI: this prefix + the node id. Only issuePeerCert
 * (src/pki/cluster.ts) issues such URIs; issueServerCert refuses them and signCsr copies no SANs from requests.
 */
export const PEER_URI_PREFIX = 'spiffe://keel/controller/';

export interface CaOptions {
  commonName: string;
  validity_days?: number;
}

export interface LeafOptions {
  commonName: string;
  dnsNames?: string[];
  ipAddresses?: string[];
  /** URI SANs, e.g. a node's `spiffe://keel/controller/<id>`. */
  uris?: string[];
  validity_days?: number;
  /** Default 'server'. Cluster peers use 'both'. */
  usage?: CertUsage;
}

export interface CsrOptions {
  /** Replaces the request's subject with `CN=<commonName>` (OpenZiti names enrolled certificates by id). */
  commonName?: string;
  dnsNames?: string[];
  ipAddresses?: string[];
  validity_days?: number;
  /** A lifetime shorter than a day (ephemeral certificates); replaces `validity_days`. 1 minute .. 1 day. */
  validity_ms?: number;
  usage: CertUsage;
}

function checkCommonName(cn: string): void {
  if (typeof cn !== 'string' || cn.length === 0 || cn.length > MAX_COMMON_NAME_LENGTH) {
    throw new PkiError('INVALID_ARGUMENT', `common name must have 1..${MAX_COMMON_NAME_LENGTH} characters`);
  }
}

function validityDays(days: number | undefined, fallback: number): number {
  const d = days ?? fallback;
  if (!Number.isInteger(d) || d < 1 || d > MAX_VALIDITY_DAYS) {
    throw new PkiError('INVALID_ARGUMENT', `validity_days must be an integer in 1..${MAX_VALIDITY_DAYS}`);
  }
  return d;
}

/** A sub-day lifetime in (fractional) days, checked: MIN_SHORT_VALIDITY_MS .. one day. */
function shortValidityDays(ms: number): number {
  if (!Number.isInteger(ms) || ms < MIN_SHORT_VALIDITY_MS || ms > DAY_MS) {
    throw new PkiError('INVALID_ARGUMENT', `validity_ms must be an integer in ${MIN_SHORT_VALIDITY_MS}..${DAY_MS}`);
  }
  return ms / DAY_MS;
}

/** notBefore/notAfter for a new certificate; never past its issuer's notAfter. */
function validityWindow(days: number, issuer: x509.X509Certificate | null): { notBefore: Date; notAfter: Date } {
  const now = Date.now();
  let notAfter = now + days * DAY_MS;
  if (issuer) notAfter = Math.min(notAfter, issuer.notAfter.getTime());
  // X.509 times have second precision: round down so the encoded value equals the chosen one.
  const notBefore = Math.floor((now - BACKDATE_MS) / 1000) * 1000;
  notAfter = Math.floor(notAfter / 1000) * 1000;
  if (notAfter <= now) throw new PkiError('INVALID_ARGUMENT', 'the issuing CA has expired');
  assert(notBefore < notAfter, 'certificate validity window is empty');
  return { notBefore: new Date(notBefore), notAfter: new Date(notAfter) };
}

const DNS_NAME =
  /^(?=.{1,253}$)(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** Whether a text is a valid DNS name for a certificate SAN (optionally a leading wildcard label). */
export function isDnsName(name: string): boolean {
  return DNS_NAME.test(name);
}

function sanNames(dnsNames: string[] = [], ipAddresses: string[] = [], uris: string[] = []): x509.JsonGeneralName[] {
  if (dnsNames.length + ipAddresses.length + uris.length > MAX_SANS) {
    throw new PkiError('INVALID_ARGUMENT', `at most ${MAX_SANS} subject alternative names`);
  }
  const names: x509.JsonGeneralName[] = [];
  for (const d of dnsNames) {
    if (!DNS_NAME.test(d)) throw new PkiError('INVALID_ARGUMENT', `invalid DNS name '${d}'`);
    names.push({ type: 'dns', value: d });
  }
  for (const ip of ipAddresses) {
    if (isIpAddress(ip) === 0) throw new PkiError('INVALID_ARGUMENT', `invalid IP address '${ip}'`);
    names.push({ type: 'ip', value: ip });
  }
  for (const u of uris) {
    if (!URL.canParse(u)) throw new PkiError('INVALID_ARGUMENT', `invalid URI '${u}'`);
    names.push({ type: 'url', value: u });
  }
  return names;
}

function ekus(usage: CertUsage): string[] {
  if (usage === 'client') return [x509.ExtendedKeyUsage.clientAuth];
  if (usage === 'server') return [x509.ExtendedKeyUsage.serverAuth];
  if (usage === 'both') return [x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth];
  throw new PkiError('INVALID_ARGUMENT', `usage must be client, server or both`);
}

function cnName(cn: string): x509.JsonName {
  return [{ CN: [cn] }];
}

/** A CA's certificate and signing key, with the check that the key belongs to the certificate. */
async function openCa(ca: CaMaterial): Promise<{ cert: x509.X509Certificate; signer: SigningKey }> {
  const cert = parseCertificate(ca.certPem);
  if (!cert) throw new PkiError('CERT_MALFORMED', 'the CA certificate does not parse');
  const signer = await importSigningKey(ca.keyPem);
  if (!Buffer.from(cert.publicKey.rawData).equals(signer.spki)) {
    throw new PkiError('KEY_MISMATCH', 'the CA private key does not match its certificate');
  }
  return { cert, signer };
}

async function issue(
  ca: CaMaterial,
  subject: x509.JsonName | x509.Name,
  publicKey: x509.PublicKey | CryptoKey,
  days: number,
  extensions: x509.Extension[],
): Promise<string> {
  const { cert: issuer, signer } = await openCa(ca);
  const { notBefore, notAfter } = validityWindow(days, issuer);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject,
    issuer: issuer.subjectName,
    notBefore,
    notAfter,
    publicKey,
    signingKey: signer.key,
    signingAlgorithm: signer.algorithm,
    extensions: [
      ...extensions,
      await x509.SubjectKeyIdentifierExtension.create(publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(issuer.publicKey),
    ],
  });
  // What was signed is what was asked for: the subject's key, inside the issuer's validity.
  assert(
    Buffer.from(cert.publicKey.rawData).equals(Buffer.from((await x509.PublicKey.create(publicKey)).rawData)),
    'issued key differs',
  );
  assert(cert.notAfter.getTime() <= issuer.notAfter.getTime(), 'certificate outlives its issuer');
  return cert.toString('pem');
}

/**
 * Checks an operator's root CA: one parseable certificate, self-signed, CA:true with keyCertSign (when it has key
 * usage), valid now, and the private key belongs to it. Returns the material as Keel stores it.
 */
export async function checkRootCa(certPem: string, keyPem: string, at = new Date()): Promise<CaMaterial> {
  const certs = parseCertificates(certPem);
  if (certs.length !== 1) throw new PkiError('CERT_MALFORMED', 'the root CA file must hold exactly one certificate');
  const cert = certs[0]!;
  const bc = cert.getExtension(x509.BasicConstraintsExtension);
  const ku = cert.getExtension(x509.KeyUsagesExtension);
  if (!bc?.ca || (ku && (ku.usages & x509.KeyUsageFlags.keyCertSign) === 0)) {
    throw new PkiError('CERT_INVALID', 'the root CA certificate is not a CA (basicConstraints CA:true, keyCertSign)');
  }
  let selfSigned = false;
  try {
    selfSigned = cert.subject === cert.issuer && (await cert.verify({ publicKey: cert, signatureOnly: true }));
  } catch {
    selfSigned = false;
  }
  if (!selfSigned) throw new PkiError('CERT_INVALID', 'the root CA certificate is not self-signed');
  if (at < cert.notBefore || at > cert.notAfter) {
    throw new PkiError('CERT_INVALID', 'the root CA certificate is not valid now');
  }
  const ca = { certPem: cert.toString('pem'), keyPem, chainPem: [] };
  await openCa(ca);
  return ca;
}

/** A self-signed root CA: CA:true, keyCertSign|cRLSign, P-256. */
export async function createRootCa(opts: CaOptions): Promise<CaMaterial> {
  checkCommonName(opts.commonName);
  const days = validityDays(opts.validity_days, DEFAULT_ROOT_VALIDITY_DAYS);
  const keys = await generateKeyPair();
  const { notBefore, notAfter } = validityWindow(days, null);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: cnName(opts.commonName),
    notBefore,
    notAfter,
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await exportKeyPem(keys.privateKey), chainPem: [] };
}

/** An intermediate CA signed by `parent`: CA:true with pathLen 0 (it signs leaves only). */
export async function createIntermediateCa(parent: CaMaterial, opts: CaOptions): Promise<CaMaterial> {
  checkCommonName(opts.commonName);
  const days = validityDays(opts.validity_days, DEFAULT_INTERMEDIATE_VALIDITY_DAYS);
  const keys = await generateKeyPair();
  const certPem = await issue(parent, cnName(opts.commonName), keys.publicKey, days, [
    new x509.BasicConstraintsExtension(true, 0, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
  ]);
  return { certPem, keyPem: await exportKeyPem(keys.privateKey), chainPem: [parent.certPem, ...parent.chainPem] };
}

function leafExtensions(usage: CertUsage, rsa: boolean, sans: x509.JsonGeneralName[]): x509.Extension[] {
  const flags = x509.KeyUsageFlags.digitalSignature | (rsa ? x509.KeyUsageFlags.keyEncipherment : 0);
  const exts: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(flags, true),
    new x509.ExtendedKeyUsageExtension(ekus(usage), false),
  ];
  if (sans.length > 0) exts.push(new x509.SubjectAlternativeNameExtension(sans, false));
  return exts;
}

/** A fresh P-256 key and a leaf certificate for it (serverAuth by default; 'both' for cluster peers). */
export async function issueServerCert(ca: CaMaterial, opts: LeafOptions): Promise<KeyAndCert> {
  if (opts.uris?.some((u) => u.toLowerCase().startsWith(PEER_URI_PREFIX))) {
    throw new PkiError('INVALID_ARGUMENT', `only peer certificates name ${PEER_URI_PREFIX}… (issuePeerCert)`);
  }
  return issueLeaf(ca, opts);
}

/** A listener's certificate for `hosts` (DNS names and IP addresses, the first one its CN): serverAuth. */
export function issueHostCert(ca: CaMaterial, hosts: string[], validity_days?: number): Promise<KeyAndCert> {
  if (hosts.length === 0) throw new PkiError('INVALID_ARGUMENT', 'a server certificate needs at least one host');
  return issueServerCert(ca, {
    commonName: hosts[0]!.slice(0, MAX_COMMON_NAME_LENGTH),
    ...splitHosts(hosts),
    validity_days,
  });
}

/** Hosts as SAN lists: IP addresses apart from DNS names. */
export function splitHosts(hosts: string[]): { dnsNames: string[]; ipAddresses: string[] } {
  return {
    dnsNames: hosts.filter((h) => isIpAddress(h) === 0),
    ipAddresses: hosts.filter((h) => isIpAddress(h) !== 0),
  };
}

/** issueServerCert without the peer URI guard: for issuePeerCert only. */
export async function issueLeaf(ca: CaMaterial, opts: LeafOptions): Promise<KeyAndCert> {
  checkCommonName(opts.commonName);
  const days = validityDays(opts.validity_days, DEFAULT_LEAF_VALIDITY_DAYS);
  const usage = opts.usage ?? 'server';
  const exts = leafExtensions(usage, false, sanNames(opts.dnsNames, opts.ipAddresses, opts.uris));
  const keys = await generateKeyPair();
  const certPem = await issue(ca, cnName(opts.commonName), keys.publicKey, days, exts);
  return { keyPem: await exportKeyPem(keys.privateKey), certPem, chainPem: [ca.certPem, ...ca.chainPem] };
}

/** The length of the DER SEQUENCE that starts `der` (its header included); null when it is not one. */
function derValueLength(der: Uint8Array): number | null {
  if (der.length < 2 || der[0] !== 0x30) return null;
  const first = der[1]!;
  if (first < 0x80) return 2 + first;
  const octets = first & 0x7f;
  if (octets === 0 || octets > 4 || der.length < 2 + octets) return null;
  let length = 0;
  for (let i = 0; i < octets; i++) length = length * 256 + der[2 + i]!;
  return 2 + octets + length;
}

/**
 * Parses and checks a PEM certificate request: size, one block of one DER value, self-signature, key type and
 * size, no CA:true.
 */
export async function parseCsr(csrPem: string): Promise<x509.Pkcs10CertificateRequest> {
  return (await checkedCsr(csrPem)).csr;
}

async function checkedCsr(csrPem: string): Promise<{ csr: x509.Pkcs10CertificateRequest; rsa: boolean }> {
  if (typeof csrPem !== 'string') throw new PkiError('CSR_MALFORMED', 'the CSR must be PEM text');
  if (Buffer.byteLength(csrPem) > MAX_CSR_SIZE_BYTES) {
    throw new PkiError('CSR_TOO_LARGE', `the CSR is larger than ${MAX_CSR_SIZE_BYTES} bytes`);
  }
  const blocks = [...pemBlocks(csrPem, 'CERTIFICATE REQUEST'), ...pemBlocks(csrPem, 'NEW CERTIFICATE REQUEST')];
  if (blocks.length !== 1) throw new PkiError('CSR_MALFORMED', 'expected exactly one PEM certificate request');
  let csr: x509.Pkcs10CertificateRequest;
  try {
    const body = blocks[0]!.replace(/-----(BEGIN|END) (NEW )?CERTIFICATE REQUEST-----/g, '').replace(/\s+/g, '');
    const der = Buffer.from(body, 'base64');
    // one DER value and nothing after it, as Go's x509.ParseCertificateRequest requires ("trailing data")
    if (derValueLength(der) !== der.length) throw new Error('not exactly one DER value');
    csr = new x509.Pkcs10CertificateRequest(der);
  } catch {
    throw new PkiError('CSR_MALFORMED', 'the certificate request does not parse');
  }
  const rsa = checkCsrKey(csr);
  let valid = false;
  try {
    valid = await csr.verify();
  } catch {
    valid = false;
  }
  if (!valid) throw new PkiError('CSR_BAD_SIGNATURE', 'the certificate request signature does not verify');
  const bc = csr.extensions.find((e) => e.type === OID_BASIC_CONSTRAINTS);
  if (bc) {
    let ca: boolean;
    try {
      ca = new x509.BasicConstraintsExtension(bc.rawData).ca;
    } catch {
      throw new PkiError('CSR_MALFORMED', 'the requested basicConstraints do not parse');
    }
    if (ca) throw new PkiError('CSR_CA_REQUESTED', 'the certificate request asks for a CA certificate');
  }
  return { csr, rsa };
}

/** Key of a CSR: ECDSA on P-256/P-384/P-521, or RSA of MIN_RSA_BITS..MAX_RSA_BITS. Returns whether it is RSA. */
function checkCsrKey(csr: x509.Pkcs10CertificateRequest): boolean {
  let key: ReturnType<typeof createPublicKey>;
  try {
    key = createPublicKey({ key: Buffer.from(csr.publicKey.rawData), format: 'der', type: 'spki' });
  } catch {
    throw new PkiError('CSR_UNSUPPORTED_KEY', 'the requested public key is not a supported type');
  }
  if (key.asymmetricKeyType === 'ec') {
    if (!EC_CURVES_ACCEPTED.has(key.asymmetricKeyDetails?.namedCurve ?? '')) {
      throw new PkiError('CSR_UNSUPPORTED_KEY', 'EC keys must use P-256, P-384 or P-521');
    }
    return false;
  }
  if (key.asymmetricKeyType === 'rsa') {
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < MIN_RSA_BITS)
      throw new PkiError('CSR_KEY_TOO_SMALL', `RSA keys must have at least ${MIN_RSA_BITS} bits`);
    if (bits > MAX_RSA_BITS)
      throw new PkiError('CSR_UNSUPPORTED_KEY', `RSA keys must have at most ${MAX_RSA_BITS} bits`);
    return true;
  }
  throw new PkiError('CSR_UNSUPPORTED_KEY', `unsupported key type ${key.asymmetricKeyType}`);
}

/**
 * Signs a PEM certificate request with `ca` and returns the certificate (PEM). The request is checked by parseCsr;
 * only its subject (unless `commonName` replaces it) and public key are used: requested extensions and SANs are
 * ignored, the certificate gets CA:false, the given usage and the given SANs.
 */
export async function signCsr(ca: CaMaterial, csrPem: string, opts: CsrOptions): Promise<string> {
  if (opts.commonName !== undefined) checkCommonName(opts.commonName);
  const days =
    opts.validity_ms === undefined
      ? validityDays(opts.validity_days, DEFAULT_LEAF_VALIDITY_DAYS)
      : shortValidityDays(opts.validity_ms);
  const sans = sanNames(opts.dnsNames, opts.ipAddresses);
  const { csr, rsa } = await checkedCsr(csrPem);
  const subject = opts.commonName !== undefined ? cnName(opts.commonName) : csr.subjectName;
  return issue(ca, subject, csr.publicKey, days, leafExtensions(opts.usage, rsa, sans));
}
