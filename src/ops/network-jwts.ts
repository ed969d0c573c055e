/**
 * `GET /network-jwts` (both APIs, no session; docs/pki.md): the network JWT a client uses to trust this network
 * before it has an identity. Its `ctrls` name every live controller's API base URLs (in a cluster, every member
 * that answers this node's status polls), so an SDK can fail over to another controller. Signed once per process
 * and per address set, as OpenZiti caches it.
 */
import { type ApiName, type OpDef, op } from '../api/op.js';
import { ok } from '../api/respond.js';
import type { Services } from '../api/services.js';
import { liveApiBaseUrls } from '../cluster/live-api-urls.js';
import { meta } from '../model/common.js';
import { DEFAULT_NETWORK_JWT_NAME, signNetworkJwt } from '../pki/enrollment-jwt.js';
import { s } from '../schema/s.js';

const BOTH: ApiName[] = ['client', 'management'];

const networkJwt = s.named('networkJWT', s.obj({ name: s.str(), token: s.str() }, ['name', 'token']));
const envelope = s.named(
  'listNetworkJWTsEnvelope',
  s.obj({ data: s.named('networkJWTList', s.arr(networkJwt)), meta }, ['meta', 'data']),
);

/** The signed token per Services, for the addresses it names (a failed signing is not kept: the next call retries). */
const cache = new WeakMap<Services, { key: string; token: Promise<string> }>();

function networkToken(svc: Services): Promise<string> {
  const ctrls = liveApiBaseUrls(svc);
  const key = ctrls.join('|');
  const hit = cache.get(svc);
  if (hit && hit.key === key) return hit.token;
  const token = signNetworkJwt(svc, ctrls);
  cache.set(svc, { key, token });
  token.catch(() => {
    if (cache.get(svc)?.token === token) cache.delete(svc);
  });
  return token;
}

export function networkJwtOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'GET',
      path: '/network-jwts',
      apis: BOTH,
      operationId: 'listNetworkJWTs',
      tags: ['Enrollment'],
      summary: 'Returns a list of JWTs for trusting a network',
      description: 'Returns a list of JWTs for trusting a network',
      access: 'none',
      responses: { 200: { description: 'A list of network JWTs', schema: envelope } },
      handler: async ({ svc }) => ok([{ name: DEFAULT_NETWORK_JWT_NAME, token: await networkToken(svc) }]),
    }),
  ];
}
