/**
 * `POST /authenticate?method=cert` (docs/enrollment.md): the TLS client certificate of the request (the node
 * engine asks for one when API TLS is on) must chain to this controller's CAs and match a `cert` authenticator by
 * fingerprint. Anything else is a failed login (the caller answers 401 INVALID_AUTH).
 */
import type { HttpRequest } from '../../http/types.js';
import type { Row } from '../../storage/types.js';
import type { Services } from '../api/services.js';
import type { AuthPolicyPrimary } from '../model/auth-policy.js';
import { isDisabled } from '../model/identity.js';
import { fingerprintOfDer } from '../pki/fingerprint.js';
import { verifyChain } from '../pki/verify.js';

export async function certLogin(
  svc: Services,
  req: HttpRequest,
): Promise<{ identity: Row; authenticator: Row } | null> {
  const chain = req.peerCertificates;
  const cas = svc.pki?.caPems ?? [];
  if (!chain || chain.length === 0 || cas.length === 0) return null;
  const [leaf, ...sent] = chain;
  const ids = svc.store.lookup('authenticators', 'fingerprint', fingerprintOfDer(leaf!));
  const authenticator = ids.length === 1 ? svc.get('authenticators', ids[0]!) : undefined;
  if (authenticator?.method !== 'cert') return null;
  const identity = svc.get('identities', authenticator.identityId as string);
  if (!identity || isDisabled(identity, svc.clock.now())) return null;
  const policy = svc.get('auth-policies', identity.authPolicyId as string);
  const cert = (policy?.primary as AuthPolicyPrimary | undefined)?.cert;
  if (cert?.allowed === false) return null;
  // the client's own intermediates may help build the path; only this controller's CAs are trusted
  const verified = await verifyChain(leaf!, sent, cas, { at: new Date(svc.clock.now()), purpose: 'client' });
  if (!verified.ok && !(verified.code === 'EXPIRED' && cert?.allowExpiredCerts === true)) return null;
  return { identity, authenticator };
}
