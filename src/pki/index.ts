/**
 * Keel's one PKI module (docs/pki.md): CAs, certificates, CSR signing, chain verification, PKCS#7 bundles, the
 * cluster's peer TLS material, enrollment JWTs and fingerprints.
 */
export {
  type CaMaterial,
  type CaOptions,
  type CertUsage,
  type CsrOptions,
  checkRootCa,
  createIntermediateCa,
  createRootCa,
  issueHostCert,
  issueServerCert,
  type KeyAndCert,
  type LeafOptions,
  MAX_CSR_SIZE_BYTES,
  MIN_RSA_BITS,
  PEER_URI_PREFIX,
  parseCsr,
  signCsr,
} from './ca.js';
export {
  type BundleOptions,
  type IssuedNode,
  initClusterPki,
  issueNodeBundle,
  issuePeerCert,
  loadPeerTls,
  loadPeerTlsOptions,
  MAX_HOSTS,
  NODE_ID_PATTERN,
  type NodeOptions,
  type PeerTls,
  peerIdFromCert,
  peerNodeId,
  shareSigningCa,
} from './cluster.js';
export { type ChainErrorCode, PkiError, type PkiErrorCode } from './errors.js';
export { fingerprintOfDer, parseSinglePem } from './fingerprint.js';
export {
  API_CERT_RENEW_BEFORE_MS,
  type ApiTls,
  apiCertHosts,
  certHostNames,
  ensureApiTls,
  isLoopbackHost,
  type NodePki,
  openNodePki,
} from './node-pki.js';
export { pkcs7CaCerts } from './pkcs7.js';
export { caCertificates, ensureClusterCa, importRootCa, loadSigningCa, PKI_FILES } from './pki-dir.js';
export { type ChainResult, MAX_CHAIN_CANDIDATES, MAX_CHAIN_DEPTH, type VerifyOptions, verifyChain } from './verify.js';
