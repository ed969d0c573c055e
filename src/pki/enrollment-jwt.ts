import { createHash } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from 'jose';
import type { Command } from '../../storage/types.js';
import type { Services } from '../api/services.js';

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

/** Signs an enrollment JWT (claims as OpenZiti's: iss, sub = identity id, jti = token, em = method, exp). */
export async function signEnrollmentJwt(
  svc: Services,
  claims: { identityId: string; token: string; method: string; expiresAtMs: number },
): Promise<string> {
  const row = svc.get('controller-keys', ENROLLMENT_SIGNER_ID);
  if (!row) throw new Error('controller signing key missing');
  let key = keyCache.get(row);
  if (!key) {
    key = await importJWK(row.privateJwk as JWK, 'ES256');
    keyCache.set(row, key);
  }
  const issuer = svc.config.apiBaseUrls[0] ?? '';
  return new SignJWT({ em: claims.method, ctrls: svc.config.apiBaseUrls })
    .setProtectedHeader({ alg: 'ES256', kid: row.kid as string, typ: 'JWT' })
    .setIssuer(issuer)
    .setSubject(claims.identityId)
    .setJti(claims.token)
    .setAudience('')
    .setIssuedAt(Math.floor(svc.clock.now() / 1000))
    .setExpirationTime(Math.floor(claims.expiresAtMs / 1000))
    .sign(key);
}
