/**
 * The cluster's PKI on disk: a root CA, a signing intermediate, and each node's peer certificate for mutual TLS
 * between controllers. Layout of a PKI directory (PEM files; private keys mode 0600, directories 0700):
 *
 *   ca/root.cert.pem  ca/root.key.pem         the cluster root CA (only where `keel pki init` ran)
 *   ca/signing.cert.pem  ca/signing.key.pem   the signing intermediate (pathLen 0)
 *   ca.cert.pem                               the root CA certificate (the trust anchor for peers)
 *   node.key.pem                              this node's peer private key
 *   node.cert.pem                             this node's peer certificate, then the signing intermediate
 *   api.key.pem  api.cert.pem                 the API listener's key and certificate (+ signing intermediate)
 *
 * A join bundle (`issueNodeBundle`) holds ca.cert.pem, node.key.pem and node.cert.pem only.
 */
import { isIP } from 'node:net';
import { join } from 'node:path';
import type { PeerCertificate } from 'node:tls';
import { type CaMaterial, createIntermediateCa, createRootCa, issueServerCert, type KeyAndCert } from './ca.js';
import { importSigningKey, parseCertificate, parseCertificates, x509 } from './crypto.js';
import { PkiError } from './errors.js';
import { exists, type PkiFile, readPki, refuseExisting, writeFiles } from './files.js';
import { verifyChain } from './verify.js';

/** A peer certificate names its node by a SAN URI: this prefix + the node id. */
export const PEER_URI_PREFIX = 'spiffe://keel/controller/';
/** Node ids: what Raft, URIs and file names all accept. */
export const NODE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const MAX_HOSTS = 32;

export const PKI_FILES = {
  rootCert: join('ca', 'root.cert.pem'),
  rootKey: join('ca', 'root.key.pem'),
  signingCert: join('ca', 'signing.cert.pem'),
  signingKey: join('ca', 'signing.key.pem'),
  nodeKey: 'node.key.pem',
  nodeCert: 'node.cert.pem',
  caCert: 'ca.cert.pem',
  apiKey: 'api.key.pem',
  apiCert: 'api.cert.pem',
} as const;

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

/** The peer certificate of a node: CN and SAN URI name the node, SANs list its hosts, serverAuth + clientAuth. */
export async function issuePeerCert(signing: CaMaterial, opts: NodeOptions): Promise<KeyAndCert> {
  checkNode(opts);
  return issueServerCert(signing, {
    commonName: opts.nodeId,
    dnsNames: opts.hosts.filter((h) => isIP(h) === 0),
    ipAddresses: opts.hosts.filter((h) => isIP(h) !== 0),
    uris: [PEER_URI_PREFIX + opts.nodeId],
    usage: 'both',
    validity_days: opts.validity_days,
  });
}

/** A leaf's key file and certificate file (the leaf followed by its intermediates, without the root). */
function leafFiles(keyName: string, certName: string, leaf: KeyAndCert): PkiFile[] {
  const intermediates = leaf.chainPem.slice(0, -1);
  return [
    { name: keyName, content: leaf.keyPem, secret: true },
    { name: certName, content: [leaf.certPem, ...intermediates].map(ensureNewline).join(''), secret: false },
  ];
}

function certFile(name: string, pem: string): PkiFile {
  return { name, content: ensureNewline(pem), secret: false };
}

function ensureNewline(pem: string): string {
  return pem.endsWith('\n') ? pem : `${pem}\n`;
}

/**
 * The signing CA of the PKI in `dir`, creating what is missing of it: with neither CA material nor a root
 * certificate, a new root and signing CA; with a root (ca/root.*) but no signing CA, a signing CA under that root
 * (an operator may provide the root). A node set up from a join bundle (ca.cert.pem, no ca/) gets null: it cannot
 * sign. ca.cert.pem is written last and marks the CA complete; the key and certificate of each CA are written key
 * first, so an interrupted first start leaves at most an orphan key, which the next start replaces.
 */
export async function ensureClusterCa(dir: string, opts: { clusterName?: string } = {}): Promise<CaMaterial | null> {
  const has = async (name: string) => exists(join(dir, name));
  if (await has(PKI_FILES.caCert)) return (await has(PKI_FILES.signingCert)) ? loadSigningCa(dir) : null;
  const name = opts.clusterName ?? 'Keel';
  if (name.length > 50) throw new PkiError('INVALID_ARGUMENT', 'cluster name longer than 50 characters');
  let root: CaMaterial;
  if (await has(PKI_FILES.rootCert)) {
    root = {
      certPem: await readPki(dir, PKI_FILES.rootCert),
      keyPem: await readPki(dir, PKI_FILES.rootKey),
      chainPem: [],
    };
  } else {
    root = await createRootCa({ commonName: `${name} Root CA` });
    await writeFiles(dir, leafFiles(PKI_FILES.rootKey, PKI_FILES.rootCert, root), { exclusive: false });
  }
  if (!(await has(PKI_FILES.signingCert))) {
    const signing = await createIntermediateCa(root, { commonName: `${name} Signing CA` });
    await writeFiles(dir, leafFiles(PKI_FILES.signingKey, PKI_FILES.signingCert, signing), { exclusive: false });
  }
  const signing = await loadSigningCa(dir);
  const verdict = await verifyChain(signing.certPem, [], [root.certPem]);
  if (!verdict.ok) throw new PkiError('CERT_INVALID', `the signing CA does not chain to the root: ${verdict.code}`);
  await writeFiles(dir, [certFile(PKI_FILES.caCert, root.certPem)], { exclusive: true });
  return signing;
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
  const node = await issuePeerCert(signing, opts);
  // The certificate comes last and marks the pair complete: an orphan key of an interrupted run is replaced.
  await writeFiles(dir, leafFiles(PKI_FILES.nodeKey, PKI_FILES.nodeCert, node), { exclusive: false });
  return { nodeId: opts.nodeId, dir, certPem: node.certPem };
}

