/**
 * Token enrollment (`POST /enroll/token`, docs/enrollment.md "Token enrollment"): a JWT of an external JWT signer
 * that allows it (`enrollToCertEnabled` with a CSR, `enrollToTokenEnabled` without) creates an identity named by a
 * claim (`enrollNameClaimsSelector`, default `/sub`), with the signer's id claim (`claimsProperty`) as its
 * `externalId`, role attributes from `enrollAttributeClaimsSelector` and the auth policy `enrollAuthPolicyId`
 * (default `default`). With a CSR the identity also gets a network-issued certificate.
 */
import type { JWTPayload } from 'jose';
import { Errors } from '../api/errors.js';
import type { Services } from '../api/services.js';
import { isPrimaryAllowed } from '../model/auth-policy.js';
import type { SignerRow } from '../model/external-jwt-signer.js';
import { stillEquals } from '../model/preconditions.js';
import type { Command, Expect } from '../model/rows.js';
import { shortId } from '../util/ids.js';
import { type EnrolledCerts, issueIdentityCert } from './enrollment.js';
import { bearerToken, idClaimOf, SIGNER_KEY_FIELDS, signerHolds, verifySignerToken } from './ext-jwt-login.js';

/** Bounds on a claims selector (JSON pointer segments) and on the role attributes a token may bring. */
export const MAX_POINTER_SEGMENTS = 32;
export const MAX_ENROLLED_ATTRIBUTES = 100;
const MAX_CLAIM_CHARS = 1024;

