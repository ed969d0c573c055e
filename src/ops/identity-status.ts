import { Errors, fieldError } from '../api/errors.js';
import { type OpDef, op } from '../api/op.js';
import { okEmpty } from '../api/respond.js';
import { empty } from '../model/common.js';
import { guardAdminTarget } from '../model/preconditions.js';
import type { Command } from '../model/rows.js';
import { s } from '../schema/s.js';

/** A disable longer than ten years is an indefinite one: say 0. */
const MAX_DISABLE_MINUTES = 5_256_000;

const disableParams = s.named('disableParams', s.obj({ durationMinutes: s.int() }, ['durationMinutes']));

/** `POST /identities/{id}/disable` and `/enable` (management, `identity.update` as OpenZiti files them). */
export function identityStatusOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'POST',
      path: '/identities/{id}/disable',
      apis: ['management'],
      operationId: 'disableIdentity',
      tags: ['Identity'],
      summary: 'Set an identity as disabled',
      description: "Reject an identity's API session requests for N minutes or indefinitely if 0.",
      access: 'admin',
      permission: 'identity',
      permissionAction: 'update',
      body: disableParams,
      bodyName: 'disable',
      responses: { 200: { description: 'Base empty response', schema: empty } },
      handler: async ({ body, params, svc, caller }) => {
        const minutes = body.durationMinutes;
        if (minutes < 0 || minutes > MAX_DISABLE_MINUTES) {
          throw fieldError('durationMinutes', `must be between 0 and ${MAX_DISABLE_MINUTES}`, minutes);
        }
        const target = svc.require('identities', params.id!);
        // only admins act on admins: refused now if the local state shows one, and re-checked inside apply
        const expect = guardAdminTarget(caller, target.isAdmin === true, target.id);
        if (target.isDefaultAdmin === true) {
          throw Errors.ENTITY_CAN_NOT_BE_UPDATED({
            code: 'UNHANDLED',
            message: 'the default admin cannot be disabled',
          });
        }
        const at = svc.nowIso();
        const disable: Command = {
          op: 'custom',
          name: 'disableIdentity',
          args: { id: target.id, durationMinutes: minutes },
          at,
        };
        await svc.write({ op: 'batch', ops: [disable], expect });
        return okEmpty();
      },
    }),
    op({
      method: 'POST',
      path: '/identities/{id}/enable',
      apis: ['management'],
      operationId: 'enableIdentity',
      tags: ['Identity'],
      summary: 'Clears all disabled state from an identity',
      description: 'Allows an admin to remove disabled statuses from an identity.',
      access: 'admin',
      permission: 'identity',
      permissionAction: 'update',
      responses: { 200: { description: 'Base empty response', schema: empty } },
      handler: async ({ params, svc, caller }) => {
        const target = svc.require('identities', params.id!);
        const expect = guardAdminTarget(caller, target.isAdmin === true, target.id);
        const enable: Command = { op: 'custom', name: 'enableIdentity', args: { id: target.id }, at: svc.nowIso() };
        await svc.write({ op: 'batch', ops: [enable], expect });
        return okEmpty();
      },
    }),
  ];
}