/** The signing CA of a PKI directory made by initClusterPki (with its root as chain). */
export async function loadSigningCa(caDir: string): Promise<CaMaterial> {
  const [certPem, keyPem, rootPem] = await Promise.all([
    readPki(caDir, PKI_FILES.signingCert),
    readPki(caDir, PKI_FILES.signingKey),
    readPki(caDir, PKI_FILES.rootCert),
  ]);
  return { certPem, keyPem, chainPem: [rootPem] };
}

/**
 * Writes a join bundle into `outDir` (which must not hold one yet): a fresh key and peer certificate for `nodeId`
 * signed by the signing CA of `caDir`, and the root CA certificate. The operator copies `outDir` to the joining node.
 */
export async function issueNodeBundle(caDir: string, outDir: string, opts: NodeOptions): Promise<IssuedNode> {
  checkNode(opts);
  const signing = await loadSigningCa(caDir);
  await refuseExisting(outDir, [PKI_FILES.nodeKey, PKI_FILES.nodeCert, PKI_FILES.caCert]);
  const node = await issuePeerCert(signing, opts);
  const files = [
    ...leafFiles(PKI_FILES.nodeKey, PKI_FILES.nodeCert, node),
    certFile(PKI_FILES.caCert, node.chainPem.at(-1)!),
  ];
  await writeFiles(outDir, files, { exclusive: true });
  return { nodeId: opts.nodeId, dir: outDir, certPem: node.certPem };
}

/** A key and certificate file of a PKI directory, checked: the key belongs to the certificate, which chains to
 * the directory's root and is valid now. */
async function loadLeaf(
  dir: string,
  keyName: string,
  certName: string,
): Promise<{ key: string; cert: string; ca: string; leaf: x509.X509Certificate }> {
  const [key, cert, ca] = await Promise.all([
    readPki(dir, keyName),
    readPki(dir, certName),
    readPki(dir, PKI_FILES.caCert),
  ]);
  const certs = parseCertificates(cert);
  const leaf = certs[0];
  if (!leaf) throw new PkiError('CERT_MALFORMED', `${join(dir, certName)} holds no certificate`);
  const signer = await importSigningKey(key);
  if (!Buffer.from(leaf.publicKey.rawData).equals(signer.spki)) {
    throw new PkiError('KEY_MISMATCH', `${join(dir, keyName)} does not belong to ${join(dir, certName)}`);
  }
  const verdict = await verifyChain(leaf, certs.slice(1), [ca], { purpose: 'server' });
  if (!verdict.ok) throw new PkiError('CERT_INVALID', `${join(dir, certName)}: ${verdict.code}: ${verdict.message}`);
  return { key, cert, ca, leaf };
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

/** What node:https needs for the API listener. */
export interface ApiTls {
  key: string;
  /** The API certificate followed by the signing intermediate. */
  cert: string;
  /** The root CA certificate. */
  ca: string;
}

/**
 * The API listener's TLS material in `dir`: loaded if present, otherwise issued by the signing CA (created first
 * when `dir` has no PKI yet) with serverAuth and SANs for `hosts`. A node whose PKI came from a join bundle has no
 * signing CA: it gets MISSING_FILE unless api.key.pem/api.cert.pem were put there.
 */
export async function ensureApiTls(dir: string, opts: { hosts: string[]; validity_days?: number }): Promise<ApiTls> {
  if (!(await exists(join(dir, PKI_FILES.apiCert)))) {
    if (opts.hosts.length === 0 || opts.hosts.length > MAX_HOSTS) {
      throw new PkiError('INVALID_ARGUMENT', `the API certificate needs 1..${MAX_HOSTS} hosts`);
    }
    const signing = await ensureClusterCa(dir);
    if (!signing)
      throw new PkiError('MISSING_FILE', `${join(dir, PKI_FILES.signingKey)} is missing: no CA to sign with`);
    const api = await issueServerCert(signing, {
      commonName: opts.hosts[0]!.slice(0, 64),
      dnsNames: opts.hosts.filter((h) => isIP(h) === 0),
      ipAddresses: opts.hosts.filter((h) => isIP(h) !== 0),
      usage: 'server',
      validity_days: opts.validity_days,
    });
    await writeFiles(dir, leafFiles(PKI_FILES.apiKey, PKI_FILES.apiCert, api), { exclusive: false });
  }
  const { key, cert, ca } = await loadLeaf(dir, PKI_FILES.apiKey, PKI_FILES.apiCert);
  return { key, cert, ca };
}

/**
 * The CA certificates a client should trust, for `/.well-known/est/cacerts`: the root and the signing CA (from
 * ca/signing.cert.pem, or the intermediates that follow the node certificate in a joined node's bundle).
 */
export async function caCertificates(dir: string): Promise<string[]> {
  const root = await readPki(dir, PKI_FILES.caCert);
  const out = parseCertificates(root).map((c) => c.toString('pem'));
  let intermediates: string;
  if (await exists(join(dir, PKI_FILES.signingCert))) intermediates = await readPki(dir, PKI_FILES.signingCert);
  else if (await exists(join(dir, PKI_FILES.nodeCert))) {
    intermediates = parseCertificates(await readPki(dir, PKI_FILES.nodeCert))
      .slice(1)
      .map((c) => c.toString('pem'))
      .join('\n');
  } else intermediates = '';
  for (const c of parseCertificates(intermediates)) out.push(c.toString('pem'));
  if (out.length === 0) throw new PkiError('CERT_MALFORMED', `${join(dir, PKI_FILES.caCert)} holds no certificate`);
  return out;
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
