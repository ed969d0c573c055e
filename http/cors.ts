// OpenZiti's CORS behaviour: gorilla/handlers v1.5.2 `CORS(...)` configured as in
// openziti/ziti controller/api/cors.go — AllowedOrigins(*), OptionStatusCode(200),
// AllowedHeaders(content-type, accept, authorization, zt-session),
// AllowedMethods(GET, HEAD, POST, PUT, PATCH, DELETE), AllowCredentials().
//
// What that produces on the wire:
// - no `Origin` (or an empty one): not a CORS request. A plain OPTIONS is answered 200 with an
//   empty body (gorilla swallows it); any other method passes through untouched.
// - preflight (`OPTIONS` with `Origin`):
//     no `Access-Control-Request-Method` header     → 400, empty body, no CORS headers
//     method not in the allowed list (exact match)  → 405, empty body, no CORS headers
//     a requested header that is not allowed        → 403, empty body, no CORS headers
//     otherwise → 200, empty body, with
//       Access-Control-Allow-Headers: the requested non-simple headers, canonicalised, joined by ','
//                                     (absent when none were requested)
//       Access-Control-Allow-Methods: the requested method, only when it is not GET/HEAD/POST
//       Access-Control-Allow-Credentials: true
//       Access-Control-Allow-Origin: *      (a `*` configuration is never echoed back)
// - actual request with `Origin`: Access-Control-Allow-Credentials: true and
//   Access-Control-Allow-Origin: * are added to the response, whatever its status.
import type { HttpHeaders, HttpResponse } from './types.js';

export const CORS_ALLOWED_METHODS: readonly string[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
const SIMPLE_METHODS: readonly string[] = ['GET', 'HEAD', 'POST'];
/** gorilla's default headers, always allowed and never listed back. */
const SIMPLE_HEADERS: readonly string[] = ['Accept', 'Accept-Language', 'Content-Language', 'Origin'];
export const CORS_ALLOWED_HEADERS: readonly string[] = [
  ...SIMPLE_HEADERS,
  'Content-Type',
  'Authorization',
  'Zt-Session',
];
/** Bound on the comma-separated entries of Access-Control-Request-Headers that are examined. */
const MAX_REQUEST_HEADERS = 64;

/** Headers added to every non-preflight response of a request that carries an Origin. */
export const CORS_RESPONSE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'access-control-allow-credentials': 'true',
  'access-control-allow-origin': '*',
});

const TOKEN_CHAR = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Go's `http.CanonicalHeaderKey`: `content-type` → `Content-Type`; keys with non-token bytes are left as is. */
export function canonicalHeaderKey(key: string): string {
  if (!TOKEN_CHAR.test(key)) return key;
  let out = '';
  let upper = true;
  for (let i = 0; i < key.length; i++) {
    const c = key[i]!;
    out += upper ? c.toUpperCase() : c.toLowerCase();
    upper = c === '-';
  }
  return out;
}

/** True when the request carries a non-empty Origin header (gorilla ignores the others). */
export function hasOrigin(headers: Record<string, string>): boolean {
  const origin = headers.origin;
  return origin !== undefined && origin !== '';
}

function empty(status: number, headers?: HttpHeaders): HttpResponse {
  return headers === undefined ? { status } : { status, headers };
}

/** The answer to an OPTIONS request when CORS is on (the router is never consulted). */
export function corsOptionsResponse(headers: Record<string, string>): HttpResponse {
  if (!hasOrigin(headers)) return empty(200);
  const method = headers['access-control-request-method'];
  if (method === undefined) return empty(400);
  if (!CORS_ALLOWED_METHODS.includes(method)) return empty(405);

  const allowed: string[] = [];
  const requested = headers['access-control-request-headers'];
  if (requested !== undefined) {
    const parts = requested.split(',', MAX_REQUEST_HEADERS);
    for (const part of parts) {
      const name = canonicalHeaderKey(part.trim());
      if (name === '' || SIMPLE_HEADERS.includes(name)) continue;
      if (!CORS_ALLOWED_HEADERS.includes(name)) return empty(403);
      allowed.push(name);
    }
  }
  const out: Record<string, string> = {};
  if (allowed.length > 0) out['access-control-allow-headers'] = allowed.join(',');
  if (!SIMPLE_METHODS.includes(method)) out['access-control-allow-methods'] = method;
  out['access-control-allow-credentials'] = 'true';
  out['access-control-allow-origin'] = '*';
  return empty(200, out);
}