/** A claim by JSON pointer (`/a/b`, RFC 6901) or root property name (`a`, read as `/a`); undefined when absent. */
export function claimAt(payload: JWTPayload, selector: string): unknown {
  const pointer = selector.startsWith('/') ? selector : `/${selector}`;
  const segments = pointer.slice(1).split('/');
  if (segments.length > MAX_POINTER_SEGMENTS) return undefined;
  let cur: unknown = payload;
  for (const raw of segments) {
    const key = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (cur === null || typeof cur !== 'object' || !Object.hasOwn(cur, key)) return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}

function claimString(payload: JWTPayload, selector: string): string | null {
  const v = claimAt(payload, selector);
  return typeof v === 'string' && v !== '' && v.length <= MAX_CLAIM_CHARS ? v : null;
}

/** Role attributes from the attribute selector: a string or an array of strings (others ignored); none when unset. */
function attributesOf(payload: JWTPayload, selector: string): string[] {
  if (selector === '') return [];
  const v = claimAt(payload, selector);
  const list = typeof v === 'string' ? [v] : Array.isArray(v) ? v.filter((x) => typeof x === 'string') : [];
  if (list.length > MAX_ENROLLED_ATTRIBUTES) throw Errors.INVALID_ENROLLMENT_TOKEN();
  return [...new Set(list as string[])];
}

/** The verified token of the request's `Authorization: Bearer` header (of `ziti-token-issuer-id` when named). */
async function verifiedToken(svc: Services, headers: Record<string, string>) {
  const token = bearerToken(headers);
  const issuerId = headers['ziti-token-issuer-id'];
  const verified = token ? await verifySignerToken(svc, token, issuerId || undefined) : null;
  if (!verified) throw Errors.INVALID_ENROLLMENT_TOKEN();
  return verified;
}

/**
 * The auth policy an enrolling identity gets, checked to allow the way it will log in (else 409), and the condition
 * that it is unchanged where the write applies (a change meanwhile may no longer allow it).
 */
function enrollmentPolicy(
  svc: Services,
  signer: SignerRow,
  withCert: boolean,
): { policyId: string; unchanged: Expect } {
  const policyId = signer.enrollAuthPolicyId || 'default';
  const policy = svc.get('auth-policies', policyId);
  const allowed = withCert ? isPrimaryAllowed(policy, 'cert') : isPrimaryAllowed(policy, 'extJwt', signer.id);
  if (!policy || !allowed) throw Errors.INVALID_ENROLLMENT_NOT_ALLOWED();
  const unchanged = stillEquals(
    'auth-policies',
    policyId,
    'updatedAt',
    policy.updatedAt,
    'the auth policy changed since it was checked',
    'INVALID_ENROLLMENT_NOT_ALLOWED',
  );
  return { policyId, unchanged };
}

/**
 * The conditions a token enrollment through `signer` relies on, checked again where the write applies (the wait
 * between includes a JWKS fetch): the signer is still enabled with the key material, kid, issuer and audience that
 * verified the token (else `INVALID_ENROLLMENT_TOKEN`, as a token no enabled signer verifies is answered), still
 * allows the enrollment (`flag`) and still names the same auth policy (else `INVALID_ENROLLMENT_NOT_ALLOWED`, as the
 * handler answers).
 */
export function signerStillAllows(signer: SignerRow, flag: 'enrollToTokenEnabled' | 'enrollToCertEnabled'): Expect[] {
  const reason = 'the external JWT signer no longer allows this enrollment';
  return [
    ...signerHolds(signer, SIGNER_KEY_FIELDS, reason, 'INVALID_ENROLLMENT_TOKEN'),
    ...signerHolds(signer, [flag, 'enrollAuthPolicyId'], reason, 'INVALID_ENROLLMENT_NOT_ALLOWED'),
  ];
}

export async function enrollToken(
  svc: Services,
  headers: Record<string, string>,
  clientCsr: string | undefined,
): Promise<EnrolledCerts | Record<string, never>> {
  const { signer, payload } = await verifiedToken(svc, headers);
  const name = claimString(payload, signer.enrollNameClaimsSelector || '/sub');
  // the id claim exactly as ext-jwt login reads it (a property name, not a JSON pointer)
  const id = idClaimOf(signer, payload);
  const externalId = id !== null && id.length <= MAX_CLAIM_CHARS ? id : null;
  if (!name || !externalId) throw Errors.INVALID_ENROLLMENT_TOKEN();
  if (svc.store.lookup('identities', 'externalId', externalId).length > 0) {
    throw Errors.ENROLLMENT_IDENTITY_ALREADY_ENROLLED();
  }
  const withCert = typeof clientCsr === 'string' && clientCsr.trim() !== '';
  if (withCert ? signer.enrollToCertEnabled !== true : signer.enrollToTokenEnabled !== true) {
    throw Errors.INVALID_ENROLLMENT_NOT_ALLOWED();
  }
  const { policyId: authPolicyId, unchanged: policyUnchanged } = enrollmentPolicy(svc, signer, withCert);
  const identityId = shortId();
  const at = svc.nowIso();
  const identity = {
    name,
    typeId: 'Default',
    isAdmin: false,
    isDefaultAdmin: false,
    authPolicyId,
    externalId,
    roleAttributes: attributesOf(payload, signer.enrollAttributeClaimsSelector ?? ''),
  };
  const ops: Command[] = [{ op: 'create', entity: 'identities', id: identityId, at, data: identity }];
  let answer: EnrolledCerts | Record<string, never> = {};
  if (withCert) {
    const issued = await issueIdentityCert(svc, identityId, clientCsr as string);
    ops.push({ op: 'create', entity: 'authenticators', id: shortId(), at, data: issued.authenticator });
    answer = issued.certs;
  }
  // of two racing enrollments with one token, the second finds the external id taken when it applies
  const expect: Expect[] = [
    {
      check: 'absent',
      entity: 'identities',
      field: 'externalId',
      value: externalId,
      reason: 'an identity with this external id is already enrolled',
      apiCode: 'ENROLLMENT_IDENTITY_ALREADY_ENROLLED',
    },
    ...signerStillAllows(signer, withCert ? 'enrollToCertEnabled' : 'enrollToTokenEnabled'),
    policyUnchanged,
  ];
  await svc.write({ op: 'batch', ops, expect });
  return answer;
}
