import type { HttpRequest, HttpResponse } from '../../http/types.js';
import type { Collection } from '../../storage/collection.js';
import type { Row } from '../../storage/types.js';
import { assert } from '../../storage/types.js';
import {
  type CompiledQuery,
  executeQuery,
  type ListQueryParams,
  QueryError,
  type ResolvedListQuery,
  type RowSource,
  resolveListQuery,
  type SymbolTable,
} from '../../storage/zitiql/index.js';
import type { EntityName } from '../model/index.js';
import { fieldError, queryError } from './errors.js';
import type { Caller, OpContext } from './op.js';
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
      rows: () => c.rowsInOrder(),
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

/**
 * Rows in one list response, even for `limit=-1` / `limit none` (which OpenZiti leaves unbounded): a bigger
 * answer is cut to this many rows and `meta.pagination.limit` then says LIST_ROW_CAP instead of "none"; page on
 * with `offset`. (An uncut answer reports "none", 9223372036854775807, as OpenZiti does.)
 */
export const LIST_ROW_CAP = 2000;
/** Sources up to this many rows (or queries an index narrows) are run synchronously, in one go. */
export const SYNC_SCAN_ROWS = 4096;
/** Rows read or filtered between two yields to the event loop when a big source is scanned. */
export const SCAN_CHUNK_ROWS = 1024;
/** Tries at a chunked snapshot of a source that keeps changing before taking one in a single step. */
const SNAPSHOT_ATTEMPTS = 3;

export type ListParams = ListQueryParams;

/** The list parameters of a request, as OpenZiti's list routes read them. */
export function listParams(req: HttpRequest): ListParams {
  const q = req.query;
  return {
    filter: q.get('filter') ?? undefined,
    sort: q.get('sort') ?? undefined,
    limit: q.get('limit') ?? undefined,
    offset: q.get('offset') ?? undefined,
  };
}

function resolve(params: ListParams, symbols: SymbolTable): ResolvedListQuery {
  try {
    return resolveListQuery(params, symbols);
  } catch (err) {
    if (err instanceof QueryError) throw queryError(err);
    throw err;
  }
}

const yieldToEventLoop = (): Promise<void> => new Promise((done) => setImmediate(done));

/**
 * The rows of a source in id order: at once when the source can capture them cheaply (a whole collection), else
 * read SCAN_CHUNK_ROWS at a time with a yield between chunks. A write that
 * lands meanwhile (`version` moves) restarts the read, so the result is one consistent state; after
 * SNAPSHOT_ATTEMPTS tries it is read in one step. Rows are immutable, so holding them is a snapshot.
 */
async function snapshot(source: RowSource<Row>, version: (() => number) | undefined): Promise<Row[]> {
  // a whole collection is captured in one step (a copy of its ordered chunks: about 1 ms for 130 000 rows)
  if (source.rows !== undefined) return source.rows();
  if (version === undefined) return Array.from(source.scan());
  for (let attempt = 0; attempt < SNAPSHOT_ATTEMPTS; attempt++) {
    const seen = version();
    const rows: Row[] = [];
    const it = source.scan()[Symbol.iterator]();
    let complete = false;
    while (version() === seen) {
      for (let n = 0; n < SCAN_CHUNK_ROWS; n++) {
        const next = it.next();
        if (next.done === true) {
          complete = true;
          break;
        }
        rows.push(next.value);
      }
      if (complete) return rows;
      await yieldToEventLoop();
    }
  }
  return Array.from(source.scan());
}

/**
 * Filters rows in chunks of SCAN_CHUNK_ROWS, yielding to the event loop between chunks, so one expensive
 * filter (`icontains` over 100k rows) cannot hold every other request.
 */
async function filterInChunks(all: Row[], q: CompiledQuery): Promise<Row[]> {
  const matches: Row[] = [];
  const predicate = q.predicate;
  for (let start = 0; start < all.length; start += SCAN_CHUNK_ROWS) {
    if (start > 0) await yieldToEventLoop();
    const end = Math.min(all.length, start + SCAN_CHUNK_ROWS);
    for (let i = start; i < end; i++) if (predicate(all[i]!)) matches.push(all[i]!);
  }
  return matches;
}

