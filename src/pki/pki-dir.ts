/**
 * A PKI directory on disk (docs/pki.md): PEM files, private keys mode 0600, directories 0700.
 *
 *   ca/root.cert.pem  ca/root.key.pem         the root CA (the key may be moved offline once the CA is complete)
 *   ca/signing.cert.pem  ca/signing.key.pem   the signing intermediate (pathLen 0)
 *   ca.cert.pem                               the root CA certificate: the trust anchor; written last, it marks a
 *                                             complete CA
 *   node.key.pem  node.cert.pem               this node's peer key and certificate (+ signing intermediate)
 *   api.key.pem  api.cert.pem                 the API listener's key and certificate (+ signing intermediate)
 *
 * A join bundle holds ca.cert.pem, node.key.pem and node.cert.pem only.
 */
import { join } from 'node:path';
import { type CaMaterial, checkRootCa, createIntermediateCa, createRootCa, type KeyAndCert } from './ca.js';
import { importSigningKey, parseCertificates, type x509 } from './crypto.js';
import { PkiError } from './errors.js';
import { exists, type PkiFile, readPki, writeFiles } from './files.js';
import { verifyChain } from './verify.js';

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

/** A leaf's key file and certificate file (the leaf followed by its intermediates, without the root). */
export function leafFiles(keyName: string, certName: string, leaf: KeyAndCert): PkiFile[] {
  const intermediates = leaf.chainPem.slice(0, -1);
  return [
    { name: keyName, content: leaf.keyPem, secret: true },
    { name: certName, content: [leaf.certPem, ...intermediates].map(ensureNewline).join(''), secret: false },
  ];
}

export function certFile(name: string, pem: string): PkiFile {
  return { name, content: ensureNewline(pem), secret: false };
}

export function ensureNewline(pem: string): string {
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
    root = await loadRootCa(dir);
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
 * Puts an operator's root CA (checked by checkRootCa) into the PKI directory `dir` before its first start, where
 * ensureClusterCa then creates the signing CA under it. The same root again is a no-op; a directory that holds
 * another root is refused (ALREADY_EXISTS): a PKI's root is never replaced.
 */
export async function importRootCa(dir: string, certPem: string, keyPem: string): Promise<void> {
  const root = await checkRootCa(certPem, keyPem);
  for (const name of [PKI_FILES.caCert, PKI_FILES.rootCert]) {
    if (!(await exists(join(dir, name)))) continue;
    const present = parseCertificates(await readPki(dir, name))[0];
    if (!present || present.toString('pem') !== root.certPem) {
      throw new PkiError('ALREADY_EXISTS', `${join(dir, name)} holds another root CA; not replacing it`);
    }
    return;
  }
  await writeFiles(dir, leafFiles(PKI_FILES.rootKey, PKI_FILES.rootCert, root), { exclusive: true });
}

/**
 * The root CA of a PKI directory made by initClusterPki, with its key: only where the cluster was initialised (or an
 * operator keeps it). It signs peer certificates, which therefore no member holding only a join bundle can make.
 */
export async function loadRootCa(caDir: string): Promise<CaMaterial> {
  if (!(await exists(join(caDir, PKI_FILES.rootKey)))) {
    throw new PkiError(
      'MISSING_FILE',
      `${join(caDir, PKI_FILES.rootKey)} is missing: the cluster's root CA signs the signing CA and peer ` +
        'certificates, so create or issue them where the cluster was initialised (or where the operator keeps the root key)',
    );
  }
  const [certPem, keyPem] = await Promise.all([readPki(caDir, PKI_FILES.rootCert), readPki(caDir, PKI_FILES.rootKey)]);
  return { certPem, keyPem, chainPem: [] };
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

/** A key and certificate file of a PKI directory, checked: the key belongs to the certificate, which chains to
 * the directory's root and is valid now. */
export async function loadLeaf(
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
