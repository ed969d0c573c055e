/**
 * `POST /enrollments/{id}/refresh` (a new token and JWT for an outstanding enrollment) and
 * `POST /authenticators/{id}/re-enroll` (an authenticator reverted to an enrollment), management API.
 */

import { requireVisibleRow } from '../api/entity.js';
import { type OpDef, op } from '../api/op.js';
import { created, ok } from '../api/respond.js';
import { createEnvelope } from '../model/common.js';
import {
  adminTargetGuard,
  checkedExpiry,
  enrollmentFields,
  enrollmentSubject,
  enrollments,
} from '../model/enrollment.js';
import { s } from '../schema/s.js';
import { shortId } from '../util/ids.js';

const enrollmentRefresh = s.named('enrollmentRefresh', s.obj({ expiresAt: s.datetime() }, ['expiresAt']));
const reEnroll = s.named('reEnroll', s.obj({ expiresAt: s.datetime() }, ['expiresAt']));

/** The enrollment an authenticator reverts to: updb → updb (same username), cert → ott, cert of a CA → ottca. */
function revertedMethod(authenticator: Record<string, unknown>): { method: string; extra: Record<string, unknown> } {
  if (authenticator.method === 'updb') return { method: 'updb', extra: { username: authenticator.username } };
  if (authenticator.caId) return { method: 'ottca', extra: { caId: authenticator.caId } };
  return { method: 'ott', extra: {} };
}

export function enrollmentOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'POST',
      path: '/enrollments/{id}/refresh',
      apis: ['management'],
      operationId: 'refreshEnrollment',
      tags: ['Enrollment'],
      summary: 'Refreshes an enrollment record; returns 200',
      description:
        'For expired or unexpired enrollments, reset the expiration window. A new JWT will be generated and must be used for the enrollment.',
      access: 'admin',
      permission: 'enrollment',
      permissionAction: 'update',
      body: enrollmentRefresh,
      bodyName: 'refresh',
      responses: {
        200: {
          description: 'The create request was successful and the resource has been added at the following location',
          schema: createEnvelope,
        },
      },
      handler: async ({ params, body, svc, caller }) => {
        const row = requireVisibleRow(enrollments, svc, caller, params.id!);
        const expect = adminTargetGuard(svc, caller, row.identityId);
        const expiresAtMs = checkedExpiry(svc, body.expiresAt);
        // a new token: the old token and JWT enroll nothing any more
        const fresh = await enrollmentFields(svc, enrollmentSubject(row), row.method!, expiresAtMs);
        const { token, jwt, expiresAt } = fresh;
        // the write applies only to the enrollment the token was read from (deleted or used meanwhile: 404)
        await svc.write({
          op: 'update',
          entity: 'enrollments',
          id: row.id,
          set: { token, jwt, expiresAt },
          at: svc.nowIso(),
          ...(expect.length > 0 ? { expect } : {}),
        });
        return ok({ _links: { self: { href: `./enrollments/${row.id}` } }, id: row.id });
      },
    }),
    op({
      method: 'POST',
      path: '/authenticators/{id}/re-enroll',
      apis: ['management'],
      operationId: 'reEnrollAuthenticator',
      tags: ['Authenticator'],
      summary: 'Reverts an authenticator to an enrollment',
      description:
        'Allows an authenticator to be reverted to an enrollment and allows re-enrollment to occur. The source authenticator is deleted.',
      // authenticator writes are for admins only (as OpenZiti's authenticator router)
      access: 'admin',
      body: reEnroll,
      bodyName: 'reEnroll',
      responses: {
        201: {
          description: 'The create request was successful and the resource has been added at the following location',
          schema: createEnvelope,
        },
      },
      handler: async ({ params, body, svc }) => {
        const authenticator = svc.require('authenticators', params.id!);
        const expiresAtMs = checkedExpiry(svc, body.expiresAt);
        const identityId = authenticator.identityId!;
        const { method, extra } = revertedMethod(authenticator);
        const data = { ...(await enrollmentFields(svc, identityId, method, expiresAtMs)), ...extra };
        const id = shortId();
        const at = svc.nowIso();
        // one write: the authenticator goes, the enrollment comes (409 ENROLLMENT_EXISTS if one of the method is out)
        await svc.write({
          op: 'batch',
          ops: [
            { op: 'delete', entity: 'authenticators', id: authenticator.id, at },
            { op: 'create', entity: 'enrollments', id, at, data },
          ],
        });
        return created('enrollments', id);
      },
    }),
  ];
}
