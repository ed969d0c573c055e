import { type Schema, s } from '../schema/s.js';
import type { EntityName } from './index.js';

/**
 * The stored `configs` of an entity that names configs (services, routers): config ids, cleared from the list when
 * a config is deleted.
 */
export const configIdsField = {
  type: 'string',
  set: true,
  ref: { entity: 'configs', onDelete: 'clear' },
  body: s.nullable(s.arr(s.str())),
  api: true,
  default: [] as string[],
} as const;

/** Shared wire shapes (management.yml / client.yml definitions of the same names). */
export const tags = s.named('tags', { ...s.map(true), nullable: true } as Schema<Record<string, unknown> | null>);
export const attributes = s.named('attributes', s.nullable(s.arr(s.str())));
export const roles = s.named('roles', s.arr(s.str()));
export const link = s.named('link', s.obj({ href: s.str(), method: s.str(), comment: s.str() }, ['href']));
export const links = s.named('links', s.map(link));
export const entityRef = s.named('entityRef', s.obj({ _links: links, entity: s.str(), id: s.str(), name: s.str() }));
export const baseEntity = s.named(
  'baseEntity',
  s.obj({ _links: links, createdAt: s.datetime(), id: s.str(), tags, updatedAt: s.datetime() }, [
    'id',
    'createdAt',
    'updatedAt',
    '_links',
  ]),
);
export const pagination = s.named(
  'pagination',
  s.obj({ limit: s.num(), offset: s.num(), totalCount: s.num() }, ['limit', 'offset', 'totalCount']),
);
export const meta = s.named(
  'meta',
  s.obj({
    apiEnrollmentVersion: s.str(),
    apiVersion: s.str(),
    filterableFields: s.arr(s.str()),
    pagination,
  }),
);
export const empty = s.named('empty', s.obj({ data: s.obj({}), meta }, ['data', 'meta']));
export const createLocation = s.named('createLocation', s.obj({ _links: links, id: s.str() }));
export const createEnvelope = s.named('createEnvelope', s.obj({ data: createLocation, meta }));
export const envInfo = s.named(
  'envInfo',
  s.obj({
    arch: s.str({ maxLength: 255 }),
    domain: s.str({ maxLength: 253 }),
    hostname: s.str({ maxLength: 253 }),
    os: s.str({ maxLength: 255 }),
    osRelease: s.str({ maxLength: 255 }),
    osVersion: s.str({ maxLength: 255 }),
  }),
);
export const sdkInfo = s.named(
  'sdkInfo',
  s.obj({
    appId: s.str({ maxLength: 255 }),
    appVersion: s.str({ maxLength: 255 }),
    branch: s.str({ maxLength: 255 }),
    revision: s.str({ maxLength: 255 }),
    type: s.str({ maxLength: 255 }),
    version: s.str({ maxLength: 255 }),
  }),
);
export const apiErrorEnvelope = s.named(
  'apiErrorEnvelope',
  s.obj(
    {
      error: s.named(
        'apiError',
        s.obj({
          cause: s.any(),
          code: s.str(),
          data: s.map(true),
          message: s.str(),
          requestId: s.str(),
        }),
      ),
      meta,
    },
    ['meta', 'error'],
  ),
);

export function detailEnvelope<T>(name: string, detail: Schema<T>) {
  return s.named(name, s.obj({ data: detail, meta }, ['meta', 'data']));
}

export function listEnvelope<T>(name: string, detail: Schema<T>) {
  return s.named(name, s.obj({ data: s.arr(detail), meta }, ['meta', 'data']));
}

/** `{ entity, id, name, _links }` pointing at another resource (its name, when it has one). */
export function ref(entity: EntityName, id: string, name: string | null | undefined): Record<string, unknown> {
  return { _links: { self: { href: `./${entity}/${id}` } }, entity, id, name: name ?? '' };
}
