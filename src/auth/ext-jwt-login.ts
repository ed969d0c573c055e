/**
 * `POST /authenticate?method=ext-jwt`: a JWT from an external signer (`Authorization: Bearer <jwt>`), verified with
 * jose against the signer's certificate or its JWKS endpoint, names the identity by a claim. Every failure is one
 * answer (null → 401 INVALID_AUTH): the caller learns nothing about which check failed.
 */
import {
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  importX509,
  type JSONWebKeySet,
  type JWTPayload,
  jwtVerify,
} from 'jose';
import type { Services } from '../api/services.js';
import { isPrimaryAllowed } from '../model/auth-policy.js';
import { DEFAULT_CLAIMS_PROPERTY, type SignerRow } from '../model/external-jwt-signer.js';
import { isDisabled } from '../model/identity.js';
import { stillEquals } from '../model/preconditions.js';
import type { Expect, RowFor } from '../model/rows.js';

/** A JWT longer than this is refused unread. */
export const MAX_TOKEN_CHARS = 16 * 1024;
/** `exp`/`nbf` leeway: the signer's clock and ours may differ a little. */
export const CLOCK_TOLERANCE_SECONDS = 30;
/** Signers tried for one token (same issuer): a bound on the work one request causes. */
const MAX_CANDIDATES = 8;
/** Asymmetric algorithms only: `none` and HMAC (a shared secret Keel does not hold) are refused. */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

/** JWKS fetching: bounded in time and size; a key set is reused, refetched when old or on an unknown kid. */
export const JWKS_TIMEOUT_MS = 5_000;
export const JWKS_MAX_BYTES = 256 * 1024;
export const JWKS_MAX_AGE_MS = 10 * 60_000;
/** At most one refetch per endpoint in this window, however many tokens with unknown kids arrive. */
export const JWKS_REFETCH_COOLDOWN_MS = 30_000;
const JWKS_CACHE_ENTRIES = 256;

interface CachedKeys {
  keys: JSONWebKeySet;
  fetchedAt_ms: number;
  /** A fetch in progress: concurrent logins share it. */
  pending?: Promise<JSONWebKeySet | null>;
}
/** Per JWKS endpoint URL (node-local: a cache, not state). */
const jwksCache = new Map<string, CachedKeys>();

/** Forgets every cached key set (tests). */
export function clearJwksCache(): void {
  jwksCache.clear();
}

async function readBounded(res: Response, max_bytes: number): Promise<string | null> {
  const declared = Number(res.headers.get('content-length') ?? '0');
  if (declared > max_bytes || !res.body) return null;
  const chunks: Uint8Array[] = [];
  let size_bytes = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    size_bytes += chunk.byteLength;
    if (size_bytes > max_bytes) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function fetchJwks(url: string): Promise<JSONWebKeySet | null> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(JWKS_TIMEOUT_MS), redirect: 'error' });
    if (!res.ok) return null;
    const text = await readBounded(res, JWKS_MAX_BYTES);
    if (text === null) return null;
    const parsed = JSON.parse(text) as { keys?: unknown };
    return Array.isArray(parsed?.keys) ? (parsed as JSONWebKeySet) : null;
  } catch {
    // unreachable, slow, oversized or not JSON: no keys (the login fails like any bad token)
    return null;
  }
}

/** The endpoint's key set: cached; fetched when absent or old, or (`refresh`) at most once per cooldown. */
async function keySet(url: string, now_ms: number, refresh: boolean): Promise<JSONWebKeySet | null> {
  const cached = jwksCache.get(url);
  if (cached?.pending) return cached.pending;
  const fresh = cached && now_ms - cached.fetchedAt_ms < JWKS_MAX_AGE_MS;
  const cooling = cached && now_ms - cached.fetchedAt_ms < JWKS_REFETCH_COOLDOWN_MS;
  if (cached && fresh && (!refresh || cooling)) return cached.keys;
  const pending = fetchJwks(url);
  const entry: CachedKeys = { keys: cached?.keys ?? { keys: [] }, fetchedAt_ms: now_ms, pending };
  if (!jwksCache.has(url) && jwksCache.size >= JWKS_CACHE_ENTRIES) {
    jwksCache.delete(jwksCache.keys().next().value!);
  }
  jwksCache.set(url, entry);
  const keys = await pending;
  entry.pending = undefined;
  if (keys) entry.keys = keys;
  return entry.keys;
}

/** Whether an error says the key set has no key for the token (jose's code), i.e. a refetch may help. */
function isNoMatchingKey(err: unknown): boolean {
  return (err as { code?: string } | null)?.code === 'ERR_JWKS_NO_MATCHING_KEY';
}

