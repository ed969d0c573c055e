/** `PUT /identities/{id}/trace` (management updateIdentityTracing; docs/operations.md, "Identity tracing"). */
import { fieldError } from '../api/errors.js';
import { type OpDef, op } from '../api/op.js';
import { ok } from '../api/respond.js';
import { detailEnvelope } from '../model/common.js';
import { s } from '../schema/s.js';
import { parseGoDuration } from '../util/go-duration.js';
import { uuid } from '../util/ids.js';

/** Bounds of a trace: its duration, its channel list and each channel name, its trace id. */
export const MAX_TRACE_DURATION_MS = 24 * 60 * 60 * 1000;
export const MAX_TRACE_CHANNELS = 16;
const MAX_NAME = 128;

const traceSpec = s.named(
  'traceSpec',
  s.obj({
    channels: s.arr(s.str({ maxLength: MAX_NAME }), { maxItems: MAX_TRACE_CHANNELS }),
    duration: s.str({ maxLength: 64 }),
    enabled: s.bool(),
    traceId: s.str({ maxLength: MAX_NAME }),
  }),
);
const traceDetail = s.named('traceDetail', s.obj({ enabled: s.bool(), traceId: s.str(), until: s.datetime() }));

export function identityTraceOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'PUT',
      path: '/identities/{id}/trace',
      apis: ['management'],
      operationId: 'updateIdentityTracing',
      tags: ['Identity', 'Tracing'],
      summary: 'Enable/disable data flow tracing for an identity',
      description:
        'Turns tracing of an identity on for `duration` (Go syntax, e.g. `10m`; at most 24h) with `traceId` (a new ' +
        'UUID when empty) and `channels` (default all), or off. Keel records it; it has no data plane to trace yet.',
      access: 'admin',
      permission: 'identity',
      body: traceSpec,
      bodyName: 'traceSpec',
      responses: {
        200: {
          description: 'Returns the document that represents the trace state',
          schema: detailEnvelope('traceDetailEnvelope', traceDetail),
        },
      },
      handler: async ({ params, body, svc }) => {
        const identity = svc.require('identities', params.id!);
        const at = svc.nowIso();
        // a trace row's id is its identity's: the previous one is replaced in the same batch (or removed)
        const clear = {
          op: 'delete' as const,
          entity: 'identity-traces' as const,
          id: identity.id,
          at,
          ifExists: true,
        };
        if (body.enabled !== true) {
          await svc.write(clear);
          return ok({ enabled: false });
        }
        const duration = body.duration ?? '';
        const ms = parseGoDuration(duration);
        if (ms === null) throw fieldError('duration', `invalid duration "${duration}"`, duration);
        if (ms <= 0 || ms > MAX_TRACE_DURATION_MS) {
          throw fieldError('duration', 'duration must be more than 0 and at most 24h', duration);
        }
        const traceId = body.traceId !== undefined && body.traceId !== '' ? body.traceId : uuid();
        const channels =
          (body.channels ?? []).length === 0 || body.channels!.includes('all') ? ['all'] : body.channels!;
        const until = new Date(svc.clock.now() + ms).toISOString();
        const data = { identityId: identity.id, traceId, until, channels: [...new Set(channels)] };
        await svc.write({
          op: 'batch',
          ops: [clear, { op: 'create', entity: 'identity-traces', id: identity.id, data, at }],
        });
        return ok({ enabled: true, traceId, until });
      },
    }),
  ];
}
