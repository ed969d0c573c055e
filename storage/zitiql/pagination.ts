// List query parameters → compiled query + page (REFERENCE §4.1; openziti/ziti controller/internal/routes
// query_options.go getFullQuery, routes.go GetRequestPaging, models/base_model.go checkLimits).

import { type CompiledQuery, compileQuery, MAX_SORT_FIELDS } from './compile.js';
import { QueryError } from './errors.js';
import { parseQuery, parseSortSpec } from './parser.js';
import type { SymbolTable } from './symbols.js';

export const LIST_LIMIT_DEFAULT = 10;
export const LIST_LIMIT_MAX = 500;
export const LIST_OFFSET_DEFAULT = 0;
export const LIST_OFFSET_MAX = 100_000;

export interface ListQueryParams {
  filter?: string;
  sort?: string;
  limit?: string;
  offset?: string;
}

export interface ResolvedListQuery {
  compiled: CompiledQuery;
  /** -1 = none */
  limit: number;
  offset: number;
}

const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

/** strconv.ParseInt(text, 10, 64): optional sign, decimal digits, within int64. */
function parseInt64(name: 'limit' | 'offset', text: string): number {
  const fail = (): never => {
    throw new QueryError('INVALID_PAGINATION', `could not parse ${name}, value is not an integer`, {
      field: name,
      value: text,
    });
  };
  if (!/^[+-]?[0-9]+$/.test(text)) fail();
  const big = BigInt(text);
  if (big > INT64_MAX || big < INT64_MIN) fail();
  return Number(big);
}

/** checkLimits: absent, 0 or < -1 → default; > max → max; -1 (none) passes. */
export function clampLimit(limit: number | null): number {
  if (limit === null || limit === 0 || limit < -1) return LIST_LIMIT_DEFAULT;
  return Math.min(limit, LIST_LIMIT_MAX);
}

/** checkLimits: absent or < 0 → 0; > max → max. */
export function clampOffset(offset: number | null): number {
  if (offset === null || offset < 0) return LIST_OFFSET_DEFAULT;
  return Math.min(offset, LIST_OFFSET_MAX);
}

function present(value: string | undefined): value is string {
  return value !== undefined && value !== '';
}

/**
 * Resolves the `filter`, `sort`, `limit` and `offset` query params of a list operation:
 *  - limit/offset must be integers (else INVALID_PAGINATION, field 'limit' / 'offset');
 *  - the filter (empty = `true`) must parse and type-check (else INVALID_FILTER, field 'filter');
 *  - the filter's own `skip`/`limit` win over the params, then the limits are clamped;
 *  - `sort` is used only when the filter has no `sort by`; it is parsed as `true sort by <sort>` and any
 *    problem with it is INVALID_SORT_IDENTIFIER (field 'sort'), positions relative to the param.
 */
export function resolveListQuery(params: ListQueryParams, symbols: SymbolTable): ResolvedListQuery {
  const paramLimit = present(params.limit) ? parseInt64('limit', params.limit) : null;
  const paramOffset = present(params.offset) ? parseInt64('offset', params.offset) : null;

  const filterText = params.filter ?? '';
  const compiled = compileQuery(parseQuery(filterText), symbols);

  if (compiled.sort.length === 0 && present(params.sort)) {
    const sortText = params.sort;
    try {
      const sortQuery = parseSortSpec(sortText);
      compiled.sort = compileQuery(sortQuery, symbols).sort.slice(0, MAX_SORT_FIELDS);
    } catch (err) {
      if (err instanceof QueryError) throw err.withCode('INVALID_SORT_IDENTIFIER', 'sort', sortText);
      throw err;
    }
  }

  return {
    compiled,
    limit: clampLimit(compiled.limit ?? paramLimit),
    offset: clampOffset(compiled.skip ?? paramOffset),
  };
}
