/**
 * `POST /authenticate?method=cert` (docs/enrollment.md): the TLS client certificate of the request (the node
 * engine asks for one when API TLS is on) must chain to this controller's CAs and match a `cert` authenticator by
 * fingerprint. Anything else is a failed login (the caller answers 401 INVALID_AUTH).
 */
import type { Services } from '../api/services.js';
import type { AuthPolicyPrimary } from '../model/auth-policy.js';
import { type ExternalIdClaim, externalIdOf, isConfigured } from '../model/external-id-claim.js';
import { isDisabled } from '../model/identity.js';
import type { RowFor } from '../model/rows.js';
import { MAX_CHAIN_CANDIDATES } from '../pki/verify.js';
import { type ClientChain, verifyClientChain } from './chain-cache.js';

async function certLogin(
  svc: Services,
  chain: ClientChain,
): Promise<{ identity: RowFor<'identities'>; authenticator?: RowFor<'authenticators'> } | null> {
  if (!svc.pki) return null;
  const authenticator = certAuthenticatorOf(svc, chain);
  if (!authenticator) return externalIdLogin(svc, chain);
  const identity = svc.get('identities', authenticator.identityId!);
  const cert = certPolicyOf(svc, identity);
  if (!identity || !cert) return null;
  // the client's own intermediates may help build the path; trusted are this controller's CAs and the verified CAs
  // that allow authentication
  const trusted = [...svc.pki.caPems, ...authCas(svc)];
  const verified = await verifyClientChain(chain, trusted, new Date(svc.clock.now()));
  if (!verified.ok && !(verified.code === 'EXPIRED' && cert.allowExpiredCerts === true)) return null;
  return { identity, authenticator };
}

/**
 * A login by the client certificate chain (null: none presented), checked as one step (one pass through the auth
 * rate limiter): an ephemeral certificate logs in as the API session it belongs to (`bound`), any other as its
 * authenticator's identity (`login`, null when refused).
 */
export async function certificateLogin(
  svc: Services,
  chain: ClientChain | null,
): Promise<
  | { bound: RowFor<'api-sessions'> }
  | { login: { identity: RowFor<'identities'>; authenticator?: RowFor<'authenticators'> } | null }
> {
  if (!chain) return { login: null };
  const bound = await sessionOfCertificate(svc, chain);
  return bound ? { bound } : { login: await certLogin(svc, chain) };
}

/**
 * Whether the client certificate is an admin's (the identity of the cert authenticator holding it): picks the lane
 * of the auth rate limiter the login's chain check runs in.
 */
export function certNamesAdmin(svc: Services, chain: ClientChain | null): boolean {
  if (!chain) return false;
  const authenticator = certAuthenticatorOf(svc, chain);
  if (!authenticator) return false;
  return svc.get('identities', authenticator.identityId!)?.isAdmin === true;
}

/** The cert authenticator holding this certificate (by fingerprint), if any. */
function certAuthenticatorOf(svc: Services, chain: ClientChain): RowFor<'authenticators'> | undefined {
  const ids = svc.store.lookup('authenticators', 'fingerprint', chain.fingerprint);
  const authenticator = ids.length === 1 ? svc.get('authenticators', ids[0]!) : undefined;
  return authenticator?.method === 'cert' ? authenticator : undefined;
}

/** The `primary.cert` rules of an identity that may log in by certificate (enabled, allowed by its policy), or null. */
function certPolicyOf(
  svc: Services,
  identity: RowFor<'identities'> | undefined,
): { allowExpiredCerts?: boolean } | null {
  if (!identity || isDisabled(identity, svc.clock.now())) return null;
  const policy = svc.get('auth-policies', identity.authPolicyId!);
  const cert = (policy?.primary as AuthPolicyPrimary | undefined)?.cert;
  return cert?.allowed === false ? null : (cert ?? {});
}

/**
 * A certificate no authenticator holds, issued by a verified, auth-enabled CA with an `externalIdClaim`: the
 * identity whose `externalId` the claim finds logs in (as OpenZiti's cert authenticator does), so such identities
 * may present any certificate of that CA carrying their id.
 */
async function externalIdLogin(svc: Services, chain: ClientChain): Promise<{ identity: RowFor<'identities'> } | null> {
  let tried = 0;
  for (const ca of svc.store.collection('cas').scan()) {
    const claim = ca.externalIdClaim as ExternalIdClaim | null | undefined;
    if (ca.isVerified !== true || ca.isAuthEnabled !== true || !isConfigured(claim)) continue;
    if (++tried > MAX_CHAIN_CANDIDATES) break;
    const at = new Date(svc.clock.now());
    const verified = await verifyClientChain(chain, [ca.certPem!], at);
    if (!verified.ok && verified.code !== 'EXPIRED') continue;
    const externalId = externalIdOf(claim, chain.leaf);
    const ids = externalId === null ? [] : svc.store.lookup('identities', 'externalId', externalId);
    const identity = ids.length === 1 ? svc.get('identities', ids[0]!) : undefined;
    const cert = certPolicyOf(svc, identity);
    if (!identity || !cert || (!verified.ok && cert.allowExpiredCerts !== true)) return null;
    return { identity };
  }
  return null;
}

/** The certificates of verified CAs with `isAuthEnabled` (at most MAX_CHAIN_CANDIDATES of them). */
function authCas(svc: Services): string[] {
  const out: string[] = [];
  for (const ca of svc.store.collection('cas').scan()) {
    if (out.length >= MAX_CHAIN_CANDIDATES) break;
    if (ca.isVerified === true && ca.isAuthEnabled === true) out.push(ca.certPem as string);
  }
  return out;
}

/**
 * A `method=cert` login with an ephemeral certificate (`/current-api-session/certificates`): the certificate stands
 * for the API session that had it signed, so the login answers that session (no new one) while it lives, its
 * identity is enabled and the certificate chains to this controller's CAs now. Null for any other certificate.
 */
async function sessionOfCertificate(svc: Services, chain: ClientChain): Promise<RowFor<'api-sessions'> | null> {
  if (!svc.pki) return null;
  const ids = svc.store.lookup('api-session-certificates', 'fingerprint', chain.fingerprint);
  const cert = ids.length === 1 ? svc.get('api-session-certificates', ids[0]!) : undefined;
  const session = cert ? svc.get('api-sessions', cert.apiSessionId!) : undefined;
  const live = session ? svc.sessions.resolve(session.token as string) : null;
  if (!live || isDisabled(live.identity, svc.clock.now())) return null;
  const verified = await verifyClientChain(chain, svc.pki.caPems, new Date(svc.clock.now()));
  if (!verified.ok) return null;
  svc.sessions.touch(live.session);
  return live.session;
}
