import {
  createHash,
  createPrivateKey,
  createPublicKey,
  type KeyObject,
  randomUUID,
  X509Certificate,
} from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import type { Services } from '../api/services.js';
import { liveApiBaseUrls } from '../cluster/live-api-urls.js';
import type { Command } from '../model/rows.js';
import { fingerprintOfDer } from './fingerprint.js';
import { pemBlocks } from './pem.js';

export const ENROLLMENT_SIGNER_ID = 'enrollment-signer';
/** OpenZiti's default enrollment window (`edgeIdentity.duration` / `edgeRouter.duration`: 180 minutes). */
export const DEFAULT_ENROLLMENT_DURATION_MS = 180 * 60 * 1000;

/** A new ES256 signing key as a create command (run once, at initialisation). */
export async function signingKeyCommand(at: string): Promise<Command> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  const kid = createHash('sha256')
    .update(JSON.stringify([publicJwk.x, publicJwk.y]))
    .digest('hex')
    .slice(0, 40);
  return {
    op: 'create',
    entity: 'controller-keys',
    id: ENROLLMENT_SIGNER_ID,
    at,
    data: {
      kid,
      alg: 'ES256',
      privateJwk: await exportJWK(privateKey),
      publicJwk: { ...publicJwk, kid, alg: 'ES256', use: 'sig' },
    },
  };
}

/** A key that signs enrollment JWTs: its id (`kid`), JOSE algorithm, private key and public JWK. */
export interface EnrollmentSigner {
  kid: string;
  alg: string;
  key: KeyObject;
  publicJwk: JWK;
}

const apiSigners = new WeakMap<object, EnrollmentSigner | null>();
const controllerSigners = new WeakMap<object, EnrollmentSigner>();

/** The JOSE algorithm OpenZiti's JWT signer uses for a key of this type (RS256 for RSA, ES256/384/512 by curve). */
function algorithmOf(key: KeyObject): string | null {
  if (key.asymmetricKeyType === 'rsa') return 'RS256';
  if (key.asymmetricKeyType === 'ed25519') return 'EdDSA';
  if (key.asymmetricKeyType !== 'ec') return null;
  const curve = key.asymmetricKeyDetails?.namedCurve;
  return curve === 'prime256v1' ? 'ES256' : curve === 'secp384r1' ? 'ES384' : curve === 'secp521r1' ? 'ES512' : null;
}

/**
 * This node's API certificate as an enrollment signer, as OpenZiti signs: the TLS server certificate's private key,
 * `kid` = the lower-case hex SHA-1 of the certificate's DER. OpenZiti's SDKs and CLI verify an enrollment JWT
 * against the certificate the server named by its `iss` presents (sdk-golang `enroll.ValidateToken`), so only this
 * key makes JWTs they accept. Null without API TLS (plain HTTP: there is no certificate to check against) or for a
 * key type no JOSE algorithm fits.
 */
export function apiCertSigner(svc: Services): EnrollmentSigner | null {
  const tls = svc.pki?.apiTls;
  if (!tls) return null;
  let signer = apiSigners.get(tls);
  if (signer === undefined) {
    const key = createPrivateKey(tls.key);
    const alg = algorithmOf(key);
    const leaf = pemBlocks(tls.cert, 'CERTIFICATE')[0];
    signer =
      alg === null || leaf === undefined
        ? null
        : {
            kid: fingerprintOfDer(new X509Certificate(leaf).raw),
            alg,
            key,
            publicJwk: { ...createPublicKey(key).export({ format: 'jwk' }), kid: '', alg, use: 'sig' },
          };
    if (signer !== null) signer.publicJwk.kid = signer.kid;
    apiSigners.set(tls, signer);
  }
  return signer;
}

/** The replicated controller key (`controller-keys`, ES256): the same on every member. */
export function controllerSigner(svc: Services): EnrollmentSigner {
  const row = svc.get('controller-keys', ENROLLMENT_SIGNER_ID);
  if (!row) throw new Error('controller signing key missing');
  let signer = controllerSigners.get(row);
  if (!signer) {
    signer = {
      kid: row.kid!,
      alg: 'ES256',
      key: createPrivateKey({ key: row.privateJwk as Record<string, string>, format: 'jwk' }),
      publicJwk: row.publicJwk as JWK,
    };
    controllerSigners.set(row, signer);
  }
  return signer;
}