async function verifyWith(signer: SignerRow, token: string, alg: string, now_ms: number): Promise<JWTPayload | null> {
  const options = {
    issuer: signer.issuer!,
    audience: signer.audience!,
    algorithms: ALGORITHMS,
    clockTolerance: CLOCK_TOLERANCE_SECONDS,
    currentDate: new Date(now_ms),
  };
  try {
    if (signer.certPem) {
      const key = await importX509(signer.certPem, alg);
      return (await jwtVerify(token, key, options)).payload;
    }
    const url = signer.jwksEndpoint!;
    for (const refresh of [false, true]) {
      const keys = await keySet(url, now_ms, refresh);
      if (!keys) return null;
      try {
        return (await jwtVerify(token, createLocalJWKSet(keys), options)).payload;
      } catch (err) {
        if (!refresh && isNoMatchingKey(err)) continue;
        return null;
      }
    }
    return null;
  } catch {
    return null;
  }
}

/** Enabled signers that may have signed a token of this issuer and kid (a signer with a `kid` needs it to match). */
function candidates(svc: Services, iss: string, kid: string | undefined): SignerRow[] {
  const out: SignerRow[] = [];
  for (const id of svc.store.lookup('external-jwt-signers', 'issuer', iss)) {
    const signer = svc.get('external-jwt-signers', id) as SignerRow | undefined;
    if (signer?.enabled !== true) continue;
    if (signer.kid ? signer.kid !== kid : !signer.jwksEndpoint) continue;
    out.push(signer);
    if (out.length >= MAX_CANDIDATES) break;
  }
  return out;
}

/** The JWT of an `Authorization: Bearer` header, or null. */
export function bearerToken(headers: Record<string, string>): string | null {
  const m = /^Bearer +([A-Za-z0-9_\-.=]+)$/i.exec((headers.authorization ?? '').trim());
  const token = m?.[1];
  return token && token.length <= MAX_TOKEN_CHARS ? token : null;
}

/**
 * The token's id claim through `signer`: its `claimsProperty` (default `sub`), a top-level property name taken as
 * it is (namespaced claims such as `https://idp.example/uid` included, never read as a path). Token enrollment
 * records the same claim as `externalId`, so the identity it creates is the one later logins find.
 */
export function idClaimOf(signer: SignerRow, payload: JWTPayload): string | null {
  const claim = signer.claimsProperty || DEFAULT_CLAIMS_PROPERTY;
  const value = Object.hasOwn(payload, claim) ? payload[claim] : null;
  return typeof value === 'string' && value !== '' ? value : null;
}

/** The identity a token names through `signer` (its `claimsProperty`, as an id or as `externalId`). */
function identityOf(svc: Services, signer: SignerRow, payload: JWTPayload): RowFor<'identities'> | undefined {
  const value = idClaimOf(signer, payload);
  if (value === null) return undefined;
  if (signer.useExternalId !== true) return svc.get('identities', value);
  const ids = svc.store.lookup('identities', 'externalId', value);
  return ids.length === 1 ? svc.get('identities', ids[0]!) : undefined;
}

/**
 * Whether the bearer token names an admin through an enabled signer of its issuer, read without verifying it: it
 * only picks the lane of the auth rate limiter the check runs in (a forged admin claim fills the admin lane alone,
 * as a password flood with an admin's username does).
 */
export function tokenNamesAdmin(svc: Services, headers: Record<string, string>): boolean {
  const token = bearerToken(headers);
  if (!token) return false;
  let kid: string | undefined;
  let payload: JWTPayload;
  try {
    kid = decodeProtectedHeader(token).kid;
    payload = decodeJwt(token);
  } catch {
    return false;
  }
  if (typeof payload.iss !== 'string') return false;
  return candidates(svc, payload.iss, kid).some((signer) => identityOf(svc, signer, payload)?.isAdmin === true);
}

/** Verifies an ext-jwt login: the identity and the signer, or null (→ 401 INVALID_AUTH). */
export async function extJwtLogin(
  svc: Services,
  headers: Record<string, string>,
): Promise<{ identity: RowFor<'identities'>; signer: SignerRow } | null> {
  const login = await verifyExtJwt(svc, headers);
  if (!login) return null;
  const policy = svc.get('auth-policies', login.identity.authPolicyId!);
  return isPrimaryAllowed(policy, 'extJwt', login.signer.id) ? login : null;
}

/** The fields of a signer that decide which tokens it verifies: enabled, its keys, issuer and audience. */
export const SIGNER_KEY_FIELDS = ['enabled', 'fingerprint', 'jwksEndpoint', 'kid', 'issuer', 'audience'] as const;

