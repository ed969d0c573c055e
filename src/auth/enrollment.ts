/**
 * Identity enrollment (docs/enrollment.md): an outstanding enrollment is found by its one-time token and consumed
 * by the write that creates the identity's authenticator, so a token enrolls at most once.
 */
import { X509Certificate } from 'node:crypto';
import { ApiError, Errors, fieldError } from '../api/errors.js';
import type { Services } from '../api/services.js';
import { checkPasswordPolicy } from '../model/authenticator.js';
import { stillEquals } from '../model/preconditions.js';
import type { Command, Expect, RowFor } from '../model/rows.js';
import { fingerprintOfDer } from '../pki/fingerprint.js';
import { type CaMaterial, type CsrOptions, PkiError, signCsr, verifyChain } from '../pki/index.js';
import { shortId } from '../util/ids.js';
import { hashPassword } from './password.js';

/** Enrollment tokens are UUIDs; anything longer is refused before a lookup. */
export const MAX_ENROLLMENT_TOKEN_LENGTH = 64;

/** What an OTT enrollment answers: the client chain (leaf, then the signing CA) and the CAs to trust. */
export interface EnrolledCerts {
  cert: string;
  ca: string;
}

/**
 * The outstanding enrollment a token names, checked: unknown token → INVALID_ENROLLMENT_TOKEN, another method →
 * INVALID_ENROLL_METHOD, past its `expiresAt` → ENROLLMENT_EXPIRED.
 */
export function enrollmentByToken(svc: Services, token: unknown, method: string): RowFor<'enrollments'> {
  if (typeof token !== 'string' || token.length === 0 || token.length > MAX_ENROLLMENT_TOKEN_LENGTH) {
    throw Errors.INVALID_ENROLLMENT_TOKEN();
  }
  const ids = svc.store.lookup('enrollments', 'token', token);
  const row = ids.length === 1 ? svc.get('enrollments', ids[0]!) : undefined;
  if (!row) throw Errors.INVALID_ENROLLMENT_TOKEN();
  if (row.method !== method) throw Errors.INVALID_ENROLL_METHOD();
  if (Date.parse(row.expiresAt as string) <= svc.clock.now()) throw Errors.ENROLLMENT_EXPIRED();
  return row;
}

/**
 * Deletes the enrollment and creates the authenticator in one write; a token consumed meanwhile is refused, and so
 * is the write when a condition of `expect` no longer holds.
 */
function consume(
  svc: Services,
  enrollment: RowFor<'enrollments'>,
  authenticator: Record<string, unknown>,
  expect: Expect[] = [],
): Promise<void> {
  return consumeEnrollment(
    svc,
    enrollment,
    (at) => [{ op: 'create', entity: 'authenticators', id: shortId(), at, data: authenticator }],
    expect,
  );
}

/**
 * Deletes the enrollment and applies what enrolling it brings (`then`) in one write, so a token enrolls at most
 * once; a token consumed (or whose subject was deleted) meanwhile is INVALID_ENROLLMENT_TOKEN. `expect`: further
 * conditions the write relies on (checked where it applies).
 */
export async function consumeEnrollment(
  svc: Services,
  enrollment: RowFor<'enrollments'>,
  then: (at: string) => Command[],
  expect: Expect[] = [],
): Promise<void> {
  const at = svc.nowIso();
  const ops: Command[] = [{ op: 'delete', entity: 'enrollments', id: enrollment.id, at, system: true }, ...then(at)];
  // the enrollment still holds the token presented: a refresh meanwhile replaced it, and the old one enrolls nothing
  const tokenHeld = stillEquals(
    'enrollments',
    enrollment.id,
    'token',
    enrollment.token,
    'the enrollment token was replaced',
    'INVALID_ENROLLMENT_TOKEN',
  );
  try {
    await svc.write({ op: 'batch', ops, expect: [tokenHeld, ...expect] });
  } catch (err) {
    // another request enrolled with this token (or the identity was deleted) between the lookup and the write
    if (err instanceof ApiError && err.code === 'NOT_FOUND') throw Errors.INVALID_ENROLLMENT_TOKEN();
    throw err;
  }
}

/**
 * OTT enrollment: signs the CSR with the controller's signing CA (the certificate is named by the identity's
 * id) and gives the identity a `cert` authenticator issued by the network.
 */
export async function enrollOtt(svc: Services, token: unknown, csrPem: unknown): Promise<EnrolledCerts> {
  const enrollment = enrollmentByToken(svc, token, 'ott');
  if (typeof csrPem !== 'string' || csrPem.trim() === '') throw Errors.MISSING_OR_INVALID_CSR();
  const { authenticator, certs } = await issueIdentityCert(svc, enrollment.identityId!, csrPem);
  await consume(svc, enrollment, authenticator);
  return certs;
}

