import { createHash, randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from 'jose';
import type { Services } from '../api/services.js';
import { liveApiBaseUrls } from '../cluster/live-api-urls.js';
import type { Command } from '../model/rows.js';

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

const keyCache = new WeakMap<object, Awaited<ReturnType<typeof importJWK>>>();

/** The controller's signing key row and its imported private key. */
async function signer(svc: Services) {
  const row = svc.get('controller-keys', ENROLLMENT_SIGNER_ID);
  if (!row) throw new Error('controller signing key missing');
  let key = keyCache.get(row);
  if (!key) {
    key = await importJWK(row.privateJwk as JWK, 'ES256');
    keyCache.set(row, key);
  }
  return { kid: row.kid!, key };
}

/**
 * A JWT with OpenZiti's enrollment claims (`em`, `ctrls`, iss = the first API URL, sub), `more` claims added,
 * signed with the controller key (replicated: every member verifies what any member signed). `ctrls` defaults to
 * the API base URLs of every live controller now, this one first (liveApiBaseUrls, as the network JWT's): a JWT
 * stored with its enrollment keeps the list of its creation (or refresh).
 */
async function enrollmentJwt(
  svc: Services,
  claims: { method: string; subject: string; issuedAtMs: number; ctrls?: readonly string[] },
  more: (jwt: SignJWT) => SignJWT = (jwt) => jwt,
): Promise<string> {
  const { kid, key } = await signer(svc);
  const jwt = new SignJWT({ em: claims.method, ctrls: [...(claims.ctrls ?? liveApiBaseUrls(svc))] })
    .setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT' })
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
 * (`ctrls`, this controller's first), no expiry; signed with the controller key (verifiable with
 * `GET /enroll/jwks`).
 */
export function signNetworkJwt(svc: Services, ctrls: readonly string[]): Promise<string> {
  const issuer = `${svc.config.apiBaseUrls[0] ?? ''}/`;
  return enrollmentJwt(svc, { method: 'network', subject: issuer, issuedAtMs: svc.clock.now(), ctrls }, (jwt) =>
    jwt.setIssuer(issuer).setAudience(NETWORK_JWT_AUDIENCE).setJti(randomUUID()),
  );
}
