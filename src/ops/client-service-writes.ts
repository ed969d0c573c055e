/**
 * `PUT`, `PATCH` and `DELETE /services/{id}` on the client API. OpenZiti's client.yml declares them, but its
 * controller registers no handler for them (services are written on the management API), so go-swagger's default
 * answers: after the session check (401 without a valid session) and the body's validation (400), `501` with
 * "operation service.<Op> has not yet been implemented". Keel answers the same, in OpenZiti's error envelope
 * (code `NOT_IMPLEMENTED`), and changes nothing.
 */
import { ApiError } from '../api/errors.js';
import { type Method, type OpDef, op } from '../api/op.js';
import { empty } from '../model/common.js';
import { services } from '../model/service.js';

function notImplemented(operation: string): ApiError {
  return new ApiError('NOT_IMPLEMENTED', 501, `operation service.${operation} has not yet been implemented`);
}

export function clientServiceWriteOps(): OpDef<unknown>[] {
  const writes: [Method, string, 'update' | 'patch' | null][] = [
    ['PUT', 'UpdateService', 'update'],
    ['PATCH', 'PatchService', 'patch'],
    ['DELETE', 'DeleteService', null],
  ];
  return writes.map(([method, name, body]) =>
    op<unknown>({
      method,
      path: '/services/{id}',
      apis: ['client'],
      operationId: `${name[0]!.toLowerCase()}${name.slice(1)}`,
      tags: ['Service'],
      summary: 'Not served on the client API (services are written on the management API): 501',
      // go-swagger checks the token before answering (any session, as no handler asks for more)
      access: 'partial',
      ...(body ? { body: services[body]!, bodyName: 'service' } : {}),
      responses: { 200: { description: 'Never: the client API does not write services', schema: empty } },
      handler: () => {
        throw notImplemented(name);
      },
    }),
  );
}
