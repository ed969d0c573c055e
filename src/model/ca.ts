/**
 * Third-party certificate authorities (docs/enrollment.md, "CAs"): registered by an admin with their CA
 * certificate, verified by proving control of the CA key (a certificate it signed whose common name is the CA's
 * `verificationToken`), then trusted for `ottca` enrollment and (with `isAuthEnabled`) certificate login.
 */
import type { X509Certificate } from 'node:crypto';
import { checkRoleAttributes, defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import { Errors } from '../api/errors.js';
import { EC_CURVES_ACCEPTED } from '../pki/ca.js';
import { fingerprintOfDer, parseSinglePem } from '../pki/fingerprint.js';
import { s } from '../schema/s.js';
import { uuid } from '../util/ids.js';
import { roles, tags } from './common.js';
import { checkExternalIdClaim, type ExternalIdClaim } from './external-id-claim.js';
import { rowUnchanged } from './preconditions.js';

/** OpenZiti's default name of identities a CA auto-enrolls. */
export const DEFAULT_IDENTITY_NAME_FORMAT = '[caName]-[commonName]';

const nullableStr = s.nullable(s.str());
const externalIdClaimFields = {
  index: s.nullable(s.int()),
  location: s.nullable(s.enum(['COMMON_NAME', 'SAN_URI', 'SAN_EMAIL'] as const)),
  matcher: s.nullable(s.enum(['ALL', 'PREFIX', 'SUFFIX', 'SCHEME'] as const)),
  matcherCriteria: nullableStr,
  parser: s.nullable(s.enum(['NONE', 'SPLIT'] as const)),
  parserCriteria: nullableStr,
};
const externalIdClaim = s.named(
  'externalIdClaim',
  s.obj(externalIdClaimFields, ['location', 'matcher', 'matcherCriteria', 'parser', 'parserCriteria', 'index']),
);
const externalIdClaimPatch = s.named('externalIdClaimPatch', s.obj(externalIdClaimFields));

const caFields = {
  name: { type: 'string', unique: true, nonEmpty: true, body: s.str(), api: true },
  certPem: { type: 'string', filter: false, api: true },
  fingerprint: { type: 'string', unique: true, api: true },
  isVerified: { type: 'bool', api: true, default: false },
  verificationToken: { type: 'string', filter: false },
  isAutoCaEnrollmentEnabled: { type: 'bool', body: s.bool(), api: true, default: false },
  isOttCaEnrollmentEnabled: { type: 'bool', body: s.bool(), api: true, default: false },
  isAuthEnabled: { type: 'bool', body: s.bool(), api: true, default: false },
  identityRoles: { type: 'string', set: true, body: roles, api: true, default: [] },
  identityNameFormat: { type: 'string', body: s.str(), api: true, default: DEFAULT_IDENTITY_NAME_FORMAT },
  externalIdClaim: { type: 'object', filter: false, body: s.nullable(externalIdClaim) },
} as const satisfies EntityFields;

const flags = {
  isAuthEnabled: s.bool(),
  isAutoCaEnrollmentEnabled: s.bool(),
  isOttCaEnrollmentEnabled: s.bool(),
};

/** A CA certificate from a request: exactly one PEM certificate with basicConstraints CA:true. */
export function caCertificate(pem: unknown): X509Certificate {
  const cert = typeof pem === 'string' ? parseSinglePem(pem) : null;
  if (!cert) {
    throw Errors.INVALID_CERT_PEM({ field: 'certPem', reason: 'expected exactly one PEM certificate', value: '' });
  }
  if (!cert.ca)
    throw Errors.CERTIFICATE_IS_NOT_CA({ field: 'certPem', reason: 'the certificate is not a CA', value: '' });
  if (!verifiableKey(cert)) {
    throw Errors.INVALID_CERT_PEM({
      field: 'certPem',
      reason: "the CA's key is not one certificates can be verified against (RSA, ECDSA P-256/P-384/P-521, Ed25519)",
      value: '',
    });
  }
  return cert;
}

/**
 * Whether certificates signed by this key can be verified: RSA, ECDSA on a named curve chain verification knows,
 * Ed25519. OpenZiti's Go x509 does not parse a certificate with another key (secp256k1, explicit curve parameters,
 * DSA), so it cannot be created there either; here it would be a CA no certificate could ever chain to.
 */
function verifiableKey(cert: X509Certificate): boolean {
  const key = cert.publicKey;
  switch (key.asymmetricKeyType) {
    case 'rsa':
    case 'rsa-pss':
    case 'ed25519':
      return true;
    case 'ec':
      return EC_CURVES_ACCEPTED.has(key.asymmetricKeyDetails?.namedCurve ?? '');
    default:
      return false;
  }
}

export const cas: Entity<'cas', typeof caFields> = defineEntity({
  name: 'cas',
  type: 'ca',
  tag: 'Certificate Authority',
  singular: 'Ca',
  plural: 'Cas',
  permission: 'ca',
  fields: caFields,
  detail: detailSchema(
    'caDetail',
    s.obj(
      {
        certPem: s.str(),
        externalIdClaim,
        fingerprint: s.str(),
        identityNameFormat: s.str(),
        identityRoles: roles,
        ...flags,
        isVerified: s.bool(),
        name: s.str(),
        verificationToken: s.str({ format: 'uuid' }),
      },
      [
        'name',
        'fingerprint',
        'certPem',
        'isVerified',
        'isAutoCaEnrollmentEnabled',
        'isOttCaEnrollmentEnabled',
        'isAuthEnabled',
        'identityRoles',
        'identityNameFormat',
      ],
    ),
  ),
  create: s.named(
    'caCreate',
    s.obj(
      {
        certPem: s.str(),
        externalIdClaim,
        identityNameFormat: s.str(),
        identityRoles: roles,
        ...flags,
        name: s.str(),
        tags,
      },
      ['name', 'certPem', 'isAutoCaEnrollmentEnabled', 'isOttCaEnrollmentEnabled', 'isAuthEnabled', 'identityRoles'],
    ),
  ),
  update: s.named(
    'caUpdate',
    s.obj({ externalIdClaim, identityNameFormat: s.str(), identityRoles: roles, ...flags, name: s.str(), tags }, [
      'name',
      'isAutoCaEnrollmentEnabled',
      'isOttCaEnrollmentEnabled',
      'isAuthEnabled',
      'identityRoles',
      'identityNameFormat',
    ]),
  ),
  patch: s.named(
    'caPatch',
    s.obj({
      externalIdClaim: externalIdClaimPatch,
      identityNameFormat: nullableStr,
      identityRoles: roles,
      isAuthEnabled: s.nullable(s.bool()),
      isAutoCaEnrollmentEnabled: s.nullable(s.bool()),
      isOttCaEnrollmentEnabled: s.nullable(s.bool()),
      name: nullableStr,
      tags,
    }),
  ),
  toApi: (row) => {
    const out: Record<string, unknown> = {};
    // the token is of use only until the CA is verified
    if (row.isVerified !== true) out.verificationToken = row.verificationToken;
    if (row.externalIdClaim) out.externalIdClaim = row.externalIdClaim;
    return out;
  },
  reads: [],
  fromApi(body, { mode, copied, existing, expect }) {
    const out = { ...copied };
    if (out.externalIdClaim !== undefined && out.externalIdClaim !== null) {
      // PATCH changes the claim's supplied fields only (OpenZiti merges them), into the claim as stored where the
      // write applies: merged here from the row read, on the condition that it has not changed since (retried)
      const before = mode === 'patch' ? existing?.externalIdClaim : null;
      if (mode === 'patch' && existing) expect.push(rowUnchanged('cas', existing, 'externalIdClaim'));
      out.externalIdClaim = { ...(before ?? {}), ...out.externalIdClaim };
      checkExternalIdClaim(out.externalIdClaim as ExternalIdClaim);
    }
    if (Object.hasOwn(body, 'identityRoles'))
      out.identityRoles = checkRoleAttributes('identityRoles', body.identityRoles);
    if (mode === 'create') {
      const cert = caCertificate(body.certPem);
      out.certPem = cert.toString();
      out.fingerprint = fingerprintOfDer(cert.raw);
      out.isVerified = false;
      out.verificationToken = uuid();
      // OpenZiti's create takes an empty format as the default one (ZAC's CA form sends "" when left empty)
      if (typeof out.identityNameFormat !== 'string' || out.identityNameFormat === '') {
        out.identityNameFormat = DEFAULT_IDENTITY_NAME_FORMAT;
      }
    }
    return out;
  },
});
