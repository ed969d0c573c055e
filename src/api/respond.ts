import { dataEnvelope } from '../../http/errors.js';
import type { HttpResponse } from '../../http/types.js';

export function ok(data: unknown, meta: object = {}): HttpResponse {
  return dataEnvelope(data, meta);
}

const JSON_HEADERS = Object.freeze({ 'content-type': 'application/json' });

/** 200 with `data` already serialized. */
export function okJson(dataJson: string): HttpResponse {
  return { status: 200, headers: JSON_HEADERS, body: `{"data":${dataJson},"meta":{}}` };
}

const EMPTY: HttpResponse = dataEnvelope({}, {});

/** 200 `{"data":{},"meta":{}}` (update, patch, delete and other actions). */
export function okEmpty(): HttpResponse {
  return EMPTY;
}

/** 201 with the created entity's id and `_links.self`. */
export function created(entity: string, id: string): HttpResponse {
  // written by hand (every create answers this): the same text JSON.stringify makes of the envelope
  const href = JSON.stringify(`./${entity}/${id}`);
  return {
    status: 201,
    headers: JSON_HEADERS,
    body: `{"data":{"_links":{"self":{"href":${href}}},"id":${JSON.stringify(id)}},"meta":{}}`,
  };
}

const fieldsJsonCache = new WeakMap<string[], string>();
/** Symbol tables hand out the same array each time: serialize it once. */
function fieldsJson(fields: string[]): string {
  let json = fieldsJsonCache.get(fields);
  if (json === undefined) fieldsJsonCache.set(fields, (json = JSON.stringify(fields)));
  return json;
}

/** int64 max: what OpenZiti reports as the limit of an unlimited (`limit none` / `limit=-1`) list. */
const NO_LIMIT = '9223372036854775807';

/**
 * A list envelope from already-serialized items; the pagination JSON is written by hand so that "no limit" keeps
 * Go's int64 value exactly.
 */
export function listEnvelope(
  itemsJson: string[],
  page: { limit: number; offset: number; totalCount: number } | null,
  filterableFields: string[],
): HttpResponse {
  const parts = [`"filterableFields":${fieldsJson(filterableFields)}`];
  if (page) {
    const limit = page.limit < 0 ? NO_LIMIT : String(page.limit);
    parts.push(`"pagination":{"limit":${limit},"offset":${page.offset},"totalCount":${page.totalCount}}`);
  }
  return {
    status: 200,
    headers: JSON_HEADERS,
    body: `{"data":[${itemsJson.join(',')}],"meta":{${parts.join(',')}}}`,
  };
}
