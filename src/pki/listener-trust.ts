/**
 * The CA list of the HTTPS API listener (docs/pki.md): this controller's CAs and every verified third-party CA.
 * The listener names them in its certificate request; a client that picks its certificate by those names (Go's
 * crypto/tls, and so OpenZiti's Go SDK, sends none that matches no name) then also presents a certificate issued by
 * a registered CA, for `ottca`, CA auto-enrollment and `cert` login. The certificate itself is still verified by the
 * controller (src/auth), not by TLS.
 */
import type { HttpServer } from '../../http/types.js';
import type { Services } from '../api/services.js';
import { onChanges } from '../model/rows.js';
import { MAX_CHAIN_CANDIDATES } from './verify.js';

/** This controller's CA certificates, then the verified CAs' (at most MAX_CHAIN_CANDIDATES in all). */
export function listenerCas(svc: Services): string[] {
  const out = [...(svc.pki?.caPems ?? [])];
  for (const ca of svc.store.collection('cas').scan()) {
    if (out.length >= MAX_CHAIN_CANDIDATES) break;
    if (ca.isVerified === true && typeof ca.certPem === 'string') out.push(ca.certPem);
  }
  return out;
}

/**
 * Sets the listener's CA list now and again whenever a CA changes (created, verified, updated, deleted). A list
 * that does not load is logged and the previous one kept. Returns the unsubscribe function; a listener without
 * TLS is left alone.
 */
export function trackListenerCas(svc: Services, server: HttpServer): () => void {
  const set = server.setTrustedCas;
  if (!set) return () => {};
  let current = '';
  const update = () => {
    const cas = listenerCas(svc);
    const key = cas.join('');
    if (key === current) return;
    try {
      set.call(server, cas);
      current = key;
    } catch (err) {
      svc.log('error', 'the API listener could not load its CA list; it keeps the previous one', {
        err: String(err),
      });
    }
  };
  update();
  return onChanges(svc.store, (changes) => {
    if (changes.some((c) => c.entity === 'cas')) update();
  });
}
