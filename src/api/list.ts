import type { HttpRequest, HttpResponse } from '../../http/types.js';
import type { Collection } from '../../storage/collection.js';
import type { Row } from '../../storage/types.js';
import {
  executeQuery,
  QueryError,
  type RowSource,
  resolveListQuery,
  type SymbolTable,
} from '../../storage/zitiql/index.js';
import { fieldError, queryError } from './errors.js';
import type { OpContext } from './op.js';
import { listEnvelope } from './respond.js';
import type { Services } from './services.js';

export interface ListResult {
  rows: Row[];
  totalCount: number;
  limit: number;
  offset: number;
}

/** A collection as a ZitiQL row source, optionally restricted to a set of ids. */
export function collectionSource(c: Collection, only?: ReadonlySet<string>): RowSource<Row> {
  if (!only) {
    return {
      size: c.size,
      scan: () => c.scan(),
      get: (id) => c.get(id),
      idOf: (r) => r.id,
      lookup: (name, value) => c.lookup(name, value),
    };
  }
  const sorted = [...only].filter((id) => c.get(id)).sort();
  return {
    size: sorted.length,
    *scan() {
      for (const id of sorted) yield c.get(id)!;
    },
    get: (id) => (only.has(id) ? c.get(id) : undefined),
    idOf: (r) => r.id,
    lookup: (name, value) => {
      const ids = c.lookup(name, value);
      if (ids === undefined) return undefined;
      return [...ids].filter((id) => only.has(id));
    },
  };
}

/** Runs `filter`/`sort`/`limit`/`offset` of the request over `source`; query errors become their HTTP errors. */
export function runList(req: HttpRequest, symbols: SymbolTable, source: RowSource<Row>): ListResult {
  const q = req.query;
  try {
    const resolved = resolveListQuery(
      {
        filter: q.get('filter') ?? undefined,
        sort: q.get('sort') ?? undefined,
        limit: q.get('limit') ?? undefined,
        offset: q.get('offset') ?? undefined,
      },
      symbols,
    );
    const { rows, totalCount } = executeQuery(source, resolved.compiled, {
      limit: resolved.limit,
      offset: resolved.offset,
    });
    return { rows, totalCount, limit: resolved.limit, offset: resolved.offset };
  } catch (err) {
    if (err instanceof QueryError) throw queryError(err);
    throw err;
  }
}

/**
 * Ids matching `roleFilter` entries under `roleSemantic` (REFERENCE §5): `@id` entries match by id, `#all` matches
 * everything, `#attr` entries match by attribute (all of them for AllOf, any for AnyOf).
 */
export function roleFilterIds(
  c: Collection,
  field: string,
  roles: string[],
  semanticParam: string | null,
): Set<string> | null {
  if (roles.length === 0) return null;
  const semantic = (semanticParam ?? 'AllOf').toLowerCase();
  if (semantic !== 'allof' && semantic !== 'anyof') throw fieldError('roleSemantic', 'invalid semantic', semanticParam);
  const out = new Set<string>();
  const attrs: string[] = [];
  for (const role of roles) {
    if (role.startsWith('@')) {
      if (c.get(role.slice(1))) out.add(role.slice(1));
    } else if (role.startsWith('#')) {
      if (role === '#all') {
        for (const row of c.scan()) out.add(row.id);
        return out;
      }
      attrs.push(role.slice(1));
    } else {
      throw fieldError(
        'roleFilter',
        'role entries must prefixed with # (to indicate role attributes) or @ (to indicate a name or id)',
        role,
      );
    }
  }
  if (attrs.length === 0) return out;
  const sets = attrs.map((a) => new Set(c.lookup(field, a) ?? []));
  if (semantic === 'anyof') {
    for (const set of sets) for (const id of set) out.add(id);
  } else {
    sets.sort((a, b) => a.size - b.size);
    for (const id of sets[0]!) if (sets.every((set) => set.has(id))) out.add(id);
  }
  return out;
}

interface Listable {
  name: string;
  roleAttributesField?: string;
  symbolTable(svc: Services): SymbolTable;
}

/** The list operation of an entity: roleFilter (if declared), then the ZitiQL query and pagination. */
export function listQuery(entity: Listable, ctx: OpContext<unknown>, only?: ReadonlySet<string>): ListResult {
  const c = ctx.svc.store.collection(entity.name);
  let restrict: ReadonlySet<string> | undefined = only;
  if (entity.roleAttributesField) {
    const roles = ctx.req.query.getAll('roleFilter');
    const ids = roleFilterIds(c, entity.roleAttributesField, roles, ctx.req.query.get('roleSemantic'));
    if (ids) restrict = restrict ? new Set([...ids].filter((id) => restrict!.has(id))) : ids;
  }
  return runList(ctx.req, entity.symbolTable(ctx.svc), collectionSource(c, restrict));
}

const namesCache = new WeakMap<SymbolTable, string[]>();
/** `meta.filterableFields` of a symbol table (one array per table, so its JSON is cached too). */
export function filterableFields(symbols: SymbolTable): string[] {
  let names = namesCache.get(symbols);
  if (!names) namesCache.set(symbols, (names = symbols.publicNames()));
  return names;
}

/** `renderJson` returns the row's API representation as JSON text. */
export function listResponse(result: ListResult, renderJson: (row: Row) => string, symbols: SymbolTable): HttpResponse {
  return listEnvelope(
    result.rows.map(renderJson),
    { limit: result.limit, offset: result.offset, totalCount: result.totalCount },
    filterableFields(symbols),
  );
}
