/**
 * Router enrollment (docs/enrollment.md, "Routers"): a router created over the management API has an outstanding
 * enrollment (`erott` for an edge router, `trott` for a transit router; src/model/router-enrollment.ts); it enrolls
 * with two CSRs (a client certificate for its control channel and a server certificate for its listeners), which
 * the signing CA signs. An edge router's client CSR must name it by its id; a transit router's common name is set
 * to its id (as OpenZiti does). From then on the router is verified and known by its client certificate's
 * fingerprint — kept on its `transit-routers` row, which every router has — with which it can extend both
 * certificates. Re-enrolling an edge router reverts it to a fresh enrollment and forgets its certificate.
 */
import { X509Certificate } from 'node:crypto';
import { Errors } from '../api/errors.js';
import type { Services } from '../api/services.js';
import { routerRowOf } from '../model/edge-router.js';
import { stillEquals } from '../model/preconditions.js';
import {
  ROUTER_ENROLL_METHOD,
  ROUTER_KEY,
  type RouterEnrollMethod,
  routerEnrollmentCommand,
  routerEnrollmentOf,
} from '../model/router-enrollment.js';
import { routerByFingerprint } from '../model/router-rows.js';
import type { Command, RowFor } from '../model/rows.js';
import { x509 } from '../pki/crypto.js';
import { fingerprintOfDer } from '../pki/fingerprint.js';
import { type CaMaterial, PkiError, parseCsr, verifyChain } from '../pki/index.js';
import { caBundle, consumeEnrollment, enrollmentByToken, signCsrOrRefuse } from './enrollment.js';

/** OpenZiti's code for a client CSR whose common name is not the router's id (the cause of COULD_NOT_PROCESS_CSR). */
export const COMMON_NAME_INVALID = 'EDGE_ROUTER_ENROLL_COMMON_NAME_INVALID';

const OID_SUBJECT_ALT_NAME = '2.5.29.17';

/** What router enrollment and extension answer (`enrollmentCerts`): client chain, server chain, CAs to trust. */
export interface RouterCerts {
  cert: string;
  serverCert: string;
  ca: string;
}

/** The signing CA, or 409 INVALID_ENROLLMENT_NOT_ALLOWED on a node that holds none (set up from a join bundle). */
function signingCa(svc: Services): CaMaterial {
  const signing = svc.pki?.signing;
  if (!signing) throw Errors.INVALID_ENROLLMENT_NOT_ALLOWED();
  return signing;
}

/**
 * The DNS and IP subject alternative names a CSR asks for (OpenZiti copies a router's requested SANs into its
 * certificates). URIs and e-mail addresses are not copied: a URI SAN names controller peers (PEER_URI_PREFIX).
 */
/** What `requestedSans` gives as the common name of a subject with several: no router's id. */
const MANY_COMMON_NAMES = '\u0000several common names';

async function requestedSans(csrPem: string): Promise<{ dnsNames: string[]; ipAddresses: string[]; cn: string }> {
  let csr: x509.Pkcs10CertificateRequest;
  try {
    csr = await parseCsr(csrPem);
  } catch (err) {
    if (err instanceof PkiError) throw Errors.COULD_NOT_PROCESS_CSR({ code: err.code, message: err.message });
    throw err;
  }
  const ext = csr.extensions.find((e) => e.type === OID_SUBJECT_ALT_NAME);
  let names: readonly x509.GeneralName[];
  try {
    names = ext ? new x509.SubjectAlternativeNameExtension(ext.rawData).names.items : [];
  } catch {
    throw Errors.COULD_NOT_PROCESS_CSR({ code: 'CSR_MALFORMED', message: 'the requested SANs do not parse' });
  }
  // one common name or none: a subject naming several (`CN=<id>, CN=admin`) would be read by its last one in Go
  const cns = csr.subjectName.getField('CN');
  return {
    dnsNames: names.filter((n) => n.type === 'dns').map((n) => n.value),
    ipAddresses: names.filter((n) => n.type === 'ip').map((n) => n.value),
    cn: cns.length === 1 ? cns[0]! : cns.length === 0 ? '' : MANY_COMMON_NAMES,
  };
}

/**
 * Signs a router's two CSRs: an edge router's client CSR must name the router by its id (else
 * COULD_NOT_PROCESS_CSR); a transit router's client certificate gets its id as common name, whatever the CSR says.
 */
async function signRouterCsrs(svc: Services, router: RowFor<'transit-routers'>, serverCsr: string, clientCsr: string) {
  const routerId = router.id;
  const signing = signingCa(svc);
  const server = await requestedSans(serverCsr);
  const client = await requestedSans(clientCsr);
  const isEdge = router.isEdge === true;
  if (isEdge && client.cn !== routerId) {
    throw Errors.COULD_NOT_PROCESS_CSR({
      code: COMMON_NAME_INVALID,
      message: "The edge router CSR enrollment must have a common name that matches the edge router's id",
    });
  }
  const { dnsNames, ipAddresses } = server;
  const serverPem = await signCsrOrRefuse(signing, serverCsr, { usage: 'server', dnsNames, ipAddresses });
  const clientPem = await signCsrOrRefuse(signing, clientCsr, {
    usage: 'client',
    dnsNames: client.dnsNames,
    ipAddresses: client.ipAddresses,
    ...(isEdge ? {} : { commonName: routerId }),
  });
  const clientLeaf = new X509Certificate(clientPem);
  const chain = (leafPem: string) => `${leafPem.trim()}\n${signing.certPem.trim()}\n`;
  return {
    certs: { cert: chain(clientPem), serverCert: chain(serverPem), ca: caBundle(svc) },
    set: { certPem: clientLeaf.toString(), fingerprint: fingerprintOfDer(clientLeaf.raw) },
  };
}

