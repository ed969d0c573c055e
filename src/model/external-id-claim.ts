/**
 * A CA's `externalIdClaim` (OpenZiti's x509-claims, docs/enrollment.md "External ids from certificates"): where in
 * a certificate the external id of its identity is found. Locate the candidate values (the subject's common name,
 * the URI SANs or the e-mail SANs), keep those the matcher accepts (ALL; PREFIX / SUFFIX strip the criteria from
 * strings; SCHEME keeps URIs of that scheme), parse each into claims (NONE: the value; SPLIT: split at the
 * criteria), and take the claim at `index`.
 */
import { fieldError } from '../api/errors.js';
import { x509 } from '../pki/crypto.js';
import { lastCommonName } from '../pki/fingerprint.js';

export interface ExternalIdClaim {
  location?: string | null;
  matcher?: string | null;
  matcherCriteria?: string | null;
  parser?: string | null;
  parserCriteria?: string | null;
  index?: number | null;
}

/** Bound on the criteria texts and on `index`. */
export const MAX_CLAIM_CRITERIA_CHARS = 1024;
export const MAX_CLAIM_INDEX = 1000;

const STRING_MATCHERS = ['ALL', 'PREFIX', 'SUFFIX'];
const URI_MATCHERS = ['ALL', 'SCHEME'];

/** Whether a stored claim is configured (one without a location is not: no external id, as OpenZiti). */
export function isConfigured(claim: ExternalIdClaim | null | undefined): claim is ExternalIdClaim {
  return typeof claim?.location === 'string' && claim.location !== '';
}

/**
 * Refuses a claim that could never be extracted (OpenZiti's validateExternalIdClaim): 400 on
 * `externalIdClaim.index` / `externalIdClaim.location` / `externalIdClaim`.
 */
export function checkExternalIdClaim(claim: ExternalIdClaim | null | undefined): void {
  if (!isConfigured(claim)) return;
  const index = claim.index ?? 0;
  if (index < 0 || index > MAX_CLAIM_INDEX) {
    throw fieldError('externalIdClaim.index', `index must be in 0..${MAX_CLAIM_INDEX}`, index);
  }
  const matchers = claim.location === 'SAN_URI' ? URI_MATCHERS : STRING_MATCHERS;
  if (!['COMMON_NAME', 'SAN_URI', 'SAN_EMAIL'].includes(claim.location!)) {
    throw fieldError('externalIdClaim.location', `unsupported location [${claim.location}]`, claim.location);
  }
  const value = `location=${claim.location} matcher=${claim.matcher} parser=${claim.parser}`;
  const refuse = (reason: string) => fieldError('externalIdClaim', reason, value);
  for (const c of [claim.matcherCriteria, claim.parserCriteria]) {
    if ((c?.length ?? 0) > MAX_CLAIM_CRITERIA_CHARS) throw refuse(`criteria longer than ${MAX_CLAIM_CRITERIA_CHARS}`);
  }
  if (!matchers.includes(claim.matcher ?? '')) {
    throw refuse(`unsupported matcher [${claim.matcher}] for location [${claim.location}]`);
  }
  if (claim.matcher !== 'ALL' && !claim.matcherCriteria) {
    throw refuse(`invalid criteria [] for matcher [${claim.matcher}]`);
  }
  if (claim.parser !== 'NONE' && claim.parser !== 'SPLIT') {
    throw refuse(`unsupported parser [${claim.parser}] for location [${claim.location}]`);
  }
  if (claim.parser === 'SPLIT' && !claim.parserCriteria) throw refuse('invalid criteria [] for parser [SPLIT]');
}

/** The values a location holds in a certificate (DER). */
function located(location: string, cert: x509.X509Certificate): string[] {
  // as Go's pkix.Name: the last common name attribute
  if (location === 'COMMON_NAME') return [lastCommonName(cert)];
  const type = location === 'SAN_URI' ? 'url' : 'email';
  const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
  return (san?.names.items ?? []).filter((n) => n.type === type).map((n) => n.value);
}

/** A located value through the matcher: the (possibly stripped) value, or null when it does not match. */
function matched(claim: ExternalIdClaim, value: string): string | null {
  const criteria = claim.matcherCriteria ?? '';
  switch (claim.matcher) {
    case 'PREFIX':
      return value.startsWith(criteria) ? value.slice(criteria.length) : null;
    case 'SUFFIX':
      return value.endsWith(criteria) ? value.slice(0, value.length - criteria.length) : null;
    case 'SCHEME':
      return URL.canParse(value) && new URL(value).protocol === `${criteria}:` ? value : null;
    default:
      return value;
  }
}

/**
 * The external id a configured claim extracts from a certificate (DER), or null when it resolves to nothing (no
 * claim at `index`, or an empty one): the caller refuses with MISSING_CERT_CLAIM.
 */
export function externalIdOf(claim: ExternalIdClaim, der: Uint8Array): string | null {
  let cert: x509.X509Certificate;
  try {
    cert = new x509.X509Certificate(der);
  } catch {
    return null;
  }
  const claims: string[] = [];
  for (const value of located(claim.location!, cert)) {
    const m = matched(claim, value);
    if (m === null) continue;
    claims.push(...(claim.parser === 'SPLIT' ? m.split(claim.parserCriteria!) : [m]));
  }
  const id = claims[claim.index ?? 0];
  return id === undefined || id === '' ? null : id;
}
