/**
 * CA auto-enrollment (docs/enrollment.md, "CAs"): a client whose TLS certificate chains to a verified CA with
 * `isAutoCaEnrollmentEnabled` gets a new identity (named by the CA's `identityNameFormat`, with its
 * `identityRoles`) and that certificate as its `cert` authenticator, tied to the CA.
 */
import { X509Certificate } from 'node:crypto';
import { fail } from '../../storage/types.js';
import { Errors } from '../api/errors.js';
import type { Services } from '../api/services.js';
import { DEFAULT_IDENTITY_NAME_FORMAT } from '../model/ca.js';
import { type ExternalIdClaim, externalIdOf, isConfigured } from '../model/external-id-claim.js';
import type { ApplyContext, RowFor } from '../model/rows.js';
import { commonNameOf, fingerprintOfDer } from '../pki/fingerprint.js';
import { MAX_CHAIN_CANDIDATES, verifyChain } from '../pki/verify.js';
import { shortId } from '../util/ids.js';
import { caStillAllows } from './enrollment.js';

/** How many numbered variants of a taken identity name are tried before giving up. */
export const MAX_NAME_ATTEMPTS = 1000;

/** The verified CA with auto-enrollment that issued `leaf` (with the intermediates the client sent), or null. */
async function issuingCa(svc: Services, leaf: Buffer, sent: Buffer[]): Promise<RowFor<'cas'> | null> {
  let tried = 0;
  for (const ca of svc.store.collection('cas').scan()) {
    if (ca.isVerified !== true || ca.isAutoCaEnrollmentEnabled !== true) continue;
    if (++tried > MAX_CHAIN_CANDIDATES) break;
    const at = new Date(svc.clock.now());
    if ((await verifyChain(leaf, sent, [ca.certPem!], { at, purpose: 'client' })).ok) return ca;
  }
  return null;
}

/** The CA's name format filled in: `[caName]`, `[caId]`, `[commonName]`, `[identityId]`, `[requestedName]`. */
export function formatIdentityName(format: string, values: Record<string, string>): string {
  // an empty format (a CA updated with "") is the default one, as OpenZiti reads it at enrollment
  return (format === '' ? DEFAULT_IDENTITY_NAME_FORMAT : format).replace(
    /\[(caName|caId|commonName|identityId|requestedName)\]/g,
    (_, k: string) => values[k] ?? '',
  );
}

/**
 * `name`, or the first of `name000001`, `name000002`, … no identity holds (OpenZiti numbers the same way), in the
 * state read through `txn`; null when the first MAX_NAME_ATTEMPTS are all taken.
 */
function freeName(txn: ApplyContext['txn'], name: string): string | null {
  if (txn.lookup('identities', 'name', name).length === 0) return name;
  for (let i = 1; i < MAX_NAME_ATTEMPTS; i++) {
    const candidate = `${name}${String(i).padStart(6, '0')}`;
    if (txn.lookup('identities', 'name', candidate).length === 0) return candidate;
  }
  return null;
}

/**
 * Custom command: creates the identity of a CA auto-enrollment, named `name` or its first numbered variant free
 * when the command applies (not when the handler looked: two devices whose names format alike, enrolling at once,
 * both get an identity).
 */
export function createAutoEnrolledIdentity(
  ctx: ApplyContext,
  args: { id: string; name: string; data: Record<string, unknown> },
  at: string,
): void {
  const name = freeName(ctx.txn, args.name);
  if (name === null) {
    fail({
      code: 'INVALID',
      entity: 'identities',
      id: args.id,
      reason: `no free identity name after ${MAX_NAME_ATTEMPTS} attempts`,
      apiCode: 'INVALID_ENROLLMENT_NOT_ALLOWED',
    });
  }
  ctx.create('identities', args.id, { ...args.data, name }, at);
}

/**
 * The external id the CA's `externalIdClaim` finds in the certificate; null when the CA has no claim configured.
 * A configured claim that resolves to nothing is 400 MISSING_CERT_CLAIM.
 */
function claimedExternalId(ca: RowFor<'cas'>, leaf: Buffer): string | null {
  const claim = ca.externalIdClaim as ExternalIdClaim | null | undefined;
  if (!isConfigured(claim)) return null;
  const id = externalIdOf(claim, leaf);
  if (id === null) throw Errors.MISSING_CERT_CLAIM();
  return id;
}

/**
 * `requestedName`: the name the client asked for (`{"name": …}`, sdk-golang's `--idname`), the identity's id when
 * it asked for none, as OpenZiti fills `[requestedName]`.
 */
export async function enrollCa(
  svc: Services,
  peerCertificates: Buffer[] | undefined,
  requestedName = '',
): Promise<void> {
  const [leaf, ...sent] = peerCertificates ?? [];
  if (!leaf) throw Errors.CERT_FAILED_VALIDATION();
  const fingerprint = fingerprintOfDer(leaf);
  const ca = await issuingCa(svc, leaf, sent);
  if (!ca) throw Errors.ENROLLMENT_NO_VALID_CAS();
  // with an external id the identity is found by it at login (OpenZiti: no authenticator, certificates may rotate);
  // without one the certificate itself becomes the identity's authenticator
  const externalId = claimedExternalId(ca, leaf);
  if (externalId === null && svc.store.lookup('authenticators', 'fingerprint', fingerprint).length > 0) {
    throw Errors.CERT_IN_USE();
  }
  const identityId = shortId();
  const commonName = commonNameOf(leaf);
  const formatted = formatIdentityName(ca.identityNameFormat!, {
    caName: ca.name!,
    caId: ca.id,
    commonName,
    identityId,
    requestedName: requestedName === '' ? identityId : requestedName,
  });
  const at = svc.nowIso();
  await svc.write({
    op: 'batch',
    // the CA may stop auto-enrolling (or be deleted) while the chain is checked: decided where the write applies
    expect: caStillAllows(ca.id, 'isAutoCaEnrollmentEnabled', 'ENROLLMENT_NO_VALID_CAS'),
    ops: [
      {
        op: 'custom',
        name: 'createAutoEnrolledIdentity',
        args: {
          id: identityId,
          name: formatted.trim() === '' ? identityId : formatted,
          data: {
            typeId: 'Default',
            isAdmin: false,
            isDefaultAdmin: false,
            authPolicyId: 'default',
            roleAttributes: [...(ca.identityRoles ?? [])],
            ...(externalId !== null ? { externalId } : {}),
          },
        },
        at,
      },
      ...(externalId !== null
        ? []
        : [
            {
              op: 'create' as const,
              entity: 'authenticators' as const,
              id: shortId(),
              at,
              data: {
                method: 'cert',
                identityId,
                certPem: new X509Certificate(leaf).toString(),
                fingerprint,
                methodKey: `${identityId}:cert`,
                isIssuedByNetwork: false,
                caId: ca.id,
              },
            },
          ]),
    ],
  });
}
