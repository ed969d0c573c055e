/**
 * The cluster's PKI on disk: a root CA, a signing intermediate, and each node's peer certificate for mutual TLS
 * between controllers. Layout of a PKI directory (PEM files; private keys mode 0600, directories 0700):
 *
 *   ca/root.cert.pem  ca/root.key.pem         the cluster root CA (only where `keel pki init` ran)
 *   ca/signing.cert.pem  ca/signing.key.pem   the signing intermediate (pathLen 0)
 *   node.key.pem                              this node's private key
 *   node.cert.pem                             this node's certificate, then the signing intermediate
 *   ca.cert.pem                               the root CA certificate (the trust anchor for peers)
 *
 * A join bundle (`issueNodeBundle`) holds the last three files only.
 */
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import type { PeerCertificate } from 'node:tls';
import { type CaMaterial, createIntermediateCa, createRootCa, issueServerCert, type KeyAndCert } from './ca.js';
import { importSigningKey, parseCertificate, parseCertificates, x509 } from './crypto.js';
import { PkiError } from './errors.js';
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

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

async function refuseExisting(dir: string, files: string[]): Promise<void> {
  for (const f of files) {
    if (await exists(join(dir, f))) throw new PkiError('ALREADY_EXISTS', `${join(dir, f)} exists; not overwriting it`);
  }
}

/** Writes files that must not exist yet (`wx`); keys 0600. */
async function writeNew(dir: string, files: Array<[name: string, content: string, secret: boolean]>): Promise<void> {
  for (const [name, content, secret] of files) {
    const path = join(dir, name);
    await mkdir(join(path, '..'), { recursive: true, mode: 0o700 });
    try {
      await writeFile(path, content, { flag: 'wx', mode: secret ? 0o600 : 0o644 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
        throw new PkiError('ALREADY_EXISTS', `${path} exists; not overwriting it`);
      }
      throw err;
    }
  }
}

function nodeFiles(node: KeyAndCert): Array<[string, string, boolean]> {
  const root = node.chainPem[node.chainPem.length - 1]!;
  const intermediates = node.chainPem.slice(0, -1);
  return [
    [PKI_FILES.nodeKey, node.keyPem, true],
    [PKI_FILES.nodeCert, [node.certPem, ...intermediates].map(ensureNewline).join(''), false],
    [PKI_FILES.caCert, ensureNewline(root), false],
  ];
}

function ensureNewline(pem: string): string {
  return pem.endsWith('\n') ? pem : `${pem}\n`;
}

/** Creates a new cluster PKI in `dir`: root CA, signing intermediate, and this node's peer certificate. */
export async function initClusterPki(dir: string, opts: NodeOptions & { clusterName?: string }): Promise<IssuedNode> {
  checkNode(opts);
  await refuseExisting(dir, Object.values(PKI_FILES));
  const name = opts.clusterName ?? 'Keel';
  const root = await createRootCa({ commonName: `${name} Root CA` });
  const signing = await createIntermediateCa(root, { commonName: `${name} Signing CA` });
  const node = await issuePeerCert(signing, opts);
  await writeNew(dir, [
    [PKI_FILES.rootKey, root.keyPem, true],
    [PKI_FILES.rootCert, ensureNewline(root.certPem), false],
    [PKI_FILES.signingKey, signing.keyPem, true],
    [PKI_FILES.signingCert, ensureNewline(signing.certPem), false],
    ...nodeFiles(node),
  ]);
  return { nodeId: opts.nodeId, dir, certPem: node.certPem };
}

async function readPki(dir: string, name: string): Promise<string> {
  try {
    return await readFile(join(dir, name), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new PkiError('MISSING_FILE', `${join(dir, name)} is missing`);
    }
    throw err;
  }
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
  await writeNew(outDir, nodeFiles(node));
  return { nodeId: opts.nodeId, dir: outDir, certPem: node.certPem };
}

/**
 * Reads this node's peer TLS material from a PKI directory (or join bundle) and checks it: the key belongs to the
 * certificate, the certificate chains to the root and is valid now, and it names a node id.
 */
export async function loadPeerTls(dir: string): Promise<PeerTls> {
  const [key, cert, ca] = await Promise.all([
    readPki(dir, PKI_FILES.nodeKey),
    readPki(dir, PKI_FILES.nodeCert),
    readPki(dir, PKI_FILES.caCert),
  ]);
  const certs = parseCertificates(cert);
  const leaf = certs[0];
  if (!leaf) throw new PkiError('CERT_MALFORMED', `${join(dir, PKI_FILES.nodeCert)} holds no certificate`);
  const signer = await importSigningKey(key);
  if (!Buffer.from(leaf.publicKey.rawData).equals(signer.spki)) {
    throw new PkiError('KEY_MISMATCH', `${join(dir, PKI_FILES.nodeKey)} does not belong to the node certificate`);
  }
  const verdict = await verifyChain(leaf, certs.slice(1), [ca], { purpose: 'server' });
  if (!verdict.ok) throw new PkiError('CERT_INVALID', `node certificate: ${verdict.code}: ${verdict.message}`);
  const nodeId = peerNodeId(leaf.rawData);
  if (nodeId === null) throw new PkiError('CERT_INVALID', 'the node certificate names no node id');
  return { key, cert, ca, nodeId };
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
