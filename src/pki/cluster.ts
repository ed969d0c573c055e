/**
 * The cluster's peer certificates: each node's certificate for mutual TLS between controllers, names its node id in
 * a SAN URI; join bundles hand a new node its certificate (docs/pki.md).
 */
import { join } from 'node:path';
import type { PeerCertificate } from 'node:tls';
import { type CaMaterial, issueHostCert, issueLeaf, type KeyAndCert, PEER_URI_PREFIX, splitHosts } from './ca.js';
import { parseCertificate, x509 } from './crypto.js';
import { PkiError } from './errors.js';
import { exists, readPki, refuseExisting, writeFiles } from './files.js';
import { certFile, ensureClusterCa, leafFiles, loadLeaf, loadRootCa, loadSigningCa, PKI_FILES } from './pki-dir.js';

/** Node ids: what Raft, URIs and file names all accept. */
export const NODE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const MAX_HOSTS = 32;

export interface NodeOptions {
  nodeId: string;
  /** Addresses the node is reached at: DNS names or IP addresses (become SANs of its certificate). */
  hosts: string[];
  validity_days?: number;
}

/** What node:https / ws need for mutual TLS between controllers. */
export interface PeerTls {
  /** PKCS#8 PEM private key. */
  key: string;
  /** The node's certificate followed by the signing intermediate (PEM). */
  cert: string;
  /** The root CA certificate (PEM): peers must chain to it. */
  ca: string;
  /** The node id this certificate names. */
  nodeId: string;
}

export interface IssuedNode {
  nodeId: string;
  dir: string;
  /** The node's certificate (PEM, leaf only). */
  certPem: string;
}

function checkNode(opts: NodeOptions): void {
  if (typeof opts.nodeId !== 'string' || !NODE_ID_PATTERN.test(opts.nodeId)) {
    throw new PkiError('INVALID_ARGUMENT', `invalid node id '${opts.nodeId}' (1..64 of A-Z a-z 0-9 . _ -)`);
  }
  if (opts.hosts.length > MAX_HOSTS) throw new PkiError('INVALID_ARGUMENT', `at most ${MAX_HOSTS} hosts`);
}

/**
 * The peer certificate of a node: CN and SAN URI name the node, SANs list its hosts, serverAuth + clientAuth. The
 * cluster's own are signed by its root CA (initClusterPki, issueNodeBundle), whose key members do not hold: a member
 * can sign identity and router certificates, never a new node's (a node joins by itself only with one the root
 * signed: docs/cluster.md, "A removed member stays out").
 */
export async function issuePeerCert(ca: CaMaterial, opts: NodeOptions): Promise<KeyAndCert> {
  checkNode(opts);
  return issueLeaf(ca, {
    commonName: opts.nodeId,
    ...splitHosts(opts.hosts),
    uris: [PEER_URI_PREFIX + opts.nodeId],
    usage: 'both',
    validity_days: opts.validity_days,
  });
}

/**
 * Creates this node's peer certificate in `dir`, and the cluster's root and signing CAs first unless `dir` already
 * holds them (e.g. made by an earlier start of the controller). Refuses if the node certificate exists.
 */
export async function initClusterPki(dir: string, opts: NodeOptions & { clusterName?: string }): Promise<IssuedNode> {
  checkNode(opts);
  await refuseExisting(dir, [PKI_FILES.nodeCert]);
  const signing = await ensureClusterCa(dir, opts);
  if (!signing) throw new PkiError('MISSING_FILE', `${join(dir, PKI_FILES.signingKey)} is missing: no CA to sign with`);
  const node = await issuePeerCert(await loadRootCa(dir), opts);
  // The certificate comes last and marks the pair complete: an orphan key of an interrupted run is replaced.
  await writeFiles(dir, leafFiles(PKI_FILES.nodeKey, PKI_FILES.nodeCert, node), { exclusive: false });
  return { nodeId: opts.nodeId, dir, certPem: node.certPem };
}

export interface BundleOptions extends NodeOptions {
  /**
   * Put the signing CA (key and certificate) and the root certificate into the bundle (default true), so that the
   * member signs identity, router and its own API certificates with the cluster's one signing CA. Without it the
   * member cannot enroll identities and the bundle carries an API certificate for `hosts` instead (docs/pki.md).
   */
  withSigningCa?: boolean;
}

/**
 * Writes a join bundle into `outDir` (which must not hold one yet): a fresh key and peer certificate for `nodeId`
 * signed by the signing CA of `caDir`, the root CA certificate, and (unless `withSigningCa` is false) the signing
 * CA with its key; else an API certificate for the node's hosts. The operator copies `outDir` to the joining node.
 */