const byId = (a: Row, b: Row): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * The rows that can still make the first `end` of a sort, in id order: each chunk's own first `end`, found with
 * a yield between chunks (the first `end` overall are among them), so a sort over 100k matches runs in steps.
 */
async function candidatesInChunks(matches: Row[], q: CompiledQuery, end: number): Promise<Row[]> {
  if (matches.length <= SCAN_CHUNK_ROWS) return matches;
  const kept: Row[] = [];
  for (let start = 0; start < matches.length; start += SCAN_CHUNK_ROWS) {
    if (start > 0) await yieldToEventLoop();
    const part = arraySource(matches.slice(start, start + SCAN_CHUNK_ROWS));
    for (const row of executeQuery(part, q, { limit: end, offset: 0 }).rows) kept.push(row);
  }
  return kept.sort(byId);
}

function arraySource(rows: Row[]): RowSource<Row> {
  const byId = new Map(rows.map((r) => [r.id, r]));
  return { size: rows.length, scan: () => rows, get: (id) => byId.get(id), idOf: (r) => r.id, lookup: () => undefined };
}

/**
 * Runs list parameters over `source`; query errors become their HTTP errors. `limit=-1` is capped at
 * LIST_ROW_CAP. Synchronous for small sources, index-narrowed queries and unfiltered listings in id order; a
 * big source with a filter or a sort is read, filtered and sorted in chunks with yields to the event loop
 * (snapshot, filterInChunks, candidatesInChunks), so the result is then a promise.
 */
export function runQuery(
  params: ListParams,
  symbols: SymbolTable,
  source: RowSource<Row>,
  version?: () => number,
  hidden?: (row: Row) => boolean,
): ListResult | Promise<ListResult> {
  const resolved = resolve(params, symbols);
  const limit = resolved.limit < 0 || resolved.limit > LIST_ROW_CAP ? LIST_ROW_CAP : resolved.limit;
  const offset = resolved.offset;
  const asked = resolved.compiled;
  // hidden rows are not matches: out of the page and of totalCount alike
  const q: CompiledQuery = hidden
    ? { ...asked, predicate: (row) => !hidden(row) && asked.predicate(row), matchesAll: false }
    : asked;
  const finish = (rows: Row[], totalCount: number): ListResult => {
    assert(rows.length <= LIST_ROW_CAP, 'a list response holds at most LIST_ROW_CAP rows');
    const cut = totalCount > offset + rows.length;
    return { rows, totalCount, limit: resolved.limit < 0 && !cut ? resolved.limit : limit, offset };
  };
  const page = (src: RowSource<Row>, compiled: CompiledQuery): ListResult => {
    const { rows, totalCount } = executeQuery(src, compiled, { limit, offset });
    return finish(rows, totalCount);
  };
  const unsortedAll = q.matchesAll && q.sort.length === 0;
  if (source.size <= SYNC_SCAN_ROWS || q.indexHints.length > 0 || unsortedAll) return page(source, q);
  return (async () => {
    const all = await snapshot(source, version);
    const matches = q.matchesAll ? all : await filterInChunks(all, q);
    const everything: CompiledQuery = { ...q, predicate: () => true, matchesAll: true, indexHints: [] };
    if (q.sort.length === 0) return page(arraySource(matches), everything);
    const candidates = await candidatesInChunks(matches, everything, offset + limit);
    return finish(executeQuery(arraySource(candidates), everything, { limit, offset }).rows, matches.length);
  })();
}

/** Runs `filter`/`sort`/`limit`/`offset` of the request over `source` (see runQuery). */
export function runList(
  req: HttpRequest,
  symbols: SymbolTable,
  source: RowSource<Row>,
  version?: () => number,
  hidden?: (row: Row) => boolean,
): ListResult | Promise<ListResult> {
  return runQuery(listParams(req), symbols, source, version, hidden);
}

/** Applies `f` to a value or to the value of a promise (keeps synchronous results synchronous). */
export function mapResult<T, U>(v: T | Promise<T>, f: (t: T) => U): U | Promise<U> {
  return v instanceof Promise ? v.then(f) : f(v);
}

