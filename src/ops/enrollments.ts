/** `POST /enrollments/{id}/refresh` (management): a new token and JWT for an outstanding enrollment. */
import { type OpDef, op } from '../api/op.js';
import { ok } from '../api/respond.js';
import { createEnvelope } from '../model/common.js';
import { checkedExpiry, enrollmentFields } from '../model/enrollment.js';
import { s } from '../schema/s.js';

const enrollmentRefresh = s.named('enrollmentRefresh', s.obj({ expiresAt: s.datetime() }, ['expiresAt']));

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
      body: enrollmentRefresh,
      bodyName: 'refresh',
      responses: {
        200: {
          description: 'The create request was successful and the resource has been added at the following location',
          schema: createEnvelope,
        },
      },
      handler: async ({ params, body, svc }) => {
        const row = svc.require('enrollments', params.id!);
        const expiresAtMs = checkedExpiry(svc, body.expiresAt);
        // a new token: the old token and JWT enroll nothing any more
        const fresh = await enrollmentFields(svc, row.identityId as string, row.method as string, expiresAtMs);
        const { token, jwt, expiresAt } = fresh;
        // the write applies only to the enrollment the token was read from (deleted or used meanwhile: 404)
        await svc.write({
          op: 'update',
          entity: 'enrollments',
          id: row.id,
          set: { token, jwt, expiresAt },
          at: svc.nowIso(),
        });
        return ok({ _links: { self: { href: `./enrollments/${row.id}` } }, id: row.id });
      },
    }),
  ];
}
