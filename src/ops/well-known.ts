import type { HttpResponse } from '../../http/types.js';
import { type ApiName, type OpDef, op } from '../api/op.js';

const BOTH: ApiName[] = ['client', 'management'];
const PKCS7_HEADERS = Object.freeze({
  'content-type': 'application/pkcs7-mime',
  'content-transfer-encoding': 'base64',
});

/**
 * `GET /.well-known/est/cacerts` (RFC 7030 §4.1): the CAs a client should trust, as a base64 PKCS#7 certs-only
 * bundle. `cacerts()` returns the body, computed once at start from the node's PKI (src/pki).
 */
export function wellKnownOps(cacerts: () => string): OpDef<unknown>[] {
  return [
    op({
      method: 'GET',
      path: '/.well-known/est/cacerts',
      apis: BOTH,
      operationId: 'listWellKnownCas',
      tags: ['Well Known'],
      summary: 'Get CA Cert Store',
      description:
        'Returns a base64 encoded PKCS7 store of the CAs used to bootstrap trust between enrolling clients and the API.',
      access: 'none',
      produces: ['application/pkcs7-mime'],
      responses: { 200: { description: 'A base64 encoded PKCS7 store' } },
      handler: (): HttpResponse => ({ status: 200, headers: PKCS7_HEADERS, body: cacerts() }),
    }),
  ];
}
