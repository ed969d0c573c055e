/** Why a PKI operation refused its input. Callers branch on `code`, never on the message. */
export type PkiErrorCode =
  | 'INVALID_ARGUMENT' // a bad option: node id, host, validity, common name
  | 'CSR_MALFORMED' // not exactly one parseable PEM certificate request
  | 'CSR_TOO_LARGE' // larger than MAX_CSR_SIZE_BYTES
  | 'CSR_BAD_SIGNATURE' // the request's self-signature does not verify
  | 'CSR_UNSUPPORTED_KEY' // neither ECDSA (P-256/P-384/P-521) nor RSA
  | 'CSR_KEY_TOO_SMALL' // RSA below MIN_RSA_BITS
  | 'CSR_CA_REQUESTED' // the request asks for basicConstraints CA:true
  | 'CERT_MALFORMED' // not a parseable certificate
  | 'CERT_INVALID' // a certificate that parses but does not verify or lacks what its use needs
  | 'KEY_MALFORMED' // not a parseable PKCS#8 private key of a supported type
  | 'KEY_MISMATCH' // a CA's private key does not belong to its certificate
  | 'ALREADY_EXISTS' // refusing to overwrite PKI material on disk
  | 'MISSING_FILE'; // PKI material expected on disk is absent

export class PkiError extends Error {
  constructor(
    readonly code: PkiErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'PkiError';
  }
}

/** Why `verifyChain` rejected a certificate. */
export type ChainErrorCode =
  | 'MALFORMED' // a certificate that does not parse
  | 'EXPIRED' // the leaf is past its notAfter at the checked time (the rest of the path sound and valid)
  | 'NOT_YET_VALID' // the leaf is before its notBefore
  | 'ISSUER_NOT_VALID' // a CA of the path (an intermediate or the anchor) is outside its validity
  | 'UNKNOWN_ISSUER' // no given intermediate or root has the issuer's name
  | 'BAD_SIGNATURE' // an issuer with the right name exists, but its key did not sign the certificate
  | 'NOT_A_CA' // the issuer lacks basicConstraints CA:true or keyUsage keyCertSign
  | 'PATH_LENGTH_EXCEEDED' // more CAs below an issuer than its pathLenConstraint allows
  | 'WRONG_USAGE' // the leaf's extended key usage does not allow the requested purpose
  | 'CHAIN_TOO_LONG'; // more than MAX_CHAIN_DEPTH certificates
