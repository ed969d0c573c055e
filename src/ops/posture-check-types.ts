import type { Row } from '../../storage/types.js';
import { notFound } from '../api/errors.js';
import { LIST_QUERY, type OpDef, op } from '../api/op.js';
import { listEnvelope as listEnvelopeResponse, okJson } from '../api/respond.js';
import { baseEntity, detailEnvelope, listEnvelope } from '../model/common.js';
import { OS_TYPES, osType, POSTURE_CHECK_TYPES, type PostureCheckType } from '../model/posture-check.js';
import { s } from '../schema/s.js';

const postureCheckTypeDetail = s.named(
  'postureCheckTypeDetail',
  s.allOf(
    baseEntity,
    s.obj(
      {
        name: s.str(),
        operatingSystems: s.arr(s.obj({ type: osType, versions: s.arr(s.str()) }, ['type', 'versions'])),
        version: s.str(),
      },
      ['name', 'operatingSystems', 'version'],
    ),
  ),
);

/** Each type's display name and the operating systems its clients can report it on (as OpenZiti lists them). */
const TYPES: Record<PostureCheckType, { name: string; os: readonly string[] }> = {
  OS: { name: 'Operating System', os: OS_TYPES },
  PROCESS: { name: 'Process Check', os: ['Windows', 'WindowsServer', 'macOS', 'Linux'] },
  PROCESS_MULTI: { name: 'Multi Process Check', os: ['Windows', 'WindowsServer', 'macOS', 'Linux'] },
  DOMAIN: { name: 'Windows Domain', os: ['Windows', 'WindowsServer'] },
  MAC: { name: 'MAC Address', os: OS_TYPES },
  MFA: { name: 'MFA', os: OS_TYPES },
};

/** Fixed creation time of the built-in types (they are not stored). */
const BUILT_IN_AT = '2020-01-01T00:00:00.000Z';

function renderType(id: PostureCheckType): Row {
  const t = TYPES[id];
  return {
    _links: { self: { href: `./posture-check-types/${id}` } },
    createdAt: BUILT_IN_AT,
    id,
    tags: {},
    updatedAt: BUILT_IN_AT,
    name: t.name,
    operatingSystems: t.os.map((type) => ({ type, versions: ['>=0.0.0'] })),
    version: '1',
  };
}

/**
 * The posture check types: built in, listed and shown to any full session (OpenZiti v2's
 * posture_check_type_router.go: IsAuthenticated, no permission).
 */
export function postureCheckTypeOps(): OpDef<unknown>[] {
  const base = {
    apis: ['management'] as const,
    tags: ['Posture Checks'],
    access: 'authenticated' as const,
  };
  return [
    op({
      ...base,
      method: 'GET',
      path: '/posture-check-types',
      operationId: 'listPostureCheckTypes',
      summary: 'List a subset of posture check types',
      query: LIST_QUERY,
      responses: {
        200: {
          description: 'A list of posture check types',
          schema: listEnvelope('listPostureCheckTypesEnvelope', postureCheckTypeDetail),
        },
      },
      handler: () =>
        listEnvelopeResponse(
          POSTURE_CHECK_TYPES.map((id) => JSON.stringify(renderType(id))),
          { limit: POSTURE_CHECK_TYPES.length, offset: 0, totalCount: POSTURE_CHECK_TYPES.length },
          [],
        ),
    }),
    op({
      ...base,
      method: 'GET',
      path: '/posture-check-types/{id}',
      operationId: 'detailPostureCheckType',
      summary: 'Retrieves a single posture check type',
      responses: {
        200: {
          description: 'Retrieves a singular posture check type by id',
          schema: detailEnvelope('detailPostureCheckTypeEnvelope', postureCheckTypeDetail),
        },
      },
      handler: (ctx) => {
        const id = ctx.params.id as PostureCheckType;
        if (!(POSTURE_CHECK_TYPES as readonly string[]).includes(id)) throw notFound('postureCheckType', id);
        return okJson(JSON.stringify(renderType(id)));
      },
    }),
  ];
}