export async function issueNodeBundle(caDir: string, outDir: string, opts: BundleOptions): Promise<IssuedNode> {
  checkNode(opts);
  const withSigningCa = opts.withSigningCa ?? true;
  const signing = await loadSigningCa(caDir);
  const root = signing.chainPem.at(-1)!;
  await refuseExisting(outDir, [
    PKI_FILES.nodeKey,
    PKI_FILES.nodeCert,
    PKI_FILES.caCert,
    PKI_FILES.signingCert,
    PKI_FILES.apiCert,
  ]);
  const node = await issuePeerCert(await loadRootCa(caDir), opts);
  const files = [...leafFiles(PKI_FILES.nodeKey, PKI_FILES.nodeCert, node)];
  if (withSigningCa) {
    files.unshift(
      certFile(PKI_FILES.rootCert, root),
      ...leafFiles(PKI_FILES.signingKey, PKI_FILES.signingCert, { ...signing, chainPem: [root] }),
    );
  } else {
    if (opts.hosts.length === 0) throw new PkiError('INVALID_ARGUMENT', 'a bundle without the signing CA needs hosts');
    const api = await issueHostCert(signing, opts.hosts, opts.validity_days);
    files.push(...leafFiles(PKI_FILES.apiKey, PKI_FILES.apiCert, api));
  }
  // ca.cert.pem last: it marks the directory's CA part complete (ensureClusterCa)
  files.push(certFile(PKI_FILES.caCert, root));
  await writeFiles(outDir, files, { exclusive: true });
  return { nodeId: opts.nodeId, dir: outDir, certPem: node.certPem };
}

/**
 * Gives a member set up from a bundle without the signing CA (`--without-signing-ca`, or one issued before bundles
 * carried it) the cluster's signing CA from `caDir`: refuses unless both trust the same root. A no-op when the
 * member holds a signing CA already.
 */
export async function shareSigningCa(caDir: string, memberDir: string): Promise<void> {
  if (await exists(join(memberDir, PKI_FILES.signingCert))) return;
  const signing = await loadSigningCa(caDir);
  const root = signing.chainPem.at(-1)!;
  const memberRoot = await readPki(memberDir, PKI_FILES.caCert);
  if (memberRoot.trim() !== root.trim()) {
    throw new PkiError('CERT_INVALID', `${memberDir} trusts another root than ${caDir}`);
  }
  await writeFiles(
    memberDir,
    [certFile(PKI_FILES.rootCert, root), ...leafFiles(PKI_FILES.signingKey, PKI_FILES.signingCert, signing)],
    { exclusive: false },
  );
}

/**
 * Reads this node's peer TLS material from a PKI directory (or join bundle) and checks it: the key belongs to the
 * certificate, the certificate chains to the root and is valid now, and it names a node id.
 */
export async function loadPeerTls(dir: string): Promise<PeerTls> {
  const { key, cert, ca, leaf } = await loadLeaf(dir, PKI_FILES.nodeKey, PKI_FILES.nodeCert);
  const nodeId = peerNodeId(leaf.rawData);
  if (nodeId === null) throw new PkiError('CERT_INVALID', 'the node certificate names no node id');
  return { key, cert, ca, nodeId };
}

/**
 * A member's peer TLS material (loadPeerTls) with the check every peer listener applies to the other side's
 * certificate (peerIdFromCert): what the Raft transport and the peer API take.
 */
export async function loadPeerTlsOptions(dir: string): Promise<PeerTls & { peerIdFromCert: typeof peerIdFromCert }> {
  return { ...(await loadPeerTls(dir)), peerIdFromCert };
}

/**
 * The node id a peer certificate names: its one SAN URI `spiffe://keel/controller/<id>`, or null. The subject CN is
 * deliberately not used: identity and router certificates from the same signing CA carry arbitrary CNs.
 */
export function peerNodeId(certDer: Uint8Array | ArrayBuffer): string | null {
  const cert = parseCertificate(certDer instanceof ArrayBuffer ? new Uint8Array(certDer) : certDer);
  if (!cert) return null;
  let uris: string[];
  try {
    const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
    uris = san ? san.names.items.filter((n) => n.type === 'url').map((n) => n.value) : [];
  } catch {
    return null;
  }
  const ids = uris.filter((u) => u.startsWith(PEER_URI_PREFIX)).map((u) => u.slice(PEER_URI_PREFIX.length));
  if (ids.length !== 1 || !NODE_ID_PATTERN.test(ids[0]!)) return null;
  return ids[0]!;
}

/** peerNodeId for node:tls' view of a peer certificate (raft's WebSocketTransport `tls.peerIdFromCert`). */
export function peerIdFromCert(cert: PeerCertificate): string | null {
  if (!cert?.raw) return null;
  return peerNodeId(cert.raw);
}
