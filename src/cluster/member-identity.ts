import { checkServerIdentity, type PeerCertificate } from 'node:tls';

/** What a TLS client checks of the server it reached (node:tls' `checkServerIdentity` option). */
export type ServerCheck = (host: string, cert: PeerCertificate) => Error | undefined;

/**
 * A member's check of the peer it dials (the peer API, the forward channel): the host name as always, and the
 * certificate must name a node id (`spiffe://keel/controller/<id>`), `member`'s when the caller knows whom it dials.
 * Host names alone are not enough: an enrolled router gets a server certificate of the same CA for the names it
 * asks for, so it could answer for a member's address (the Raft transport checks the id the same way).
 */
export function memberServerCheck(
  peerIdFromCert: (cert: PeerCertificate) => string | null,
  member?: string,
  /** Hears each certificate that passed (the controllers list shows a member's). */
  onPassed?: (cert: PeerCertificate) => void,
): ServerCheck {
  return (host, cert) => {
    const err = checkServerIdentity(host, cert);
    if (err !== undefined) return err;
    let id: string | null;
    try {
      id = peerIdFromCert(cert);
    } catch {
      id = null;
    }
    if (id === null) return new Error(`the peer at ${host} shows a certificate that names no cluster member`);
    if (member !== undefined && id !== member) return new Error(`the peer at ${host} is ${id}, not ${member}`);
    onPassed?.(cert);
    return undefined;
  };
}