/**
 * The key this node signs enrollment, CA and network JWTs with: its API certificate's (apiCertSigner), or the
 * controller key on a node serving plain HTTP.
 */
export function enrollmentSigner(svc: Services): EnrollmentSigner {
  return apiCertSigner(svc) ?? controllerSigner(svc);
}

/**
 * Every key this node has signed enrollment JWTs with: its API certificate's, when it has one, and the controller
 * key (what a node serving plain HTTP signs with, and what every JWT made before the API certificate's key was
 * used was signed with). What `GET /enroll/jwks` lists and `POST /enroll/challenge` signs with.
 */
export function enrollmentSigners(svc: Services): EnrollmentSigner[] {
  const api = apiCertSigner(svc);
  const controller = svc.get('controller-keys', ENROLLMENT_SIGNER_ID) ? controllerSigner(svc) : null;
  return [...(api ? [api] : []), ...(controller ? [controller] : [])];
}

/**
 * A JWT with OpenZiti's enrollment claims (`em`, `ctrls`, iss = the first API URL, sub), `more` claims added,
 * signed with this node's enrollment signer (its API certificate's key: a client checks it against the certificate
 * `iss` serves, so the JWT names this node, whichever member later serves the enrollment). `ctrls` defaults to
 * the API base URLs of every live controller now, this one first (liveApiBaseUrls, as the network JWT's): a JWT
 * stored with its enrollment keeps the list of its creation (or refresh).
 */
async function enrollmentJwt(
  svc: Services,
  claims: { method: string; subject: string; issuedAtMs: number; ctrls?: readonly string[] },
  more: (jwt: SignJWT) => SignJWT = (jwt) => jwt,
): Promise<string> {
  const { kid, alg, key } = enrollmentSigner(svc);
  const jwt = new SignJWT({ em: claims.method, ctrls: [...(claims.ctrls ?? liveApiBaseUrls(svc))] })
    .setProtectedHeader({ alg, kid, typ: 'JWT' })
    .setIssuer(svc.config.apiBaseUrls[0] ?? '')
    .setSubject(claims.subject)
    .setAudience('')
    .setIssuedAt(Math.floor(claims.issuedAtMs / 1000));
  return more(jwt).sign(key);
}

/** Signs an enrollment JWT (claims as OpenZiti's: iss, sub = identity id, jti = token, em = method, exp). */
export function signEnrollmentJwt(
  svc: Services,
  claims: { identityId: string; token: string; method: string; expiresAtMs: number },
): Promise<string> {
  return enrollmentJwt(svc, { method: claims.method, subject: claims.identityId, issuedAtMs: svc.clock.now() }, (jwt) =>
    jwt.setJti(claims.token).setExpirationTime(Math.floor(claims.expiresAtMs / 1000)),
  );
}

/**
 * A CA's enrollment JWT (`em: "ca"`, sub = the CA's id, no expiry: CA auto-enrollment has no token to use up),
 * issued at the CA's creation.
 */
export function signCaJwt(svc: Services, ca: { id: string; createdAt: string }): Promise<string> {
  return enrollmentJwt(svc, { method: 'ca', subject: ca.id, issuedAtMs: Date.parse(ca.createdAt) });
}

/** The audience of OpenZiti's network JWT (`env.JwtAudEnrollment`). */
export const NETWORK_JWT_AUDIENCE = 'openziti-enroller';
/** The name of the one network JWT a controller lists (OpenZiti's `default`). */
export const DEFAULT_NETWORK_JWT_NAME = 'default';

/**
 * The network JWT of `GET /network-jwts`: `em: "network"`, iss = sub = the first API base URL with a trailing
 * slash (OpenZiti's `https://<edge api address>/`, where a client fetches `.well-known/est/cacerts` to trust the
 * network's CAs), aud `openziti-enroller`, a random jti, `ctrls` = the API base URLs of every live controller
 * (`ctrls`, this controller's first), no expiry; signed with this node's enrollment signer (verifiable with the
 * certificate the issuer serves, and with `GET /enroll/jwks`).
 */
export function signNetworkJwt(svc: Services, ctrls: readonly string[]): Promise<string> {
  const issuer = `${svc.config.apiBaseUrls[0] ?? ''}/`;
  return enrollmentJwt(svc, { method: 'network', subject: issuer, issuedAtMs: svc.clock.now(), ctrls }, (jwt) =>
    jwt.setIssuer(issuer).setAudience(NETWORK_JWT_AUDIENCE).setJti(randomUUID()),
  );
}
