import { defineEntity, detailSchema, type Entity, type EntityFields, NOT_BLANK, type RowOf } from '../api/entity.js';
import { Errors, fieldError } from '../api/errors.js';
import { fingerprintOfDer, parseSinglePem } from '../pki/fingerprint.js';
import { s } from '../schema/s.js';
import { tags } from './common.js';

const optStr = s.nullable(s.str());
/** The claim naming the identity when a signer names none (OpenZiti's `DefaultClaimsProperty`). */
export const DEFAULT_CLAIMS_PROPERTY = 'sub';
const targetToken = s.named('targetToken', s.nullable(s.enum(['ACCESS', 'ID'])));

/** A signer's stored fields; `fingerprint`, `commonName`, `notBefore`, `notAfter` come from `certPem`. */
const signerFields = {
  name: { type: 'string', unique: true, nonEmpty: true, body: s.str(), api: true },
  enabled: { type: 'bool', index: true, body: s.bool(), api: true },
  certPem: { type: 'string', body: optStr, api: true, default: null },
  jwksEndpoint: { type: 'string', body: optStr, api: true, default: null },
  kid: { type: 'string', unique: true, body: optStr, api: true, default: '', emptyIsNull: true },
  issuer: { type: 'string', index: true, nonEmpty: true, body: s.str(), api: true },
  audience: { type: 'string', nonEmpty: true, body: s.str(), api: true },
  claimsProperty: { type: 'string', body: optStr, api: true, default: DEFAULT_CLAIMS_PROPERTY },
  useExternalId: { type: 'bool', body: s.nullable(s.bool()), api: true, default: false },
  externalAuthUrl: { type: 'string', body: optStr, api: true, default: null },
  clientId: { type: 'string', body: optStr, api: true, default: '' },
  scopes: { type: 'string', set: true, body: s.nullable(s.arr(s.str())), api: true, default: [] },
  targetToken: { type: 'string', body: targetToken, api: true, default: 'ACCESS' },
  fingerprint: { type: 'string', unique: true, api: true, default: '' },
  commonName: { type: 'string', api: true, default: '' },
  notBefore: { type: 'datetime', api: true },
  notAfter: { type: 'datetime', api: true },
  // token enrollment (`POST /enroll/token`, src/auth/token-enrollment.ts)
  enrollToCertEnabled: { type: 'bool', body: s.bool(), api: true, default: false },
  enrollToTokenEnabled: { type: 'bool', body: s.bool(), api: true, default: false },
  enrollNameClaimsSelector: { type: 'string', body: s.str(), api: true, default: '' },
  enrollAttributeClaimsSelector: { type: 'string', body: s.str(), api: true, default: '' },
  /**
   * The auth policy token enrollment gives (`''`: `default`). A restricting reference, as OpenZiti's foreign key
   * constraint: the policy cannot be deleted while a signer names it (409), and a policy deleted while a signer
   * naming it is written makes the write fail in apply.
   */
  enrollAuthPolicyId: {
    type: 'string',
    body: s.str(),
    api: true,
    default: '',
    ref: { entity: 'auth-policies', onDelete: 'restrict' },
  },
} as const satisfies EntityFields;

export type SignerRow = RowOf<typeof signerFields>;

/** How a signer without a certificate renders its validity (Go's zero time, as OpenZiti does). */
const ZERO_TIME = '0001-01-01T00:00:00.000Z';
/** Bounds of the free-text fields (a PEM of a long chain fits; a claim path is short). */
const MAX_PEM_BYTES = 64 * 1024;
const MAX_TEXT_CHARS = 2048;
const MAX_SCOPES = 64;

const writeFields = {
  name: s.str(),
  enabled: s.bool(),
  certPem: optStr,
  jwksEndpoint: optStr,
  kid: optStr,
  issuer: s.str(),
  audience: s.str(),
  claimsProperty: optStr,
  useExternalId: s.nullable(s.bool()),
  externalAuthUrl: optStr,
  clientId: optStr,
  scopes: s.nullable(s.arr(s.str())),
  targetToken,
  tags,
  enrollToCertEnabled: s.bool(),
  enrollToTokenEnabled: s.bool(),
  enrollNameClaimsSelector: s.str(),
  enrollAttributeClaimsSelector: s.str(),
  enrollAuthPolicyId: s.str(),
};
const REQUIRED = ['name', 'enabled', 'issuer', 'audience'] as const;
/**
 * The token enrollment settings as OpenZiti's update and patch bodies declare them (`x-nullable`): null there is
 * "not given", as for any field whose stored value is not nullable (PUT: the default, PATCH: unchanged).
 */
const nullableEnrollFields = {
  enrollToCertEnabled: s.nullable(s.bool()),
  enrollToTokenEnabled: s.nullable(s.bool()),
  enrollNameClaimsSelector: s.nullable(s.str()),
  enrollAttributeClaimsSelector: s.nullable(s.str()),
  enrollAuthPolicyId: s.nullable(s.str()),
};

/** The certificate facts a signer renders, or 400 when `certPem` is not exactly one certificate. */
function certFacts(pem: string): Record<string, unknown> {
  const cert = pem.length <= MAX_PEM_BYTES ? parseSinglePem(pem) : null;
  if (!cert) {
    throw Errors.INVALID_CERT_PEM({ field: 'certPem', reason: 'expected exactly one PEM certificate', value: '' });
  }
  const cn = /(?:^|\n)CN=([^\n]*)/.exec(cert.subject)?.[1] ?? '';
  return {
    certPem: cert.toString(),
    fingerprint: fingerprintOfDer(cert.raw),
    commonName: cn,
    notBefore: new Date(cert.validFrom).toISOString(),
    notAfter: new Date(cert.validTo).toISOString(),
  };
}