/**
 * `roleFilter` entries one list request may send (OpenZiti sets no bound). Each `#attr` entry costs a pass over
 * the ids holding it: 3 000 entries naming one attribute of 10 000 identities held the event loop 13 s and 1 GB.
 */
export const MAX_ROLE_FILTERS = 100;

/**
 * Ids matching `roleFilter` entries under `roleSemantic` (REFERENCE §5): `@id` entries match by id, `#attr` entries
 * by attribute (all of them for AllOf, any for AnyOf; `#all` is the attribute `all`, as OpenZiti's splitRolesAndIds
 * reads it). At most MAX_ROLE_FILTERS
 * entries (else 400 on `roleFilter`); a repeated entry counts once.
 */
export function roleFilterIds(
  c: Collection,
  field: string,
  roles: string[],
  semanticParam: string | null,
): Set<string> | null {
  if (roles.length === 0) return null;
  if (roles.length > MAX_ROLE_FILTERS) {
    throw fieldError('roleFilter', `at most ${MAX_ROLE_FILTERS} role filters`, roles.length);
  }
  // absent or empty: AllOf (OpenZiti: `if semantic == "" { semantic = SemanticAllOf }`)
  const semantic = (semanticParam || 'AllOf').toLowerCase();
  if (semantic !== 'allof' && semantic !== 'anyof') throw fieldError('roleSemantic', 'invalid semantic', semanticParam);
  const out = new Set<string>();
  const attrs: string[] = [];
  for (const role of new Set(roles)) {
    if (role.startsWith('@')) {
      if (c.get(role.slice(1))) out.add(role.slice(1));
    } else if (role.startsWith('#')) {
      // `#all` is the attribute `all` here: OpenZiti's roleFilter splits entries without the policies' special case
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
  if (semantic === 'anyof') {
    for (const a of attrs) for (const id of c.lookup(field, a) ?? []) out.add(id);
    return out;
  }
  // AllOf: the holders of the attribute held by the fewest that hold every other one (read from their rows: no set
  // per entry)
  let fewest = attrs[0]!;
  for (const a of attrs) if ((c.lookupSize(field, a) ?? 0) < (c.lookupSize(field, fewest) ?? 0)) fewest = a;
  for (const id of c.lookup(field, fewest) ?? []) {
    const held = c.get(id)?.[field];
    if (Array.isArray(held) && attrs.every((a) => held.includes(a))) out.add(id);
  }
  return out;
}

interface Listable {
  name: EntityName;
  roleAttributesField?: string;
  symbolTable(svc: Services): SymbolTable;
  hiddenFrom?(caller: Caller | null, svc: Services): ((row: Row) => boolean) | undefined;
}

/**
 * The list operation of an entity: roleFilter (if declared), then the ZitiQL query and pagination, over the rows of
 * `only` (default: all) that are neither hidden from the caller (the entity's `hiddenFrom`) nor `excluded`.
 */
export function listQuery(
  entity: Listable,
  ctx: OpContext<unknown>,
  only?: ReadonlySet<string>,
  excluded?: (row: Row) => boolean,
): ListResult | Promise<ListResult> {
  const c = ctx.svc.store.collection(entity.name);
  let restrict: ReadonlySet<string> | undefined = only;
  if (entity.roleAttributesField) {
    const roles = ctx.req.query.getAll('roleFilter');
    const ids = roleFilterIds(c, entity.roleAttributesField, roles, ctx.req.query.get('roleSemantic'));
    if (ids) restrict = restrict ? new Set([...ids].filter((id) => restrict!.has(id))) : ids;
  }
  const store = ctx.svc.store;
  const fromCaller = entity.hiddenFrom?.(ctx.caller, ctx.svc);
  const hidden = fromCaller && excluded ? (row: Row) => fromCaller(row) || excluded(row) : (fromCaller ?? excluded);
  return runList(ctx.req, entity.symbolTable(ctx.svc), collectionSource(c, restrict), () => store.appliedIndex, hidden);
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