function isBlank(v: unknown): boolean {
  return typeof v !== 'string' || v.trim() === '';
}

/**
 * Router enrollment with `method` (`erott`: an edge router's token, `trott`: a transit router's); both CSRs are
 * required (400 MISSING_OR_INVALID_CSR). The enrollment is used up and the router row verified, with its
 * certificate and fingerprint, in one write.
 */
export async function enrollRouter(
  svc: Services,
  method: RouterEnrollMethod,
  token: unknown,
  serverCsr: unknown,
  clientCsr: unknown,
): Promise<RouterCerts> {
  const enrollment = enrollmentByToken(svc, token, method);
  const routerId = enrollment[ROUTER_KEY[method]] as string | undefined;
  const router = routerId ? svc.get('transit-routers', routerId) : undefined;
  if (!router) throw Errors.INVALID_ENROLLMENT_TOKEN();
  if (isBlank(serverCsr)) throw Errors.MISSING_OR_INVALID_CSR({ code: 'UNHANDLED', message: 'invalid server CSR' });
  if (isBlank(clientCsr)) throw Errors.MISSING_OR_INVALID_CSR({ code: 'UNHANDLED', message: 'invalid client CSR' });
  const { certs, set } = await signRouterCsrs(svc, router, serverCsr as string, clientCsr as string);
  await consumeEnrollment(svc, enrollment, (at) => [
    { op: 'update', entity: 'transit-routers', id: router.id, set: { ...set, isVerified: true }, at },
  ]);
  return certs;
}

/**
 * Router certificate extension (edge and transit routers): the request's TLS client certificate must be a
 * verified router's current one (matched by fingerprint, chaining to this controller's CAs now); else 401
 * UNAUTHORIZED. Both CSRs are signed and the new client certificate replaces the old one at once (the old one no
 * longer identifies the router).
 */
export async function extendRouter(
  svc: Services,
  peerCertificates: Buffer[] | undefined,
  body: { certCsr: string; serverCertCsr: string },
): Promise<RouterCerts> {
  let router = await routerOfCertificate(svc, peerCertificates);
  if (router === undefined && svc.cluster !== null) {
    // a certificate no router holds here: enrolled or extended through another member a moment ago, perhaps, so
    // this member catches up before it refuses
    await svc.sessions.catchUp();
    router = await routerOfCertificate(svc, peerCertificates);
  }
  if (!router) throw Errors.UNAUTHORIZED();
  const { certs, set } = await signRouterCsrs(svc, router, body.serverCertCsr, body.certCsr);
  // applies only while the router still holds the certificate it showed: re-enrolled or extended meanwhile, the
  // certificate no longer identifies it (401, as routerOfCertificate answers)
  const expect = [
    stillEquals(
      'transit-routers',
      router.id,
      'fingerprint',
      router.fingerprint,
      'the router certificate changed meanwhile',
      'UNAUTHORIZED',
    ),
  ];
  await svc.write({ op: 'update', entity: 'transit-routers', id: router.id, set, at: svc.nowIso(), expect });
  return certs;
}

/**
 * The verified router (its `transit-routers` row) whose current client certificate the request presents; undefined
 * when no router holds the certificate presented, null when refused otherwise (no certificate, no PKI, a router not
 * verified, a chain that does not verify).
 */
async function routerOfCertificate(
  svc: Services,
  peerCertificates: Buffer[] | undefined,
): Promise<RowFor<'transit-routers'> | null | undefined> {
  const [leaf, ...sent] = peerCertificates ?? [];
  if (!leaf || !svc.pki) return null;
  const router = routerByFingerprint(svc, fingerprintOfDer(leaf));
  if (router === undefined) return undefined;
  if (router.isVerified !== true) return null;
  const verified = await verifyChain(leaf, sent, svc.pki.caPems, { at: new Date(svc.clock.now()), purpose: 'client' });
  return verified.ok ? router : null;
}

/**
 * Re-enrollment of an edge router (management): a new `erott` enrollment replaces any outstanding one (its token
 * and JWT enroll nothing any more) and the router forgets its certificate and is unverified, in one write. An edge
 * router created before routers had rows gets its router row here.
 */
export async function reEnrollRouter(svc: Services, routerId: string): Promise<void> {
  const edge = svc.require('edge-routers', routerId);
  const at = svc.nowIso();
  const old = routerEnrollmentOf(svc, edge.id);
  const unverified = { isVerified: false, fingerprint: null, certPem: null };
  const ops: Command[] = [
    ...(old
      ? [{ op: 'delete' as const, entity: 'enrollments' as const, id: old.id, at, system: true, ifExists: true }]
      : []),
    await routerEnrollmentCommand(svc, edge.id, ROUTER_ENROLL_METHOD, at),
    svc.get('transit-routers', edge.id)
      ? { op: 'update' as const, entity: 'transit-routers' as const, id: edge.id, set: unverified, at }
      : routerRowOf(edge.id, edge, at),
  ];
  await svc.write({ op: 'batch', ops });
}