/** Conditions that `fields` of `signer` still have the values they have now (checked where a write applies). */
export function signerHolds(
  signer: SignerRow,
  fields: readonly (keyof SignerRow & string)[],
  reason: string,
  apiCode: string,
): Expect[] {
  return fields.map((field) =>
    stillEquals('external-jwt-signers', signer.id, field, signer[field], `${reason} (${field})`, apiCode),
  );
}

/**
 * What an ext-jwt login relied on, checked again where the session's write applies (the wait between includes a
 * JWKS fetch): the signer still enabled with the keys, issuer, audience and claim mapping that verified the token
 * and named the identity; the identity still under the same auth policy; that policy not changed since (its
 * `updatedAt`: a change within the millisecond of its previous one would go unseen). A failure is answered 401
 * `INVALID_AUTH`, as the same login a moment later would be.
 */
export function extJwtLoginHolds(
  login: { identity: RowFor<'identities'>; signer: SignerRow },
  policy: RowFor<'auth-policies'> | undefined,
): Expect[] {
  const reason = 'the external JWT login no longer holds';
  const out = signerHolds(
    login.signer,
    [...SIGNER_KEY_FIELDS, 'claimsProperty', 'useExternalId'],
    reason,
    'INVALID_AUTH',
  );
  out.push(
    stillEquals('identities', login.identity.id, 'authPolicyId', login.identity.authPolicyId, reason, 'INVALID_AUTH'),
  );
  if (policy) out.push(stillEquals('auth-policies', policy.id, 'updatedAt', policy.updatedAt, reason, 'INVALID_AUTH'));
  return out;
}

/**
 * The signer a new session must still be confirmed by (`secondary.requireExtJwtSigner` of the identity's policy),
 * unless the login itself was a token of that signer; null when none is required.
 */
export function pendingExtJwtSigner(
  policy: RowFor<'auth-policies'> | undefined,
  loggedInWith: string | undefined,
): string | null {
  const required = (policy?.secondary as { requireExtJwtSigner?: string | null } | undefined)?.requireExtJwtSigner;
  return required && required !== loggedInWith ? required : null;
}

/**
 * The secondary step: a token of the signer the session waits for, naming the session's identity, completes it
 * (`extJwtPending` cleared). False when the token does not do that.
 */
export async function completeExtJwtSecondary(
  svc: Services,
  session: RowFor<'api-sessions'>,
  headers: Record<string, string>,
): Promise<boolean> {
  const login = await verifyExtJwt(svc, headers);
  if (!login || login.signer.id !== session.extJwtPending || login.identity.id !== session.identityId) return false;
  await svc.write({
    op: 'update',
    entity: 'api-sessions',
    id: session.id,
    set: { extJwtPending: null },
    at: svc.nowIso(),
    system: true,
    expect: [
      stillEquals(
        'api-sessions',
        session.id,
        'extJwtPending',
        login.signer.id,
        'the session no longer waits for this signer',
        'INVALID_AUTH',
      ),
    ],
  });
  return true;
}

/** A token verified by an enabled signer and the identity it names (enabled), whatever the policy says. */
async function verifyExtJwt(
  svc: Services,
  headers: Record<string, string>,
): Promise<{ identity: RowFor<'identities'>; signer: SignerRow } | null> {
  const token = bearerToken(headers);
  const verified = token ? await verifySignerToken(svc, token) : null;
  if (!verified) return null;
  const identity = identityOf(svc, verified.signer, verified.payload);
  if (!identity || isDisabled(identity, svc.clock.now())) return null;
  return { identity, signer: verified.signer };
}

/**
 * A JWT verified by an enabled signer of its issuer (and kid), with its claims; only by `signerId` when given.
 * Null when no such signer verifies it.
 */
export async function verifySignerToken(
  svc: Services,
  token: string,
  signerId?: string,
): Promise<{ signer: SignerRow; payload: JWTPayload } | null> {
  let alg: string | undefined;
  let kid: string | undefined;
  let iss: string | undefined;
  try {
    ({ alg, kid } = decodeProtectedHeader(token));
    iss = decodeJwt(token).iss;
  } catch {
    return null;
  }
  if (typeof alg !== 'string' || !ALGORITHMS.includes(alg) || typeof iss !== 'string') return null;
  const now_ms = svc.clock.now();
  for (const signer of candidates(svc, iss, kid)) {
    if (signerId !== undefined && signer.id !== signerId) continue;
    const payload = await verifyWith(signer, token, alg, now_ms);
    if (payload) return { signer, payload };
  }
  return null;
}