function checkUrl(field: string, value: unknown): void {
  if (value === null || value === undefined) return;
  let url: URL | null = null;
  try {
    url = new URL(String(value));
  } catch {
    url = null;
  }
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) {
    throw fieldError(field, 'must be an http(s) URL', value);
  }
}

export const externalJwtSigners: Entity<'external-jwt-signers', typeof signerFields> = defineEntity({
  name: 'external-jwt-signers',
  type: 'externalJwtSigner',
  tag: 'External JWT Signer',
  singular: 'ExternalJwtSigner',
  plural: 'ExternalJwtSigners',
  permission: 'external-jwt-signer',
  fields: signerFields,
  detail: detailSchema(
    'externalJwtSignerDetail',
    s.obj(
      {
        audience: s.str(),
        certPem: optStr,
        claimsProperty: s.str(),
        clientId: s.str(),
        commonName: s.str(),
        enabled: s.bool(),
        externalAuthUrl: optStr,
        fingerprint: s.str(),
        issuer: s.str(),
        jwksEndpoint: optStr,
        kid: s.str(),
        name: s.str(),
        notAfter: s.datetime(),
        notBefore: s.datetime(),
        scopes: s.arr(s.str()),
        targetToken,
        useExternalId: s.bool(),
        enrollToCertEnabled: s.bool(),
        enrollToTokenEnabled: s.bool(),
        enrollNameClaimsSelector: s.str(),
        enrollAttributeClaimsSelector: s.str(),
        enrollAuthPolicyId: s.str(),
      },
      [
        'name',
        'certPem',
        'jwksEndpoint',
        'enabled',
        'fingerprint',
        'commonName',
        'notAfter',
        'notBefore',
        'externalAuthUrl',
        'claimsProperty',
        'useExternalId',
        'kid',
        'issuer',
        'audience',
        'clientId',
        'scopes',
        'targetToken',
      ],
    ),
  ),
  create: s.named('externalJwtSignerCreate', s.obj(writeFields, REQUIRED)),
  update: s.named('externalJwtSignerUpdate', s.obj({ ...writeFields, ...nullableEnrollFields }, REQUIRED)),
  patch: s.named(
    'externalJwtSignerPatch',
    s.obj({
      ...writeFields,
      ...nullableEnrollFields,
      name: optStr,
      enabled: s.nullable(s.bool()),
      issuer: optStr,
      audience: optStr,
      scopes: s.arr(s.str()),
    }),
  ),
  toApi: (row) => ({
    notBefore: row.notBefore ?? ZERO_TIME,
    notAfter: row.notAfter ?? ZERO_TIME,
    kid: row.kid ?? '',
  }),
  reads: [],
  fromApi(_body, { mode, existing, copied, svc }) {
    const out: Record<string, unknown> = { ...copied };
    const merged = { ...(mode === 'patch' ? existing : {}), ...out } as Record<string, unknown>;
    for (const [field, value] of Object.entries(out)) {
      if (typeof value === 'string' && field !== 'certPem' && value.length > MAX_TEXT_CHARS) {
        throw fieldError(field, `at most ${MAX_TEXT_CHARS} characters`, value.length);
      }
    }
    if (Array.isArray(out.scopes) && out.scopes.length > MAX_SCOPES) {
      throw fieldError('scopes', `at most ${MAX_SCOPES} scopes`, out.scopes.length);
    }
    const policyId = out.enrollAuthPolicyId;
    if (typeof policyId === 'string' && policyId !== '' && !svc.get('auth-policies', policyId)) {
      throw fieldError('enrollAuthPolicyId', `auth policy with id ${policyId} not found`, policyId);
    }
    // OpenZiti stores a blank external auth URL as none and a blank (or null) claims property as `sub`: ZAC's
    // form sends both as "" when left empty
    if (typeof out.externalAuthUrl === 'string' && !NOT_BLANK.test(out.externalAuthUrl)) out.externalAuthUrl = null;
    if (Object.hasOwn(out, 'claimsProperty') && !NOT_BLANK.test(String(out.claimsProperty ?? ''))) {
      out.claimsProperty = DEFAULT_CLAIMS_PROPERTY;
    }
    checkUrl('jwksEndpoint', out.jwksEndpoint);
    checkUrl('externalAuthUrl', out.externalAuthUrl);
    const hasCert = typeof merged.certPem === 'string' && merged.certPem !== '';
    const hasJwks = typeof merged.jwksEndpoint === 'string' && merged.jwksEndpoint !== '';
    if (hasCert === hasJwks) {
      throw fieldError(
        hasCert ? 'jwksEndpoint' : 'certPem',
        'exactly one of certPem and jwksEndpoint is required',
        null,
      );
    }
    // the key material (and what is derived from it) is written only by a write that changes it: a PATCH of other
    // fields, checked against a view that a concurrent switch (certificate ↔ JWKS) made stale, would write it back
    if (mode === 'patch' && !Object.hasOwn(out, 'certPem') && !Object.hasOwn(out, 'jwksEndpoint')) return out;
    if (hasCert) {
      Object.assign(out, certFacts(merged.certPem as string));
      out.jwksEndpoint = null;
    } else {
      Object.assign(out, { certPem: null, fingerprint: null, commonName: '', notBefore: null, notAfter: null });
    }
    return out;
  },
});