/**
 * A client certificate for an identity from its CSR (common name = the identity's id): the data of the
 * network-issued `cert` authenticator that holds it, and the answer (chain and CA bundle).
 */
export async function issueIdentityCert(
  svc: Services,
  identityId: string,
  csrPem: string,
): Promise<{ authenticator: Record<string, unknown>; certs: EnrolledCerts }> {
  const signing = svc.pki?.signing;
  // a node set up from a join bundle holds no CA key: it cannot issue certificates
  if (!signing) throw Errors.INVALID_ENROLLMENT_NOT_ALLOWED();
  const leaf = new X509Certificate(await signCsrOrRefuse(signing, csrPem, { usage: 'client', commonName: identityId }));
  const authenticator = {
    method: 'cert',
    identityId,
    certPem: leaf.toString(),
    fingerprint: fingerprintOfDer(leaf.raw),
    methodKey: `${identityId}:cert`,
    isIssuedByNetwork: true,
  };
  return { authenticator, certs: { cert: `${leaf.toString()}${signing.certPem.trim()}\n`, ca: caBundle(svc) } };
}

/** signCsr, with a refused request answered as OpenZiti does: 400 COULD_NOT_PROCESS_CSR naming the PKI's code. */
export async function signCsrOrRefuse(signing: CaMaterial, csrPem: string, opts: CsrOptions): Promise<string> {
  try {
    return await signCsr(signing, csrPem, opts);
  } catch (err) {
    if (err instanceof PkiError) throw Errors.COULD_NOT_PROCESS_CSR({ code: err.code, message: err.message });
    throw err;
  }
}

/** The CA certificates an enrolled client trusts (root first), as one PEM text. */
export function caBundle(svc: Services): string {
  return (svc.pki?.caPems ?? []).map((p) => `${p.trim()}\n`).join('');
}

/**
 * UPDB enrollment: sets the initial password of the username the enrollment was created with. A username in the
 * request must be that one.
 */
export async function enrollUpdb(svc: Services, token: unknown, body: { username?: unknown; password?: unknown }) {
  const enrollment = enrollmentByToken(svc, token, 'updb');
  const username = enrollment.username;
  if (body.username !== undefined && body.username !== username) {
    throw fieldError('username', 'username must be the one of the enrollment', String(body.username));
  }
  if (typeof body.password !== 'string') throw fieldError('password', 'password is required', '******');
  const identityId = enrollment.identityId!;
  checkPasswordPolicy(svc, identityId, body.password);
  await consume(svc, enrollment, {
    method: 'updb',
    identityId,
    username,
    password: await hashPassword(body.password),
    methodKey: `${identityId}:updb`,
  });
}

/**
 * OTT CA enrollment: the client proves possession of a certificate issued by the enrollment's CA (its TLS client
 * certificate, `peerCertificates`); that certificate becomes the identity's `cert` authenticator, tied to the CA.
 */
export async function enrollOttca(svc: Services, token: unknown, peerCertificates: Buffer[] | undefined) {
  const enrollment = enrollmentByToken(svc, token, 'ottca');
  const ca = svc.get('cas', enrollment.caId!);
  if (ca?.isVerified !== true || ca.isOttCaEnrollmentEnabled !== true) throw Errors.ENROLLMENT_CA_NOT_VALID();
  const [leaf, ...sent] = peerCertificates ?? [];
  if (!leaf) throw Errors.CERT_FAILED_VALIDATION();
  const verified = await verifyChain(leaf, sent, [ca.certPem!], {
    at: new Date(svc.clock.now()),
    purpose: 'client',
  });
  if (!verified.ok) throw Errors.CERT_FAILED_VALIDATION();
  const identityId = enrollment.identityId;
  await consume(
    svc,
    enrollment,
    {
      method: 'cert',
      identityId,
      certPem: new X509Certificate(leaf).toString(),
      fingerprint: fingerprintOfDer(leaf),
      methodKey: `${identityId}:cert`,
      isIssuedByNetwork: false,
      caId: ca.id,
    },
    caStillAllows(ca.id, 'isOttCaEnrollmentEnabled', 'ENROLLMENT_CA_NOT_VALID'),
  );
}

/**
 * The conditions an enrollment through CA `caId` relies on, checked again where the write applies: the CA is still
 * verified and still allows the enrollment (`flag`); else `apiCode`, as the handler's own check answers.
 */
export function caStillAllows(
  caId: string,
  flag: 'isOttCaEnrollmentEnabled' | 'isAutoCaEnrollmentEnabled',
  apiCode: 'ENROLLMENT_CA_NOT_VALID' | 'ENROLLMENT_NO_VALID_CAS',
): Expect[] {
  const holds = (field: string): Expect =>
    stillEquals('cas', caId, field, true, `the CA no longer allows this enrollment (${field})`, apiCode);
  return [holds('isVerified'), holds(flag)];
}
