/**
 * Router enrollment operations (docs/enrollment.md, "Routers"): client `POST /enroll/erott` (the spec's form for
 * edge routers; routers also use the legacy `POST /enroll?method=erott|trott`, src/ops/enroll.ts), client
 * `POST /enroll/extend/router` (edge and transit routers, over mutual TLS with the router's current client
 * certificate) and management `POST /edge-routers/{id}/re-enroll`.
 */
import { type OpDef, op } from '../api/op.js';
import { ok, okEmpty } from '../api/respond.js';
import { enrollRouter, extendRouter, reEnrollRouter } from '../auth/router-enrollment.js';
import { empty } from '../model/common.js';
import { ROUTER_ENROLL_METHOD } from '../model/router-enrollment.js';
import { s } from '../schema/s.js';
import { enrollmentCertsEnvelope } from './enroll.js';

const erOttEnrollmentRequest = s.named(
  'erOttEnrollmentRequest',
  s.obj({ clientCsr: s.str(), serverCsr: s.str(), token: s.str() }),
);
const routerExtendEnrollmentRequest = s.named(
  'routerExtendEnrollmentRequest',
  s.obj({ certCsr: s.str(), serverCertCsr: s.str() }, ['serverCertCsr', 'certCsr']),
);

export function routerEnrollOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'POST',
      path: '/enroll/erott',
      apis: ['client'],
      operationId: 'enrollErOtt',
      tags: ['Enroll'],
      summary: 'Enroll an edge-router',
      description: 'Enrolls an edge-router via a one-time-token to establish a certificate based identity.',
      access: 'none',
      catchUpFirst: true,
      body: erOttEnrollmentRequest,
      bodyName: 'erOttEnrollmentRequest',
      responses: {
        200: {
          description: 'A response containing the edge routers signed certificates (server chain, server cert, CAs).',
          schema: enrollmentCertsEnvelope,
        },
      },
      handler: async ({ body, svc }) =>
        ok(await enrollRouter(svc, ROUTER_ENROLL_METHOD, body.token, body.serverCsr, body.clientCsr)),
    }),
    op({
      method: 'POST',
      path: '/enroll/extend/router',
      apis: ['client'],
      operationId: 'extendRouterEnrollment',
      tags: ['Enroll', 'Extend Enrollment'],
      summary: 'Extend the life of a currently enrolled router',
      description:
        'A router presents its current client certificate (mutual TLS) and CSRs for new client and server certificates; the new client certificate replaces the old one at once.',
      access: 'none',
      body: routerExtendEnrollmentRequest,
      bodyName: 'routerExtendEnrollmentRequest',
      responses: {
        200: {
          description:
            'A response containing the edge routers new signed certificates (server chain, server cert, CAs).',
          schema: enrollmentCertsEnvelope,
        },
      },
      handler: async ({ req, body, svc }) => ok(await extendRouter(svc, req.peerCertificates, body)),
    }),
    op({
      method: 'POST',
      path: '/edge-routers/{id}/re-enroll',
      apis: ['management'],
      operationId: 'reEnrollEdgeRouter',
      tags: ['Edge Router'],
      summary: 'Re-enroll an edge router',
      description:
        "Removes the edge router's certificate and reverts it to an outstanding enrollment with a new JWT; a previous enrollment JWT enrolls nothing any more.",
      access: 'admin',
      permission: 'router',
      permissionAction: 'update',
      responses: { 200: { description: 'Base empty response', schema: empty } },
      handler: async ({ params, svc }) => {
        await reEnrollRouter(svc, params.id!);
        return okEmpty();
      },
    }),
  ];
}
