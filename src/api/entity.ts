import type { HttpResponse } from '../../http/types.js';
import type { DerivedIndexFactory } from '../../storage/derived.js';
import { assert, type EntityDef, type FieldDef, type FieldType, type Row } from '../../storage/types.js';
import { createSymbolTable, type QuerySymbol, type SymbolTable } from '../../storage/zitiql/index.js';
import { baseEntity, createEnvelope, detailEnvelope, empty, listEnvelope, tags } from '../model/common.js';
import type { EntityName } from '../model/index.js';
import { isRowUnchanged } from '../model/preconditions.js';
import type { Command, Expect, RowFor, Store } from '../model/rows.js';
import { type Schema, type SchemaNode, s } from '../schema/s.js';
import { shortId } from '../util/ids.js';
import { fieldError, isRecordedFailure, notFound, unauthorized } from './errors.js';
import { listQuery, listResponse, mapResult } from './list.js';
import {
  type Access,
  type ApiName,
  type Caller,
  LIST_QUERY,
  type OpContext,
  type OpDef,
  op,
  type QueryParamDoc,
} from './op.js';
import { type RelationSpec, relationOps } from './relations.js';
import { created, okEmpty, okJson } from './respond.js';
import type { Services } from './services.js';

export type WriteMode = 'create' | 'update' | 'patch';

/** What `fromApi` knows about the write: its kind, the row it changes, and who asks. */
export interface WriteContext {
  mode: WriteMode;
  svc: Services;
  existing?: Row;
  caller: Caller | null;
  /**
   * Conditions on current state the write relies on (e.g. "the target is not an admin"): `fromApi` checks them
   * against local state to answer early *and* pushes them here; they travel in the command and apply checks
   * them again against the state the write really meets (a follower's view may lag the log).
   */
  expect: Expect[];
}
export type CrudOp = 'list' | 'detail' | 'create' | 'update' | 'patch' | 'delete';

/** One CRUD operation's APIs, operation id and access (defaults: management, `<op><Singular>`, admin). */
export interface CrudOpConfig {
  apis?: ApiName[];
  access?: Access;
  operationId?: string;
  /** The management permission entity (default: the declaration's); null: admins only. */
  permission?: string | null;
  /**
   * Update and patch only: a caller without admin rights is refused (401 UNAUTHORIZED) once its body is valid and
   * the row found, although `permission` lets it reach the operation (OpenZiti's identity PUT: filed under
   * `identity.update`, whose handler then refuses non-admins).
   */
  adminsOnly?: boolean;
}

/**
 * A stored field and, in the same place, what the API does with it: `body` makes it writable (the schema of the
 * field in create/update/patch bodies, copied to the store as given), `api` renders it as stored, and `default` is
 * both what `api` renders for an absent value and what a PUT that leaves the field out resets it to.
 */
export interface EntityField extends FieldDef {
  /** Writable: the field's schema in request bodies; the body value is stored as given. */
  body?: Schema<unknown>;
  /** Rendered by `toApi` as stored (or `default` when absent). */
  api?: boolean;
  /** The rendering of an absent value and what PUT resets an absent field to (default null). */
  default?: unknown;
  /** A body value of `''` is stored as null (OpenZiti clears optional unique strings this way). */
  emptyIsNull?: boolean;
  /**
   * A body string must hold more than whitespace: `''` or a blank one is refused on create, PUT and PATCH alike (400
   * COULD_NOT_VALIDATE on the field), before `fromApi` runs. Every writable unique string that `''` does not clear
   * (`emptyIsNull`) is one (OpenZiti's unique indexes refuse empty values; test/api/non-empty-fields.test.ts).
   */
  nonEmpty?: boolean;
}

export type EntityFields = Record<string, EntityField>;

/** The body schemas of a declaration's writable fields, by name, plus `tags`. */
export type BodyFields<F extends EntityFields> = {
  [K in keyof F as F[K]['body'] extends Schema<unknown> ? K : never]: NonNullable<F[K]['body']>;
} & { tags: typeof tags };

type ScalarOf<T extends FieldType> = T extends 'string' | 'datetime'
  ? string
  : T extends 'number'
    ? number
    : T extends 'bool'
      ? boolean
      : Record<string, unknown>;
/**
 * A field's stored value: the type of its `body` schema when it has one (the body value is stored as given), else
 * the one its FieldType names.
 */
type ValueOf<F extends EntityField> = F extends { body: Schema<infer T> }
  ? T
  : F['set'] extends true
    ? ScalarOf<F['type']>[]
    : ScalarOf<F['type']>;

/** The row type a declaration's `fields` describe: base fields plus each field, typed, possibly absent or null. */
export type RowOf<F extends EntityFields> = string extends keyof F
  ? Row
  : Row & { [K in keyof F]?: ValueOf<F[K]> | null };

/**
 * Everything specific to one entity type, in one place. From it come: the store's entity definition, the
 * ZitiQL symbols and `filterableFields`, the CRUD operations with their validation, and the served schemas.
 */
export interface EntitySpec<N extends string = string, F extends EntityFields = EntityFields> {
  /** Store collection and API path segment, e.g. `identities`. */
  name: N;
  /** Singular type for messages and refs, e.g. `identity`. */
  type: string;
  /** OpenAPI tag, e.g. `Identity`. */
  tag: string;
  /** For operation ids: `listIdentities`, `detailIdentity`, `createIdentity`... */
  singular: string;
  plural: string;
  /** Management permission entity (`identity` → `identity`, `identity.read`...). */
  permission?: string;
  fields: F;
  /** Extra ZitiQL symbols (computed or relational). */
  symbols?: (svc: Services) => Record<string, QuerySymbol>;
  /** Stored fields that are not ZitiQL symbols beyond those marked `filter: false`. */
  detail: SchemaNode;
  create?: SchemaNode;
  update?: SchemaNode;
  patch?: SchemaNode;
  /**
   * Entity-specific API fields of a row beyond the `api` fields (base fields and `_links.self` are added
   * generically). Default: none.
   */
  toApi?(row: RowOf<F>, svc: Services): Record<string, unknown>;
  /**
   * The collections `toApi` reads beyond the row itself (e.g. an identity's auth policy, for its name; its own
   * collection only when it reads other rows of it): a cached rendering lasts until a row of one of them changes
   * (the row itself never changes: an update makes a new row). Absent with a `toApi`: every collection (cached
   * until the next write anywhere). Store.stampOf refuses a name that is not a collection;
   * test/api/render-cache.test.ts checks that the declarations are complete. Not declared with `cacheable: false`.
   */
  reads?: readonly string[];
  /**
   * Body → stored fields. The `body` fields present in the request are already copied into `copied` (null on a
   * field whose body schema is not nullable is a PATCH's "leave unchanged" and is not copied); without `fromApi`
   * the stored fields are `copied` (plus any other body key naming a stored field). May throw ApiError.
   */
  fromApi?(
    body: Record<string, unknown>,
    w: WriteContext & { copied: Record<string, unknown> },
  ): Promise<Record<string, unknown>> | Record<string, unknown>;
  /** The properties of a create, update or patch body this type ignores (OpDef.ignoredBodyFields). */
  ignoredBodyFields?(body: Record<string, unknown>): readonly string[];
  /** Which CRUD operations exist, on which APIs and with which access (default: all, management, admin). */
  operations?: Partial<Record<CrudOp, boolean | CrudOpConfig>>;
  /**
   * Removes what only an admin may see from a rendered row (e.g. other identities' session tokens), for callers
   * that hold management permissions without being admins.
   */
  redact?(data: Record<string, unknown>): Record<string, unknown>;
  /**
   * The rows hidden from `caller` (a predicate; undefined: none): left out of its lists and their counts, and 401
   * UNAUTHORIZED on their detail, update, patch and delete (OpenZiti: the enrollments of admin identities, for
   * callers without admin rights). A hidden row must stay hidden however the caller asks for it.
   */
  hiddenFrom?(caller: Caller | null, svc: Services): ((row: RowOf<F>) => boolean) | undefined;
  /** `roleFilter`/`roleSemantic` on list (the field holding role attributes). */
  roleAttributesField?: string;
  /**
   * The list's rendering for this request when it is not the rows' own (e.g. the management service list's
   * `config` map for the `configTypes` asked for), with the query parameters that ask for it. Undefined: the own.
   */
  listView?: { query: readonly QueryParamDoc[]; render(ctx: OpContext<unknown>): ((row: Row) => string) | undefined };
  /**
   * The same CRUD operations served a second time under another path segment and operation ids (OpenZiti's
   * `/routers` beside its deprecated `/transit-routers`). Rendered rows keep `name` in their links.
   */
  alias?: { path: string; singular: string; plural: string };
  /** The path (relative to the API root) a row's `_links.self` names, when its rows are not served at `/<name>`. */
  selfPath?: string;
  /** Association lists served as `GET /<name>/{id}/<path>` (src/api/relations.ts). */
  relations?: RelationSpec[];
  /** Derived indexes this declaration owns (e.g. a policy's role indexes), added to the store schema. */
  derived?: readonly DerivedIndexFactory[];
  /** Further commands applied atomically with a create (e.g. an identity's enrollments). */
  alsoOnCreate?(id: string, body: Record<string, unknown>, svc: Services, at: string): Promise<Command[]> | Command[];
  /**
   * Further commands applied atomically with an update or patch, after it (`set`: the stored fields it changes;
   * `body`: the request's, validated).
   */
  alsoOnUpdate?(
    row: RowOf<F>,
    set: Record<string, unknown>,
    svc: Services,
    at: string,
    body: Record<string, unknown>,
  ): Command[];
  /** Further commands applied atomically with a delete, before it (e.g. what the row created for itself). */
  alsoOnDelete?(row: RowOf<F>, svc: Services, at: string): Command[];
  /**
   * Refuses a delete the store's generic rules would allow (throw an ApiError); returns the conditions the
   * delete relies on, re-checked inside apply (see WriteContext.expect).
   */
  beforeDelete?(row: RowOf<F>, svc: Services, caller: Caller | null): Expect[] | undefined;
  /**
   * Whether a row's rendering may be cached until what it `reads` changes (default true). Per row: say no when it
   * depends on the clock (e.g. a disable that lapses by itself). `false`: no row's ever is, because the rendering
   * changes without a write (this controller's router presence, a session's activity); it then declares no
   * `reads`, which nothing would use (test/api/render-cache.test.ts checks both).
   */
  cacheable?: false | ((row: RowOf<F>) => boolean);
  /** `_links` beyond `self`. */
  links?(row: RowOf<F>): Record<string, { href: string }>;
}

/** The row-typed hooks of a spec, as the generic machinery calls them (with any row of the collection). */
type RowHooks = 'toApi' | 'beforeDelete' | 'cacheable' | 'links' | 'alsoOnUpdate' | 'alsoOnDelete' | 'hiddenFrom';

export interface Entity<N extends string = EntityName, F extends EntityFields = EntityFields>
  extends Omit<EntitySpec<N, F>, RowHooks> {
  def: EntityDef;
  toApi?(row: Row, svc: Services): Record<string, unknown>;
  beforeDelete?(row: Row, svc: Services, caller: Caller | null): Expect[] | undefined;
  cacheable?: false | ((row: Row) => boolean);
  links?(row: Row): Record<string, { href: string }>;
  alsoOnUpdate?(
    row: Row,
    set: Record<string, unknown>,
    svc: Services,
    at: string,
    body: Record<string, unknown>,
  ): Command[];
  alsoOnDelete?(row: Row, svc: Services, at: string): Command[];
  hiddenFrom?(caller: Caller | null, svc: Services): ((row: Row) => boolean) | undefined;
  symbolTable(svc: Services): SymbolTable;
  /** The full API representation: base fields, `_links`, then the entity's own fields. */
  render(row: Row, svc: Services): Record<string, unknown>;
  /** `render` as JSON text, cached per row until what it `reads` changes (reads vastly outnumber writes). */
  renderJson(row: Row, svc: Services): string;
  /** `renderJson` as `caller` may see it (`redact` applies to non-admins). */
  renderJsonFor(row: Row, svc: Services, caller: Caller | null): string;
  ops(): OpDef<unknown>[];
}

/** The row of `entity` with this id, typed by the declaration's fields. */
export function getRow<N extends EntityName>(
  entity: { name: N; type: string },
  svc: Services,
  id: string,
): RowFor<N> | undefined {
  return svc.get(entity.name, id);
}

/** The row of `entity` with this id, typed, or 404 NOT_FOUND. */
export function requireRow<N extends EntityName>(
  entity: { name: N; type: string },
  svc: Services,
  id: string,
): RowFor<N> {
  const row = svc.get(entity.name, id);
  if (!row) throw notFound(entity.type, id);
  return row;
}

/** The row of `entity` with this id as `caller` may act on it: 404 NOT_FOUND, or 401 if hidden (hiddenFrom). */
export function requireVisibleRow<N extends EntityName>(
  entity: { name: N; type: string; hiddenFrom?: Entity['hiddenFrom'] },
  svc: Services,
  caller: Caller | null,
  id: string,
): RowFor<N> {
  const row = requireRow(entity, svc, id);
  if (entity.hiddenFrom?.(caller, svc)?.(row) === true) throw unauthorized('forbidden');
  return row;
}

/** A copy of a default value, so that no two rows share a mutable array or object. */
function freshDefault(v: unknown): unknown {
  if (Array.isArray(v)) return [...v];
  if (v !== null && typeof v === 'object') return { ...v };
  return v ?? null;
}

const TYPE_OF: Record<string, QuerySymbol['type'] | null> = {
  string: 'string',
  number: 'number',
  bool: 'bool',
  datetime: 'datetime',
  object: null,
  map: null,
};

export function baseSymbols(): Record<string, QuerySymbol> {
  return {
    id: { type: 'string', set: false, get: (r: Row) => r.id, indexed: true },
    createdAt: { type: 'datetime', set: false, get: (r: Row) => r.createdAt },
    updatedAt: { type: 'datetime', set: false, get: (r: Row) => r.updatedAt },
    // OpenZiti's AddExtEntitySymbols: every edge entity has it (false unless the controller made the row)
    isSystem: { type: 'bool', set: false, get: (r: Row) => r.isSystem === true },
  };
}

export function fieldSymbols(fields: Record<string, EntityField>): Record<string, QuerySymbol> {
  const out: Record<string, QuerySymbol> = {};
  for (const [name, f] of Object.entries(fields)) {
    const type = TYPE_OF[f.type];
    if (f.filter === false || !type) continue;
    // a field left out of a row reads as its default, as every rendering shows it (a filter or a sort on it must
    // see what the API shows)
    const fallback = f.api ? f.default : undefined;
    out[name] = {
      type,
      set: !!f.set,
      get: fallback === undefined ? (r: Row) => r[name] : (r: Row) => r[name] ?? fallback,
      indexed: !!(f.index || f.unique || f.ref),
      ...(fallback === undefined || fallback === null ? {} : { absentAs: fallback }),
    };
  }
  return out;
}

/**
 * Rendered JSON by row object (rows are immutable: an update makes a new object), with the store stamp of what
 * the rendering read (Store.stampOf, or the store-wide epoch for an entity that does not declare `reads`).
 */
const jsonCache = new WeakMap<Row, { stamp: number; json: string }>();

/**
 * An entity type the store keeps and replicates but the API never serves (no operation, nothing rendered): the
 * controller's own records. Annotate the result as for defineEntity.
 */
export function defineInternalEntity<const N extends string, const F extends EntityFields>(
  name: N,
  type: string,
  fields: F,
): Entity<N, F> {
  const singular = `${type.charAt(0).toUpperCase()}${type.slice(1)}`;
  return defineEntity({
    name,
    type,
    tag: 'Internal',
    singular,
    plural: `${singular}s`,
    fields,
    detail: s.named(`${type}Detail`, s.obj({})),
    toApi: () => ({}),
    reads: [],
    operations: { list: false, detail: false, create: false, update: false, patch: false, delete: false },
  });
}

/**
 * An entity type from its declaration. Annotate the result with its name and fields' type —
 * `export const xs: Entity<'xs', typeof xFields> = defineEntity({...})` — when it goes into ENTITIES: the row types
 * are derived from ENTITIES, and without the annotation a hook that reads typed rows makes the type depend on
 * itself (TS7022 "implicitly has type 'any'", or "Type parameter 'N' has a circular default").
 */
export function defineEntity<const N extends string, const F extends EntityFields>(
  spec: EntitySpec<N, F>,
): Entity<N, F> {
  const def: EntityDef = { name: spec.name, type: spec.type, fields: spec.fields };
  const symbolTables = new WeakMap<Services, SymbolTable>();
  const rendered = Object.entries(spec.fields).filter(([, f]) => f.api);
  // without a `toApi` a rendering is the row's own fields: nothing else to watch
  const reads: readonly string[] | undefined = spec.toApi ? spec.reads : [];
  assert(spec.cacheable !== false || spec.reads === undefined, `${spec.name}: never cached, yet declares reads`);
  // the stamp of what the renderings read, computed once per store epoch (every publish moves the epoch)
  let last: { store: Store; epoch: number; stamp: number } | null = null;
  const stampOf = (store: Store): number => {
    if (last?.store !== store || last.epoch !== store.epoch) {
      last = { store, epoch: store.epoch, stamp: reads ? store.stampOf(reads) : store.epoch };
    }
    return last.stamp;
  };
  // the hooks see the rows of their own collection, which the store holds as typed by `fields`
  const typed = <R>(fn: ((row: RowOf<F>, ...rest: never[]) => R) | undefined) =>
    fn as ((row: Row, ...rest: never[]) => R) | undefined;
  const entity: Entity<N, F> = {
    ...spec,
    toApi: typed(spec.toApi),
    beforeDelete: typed(spec.beforeDelete),
    cacheable: spec.cacheable === false ? false : typed(spec.cacheable),
    links: typed(spec.links),
    alsoOnUpdate: typed(spec.alsoOnUpdate),
    alsoOnDelete: typed(spec.alsoOnDelete),
    hiddenFrom: spec.hiddenFrom as Entity['hiddenFrom'],
    def,
    symbolTable(svc) {
      let table = symbolTables.get(svc);
      if (!table) {
        table = createSymbolTable({
          symbols: { ...baseSymbols(), ...fieldSymbols(spec.fields), ...(spec.symbols?.(svc) ?? {}) },
          maps: { tags: (r: Row) => r.tags },
        });
        symbolTables.set(svc, table);
      }
      return table;
    },
    render(row, svc) {
      return {
        _links: { self: { href: `./${spec.selfPath ?? spec.name}/${row.id}` }, ...(entity.links?.(row) ?? {}) },
        createdAt: row.createdAt,
        id: row.id,
        tags: row.tags ?? {},
        updatedAt: row.updatedAt,
        ...renderFields(rendered, row),
        ...entity.toApi?.(row, svc),
      };
    },
    renderJson(row, svc) {
      if (entity.cacheable === false) return JSON.stringify(entity.render(row, svc));
      const stamp = stampOf(svc.store);
      const hit = jsonCache.get(row);
      if (hit && hit.stamp === stamp) return hit.json;
      const json = JSON.stringify(entity.render(row, svc));
      if (entity.cacheable?.(row) !== false) jsonCache.set(row, { stamp, json });
      return json;
    },
    renderJsonFor(row, svc, caller) {
      if (!spec.redact || caller?.identity.isAdmin === true) return entity.renderJson(row, svc);
      return JSON.stringify(spec.redact(entity.render(row, svc)));
    },
    ops: () => [
      ...crudOps(served, { path: spec.name, singular: spec.singular, plural: spec.plural }),
      ...(spec.alias ? crudOps(served, spec.alias) : []),
      ...relationOps(served),
    ],
  };
  // The generic operations serve any declared entity by its name: an entity of the application (EntityName), or one
  // a test declares with its own schema (the name is checked against the store's schema at run time).
  const served = entity as Entity<string> as Entity;
  return entity;
}

/**
 * Attempts of an update or patch whose write carries rowUnchanged (computed from the row's current value), each from
 * the row as it is then: a row changed by other writes this often in a row is left to the caller (400).
 */
export const MAX_MERGE_ATTEMPTS = 3;

/** `cmd` with the conditions it relies on, when there are any. */
function withExpect(cmd: Command, expect: Expect[] | undefined): Command {
  if (expect && expect.length > 0) (cmd as { expect?: Expect[] }).expect = expect;
  return cmd;
}

/** The body schemas of the writable (`body`) fields, plus `tags`: the common part of create/update/patch bodies. */
export function bodyFieldsOf<F extends EntityFields>(fields: F): BodyFields<F> {
  const out: Record<string, Schema<unknown>> = {};
  for (const [name, f] of Object.entries(fields)) if (f.body) out[name] = f.body;
  out.tags = tags;
  return out as BodyFields<F>;
}

/** The `api` fields of a row: as stored, or their default when absent. */
function renderFields(rendered: [string, EntityField][], row: Row): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, f] of rendered) out[name] = row[name] ?? freshDefault(f.default);
  return out;
}

/** The writable (`body`) fields of a declaration, listed once per `fields` object (every write walks them). */
const writableCache = new WeakMap<EntityFields, ReadonlyArray<readonly [string, EntityField]>>();
function writableFields(fields: EntityFields): ReadonlyArray<readonly [string, EntityField]> {
  let list = writableCache.get(fields);
  if (list === undefined) {
    list = Object.entries(fields).filter(([, f]) => f.body !== undefined);
    writableCache.set(fields, list);
  }
  return list;
}

/** A string holding more than whitespace (`\s` is the whitespace `String.prototype.trim` removes). */
export const NOT_BLANK = /\S/;

/** The writable (`body`) fields present in the request, as they are stored; a blank `nonEmpty` one is refused. */
function copyBodyFields(fields: EntityFields, body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const writable = writableFields(fields);
  for (let i = 0; i < writable.length; i++) {
    const [k, f] = writable[i]!;
    if (!Object.hasOwn(body, k)) continue;
    const v = body[k];
    // PATCH with null on a non-nullable field leaves it unchanged (go-swagger decodes null as "not supplied").
    if (v === null && !f.body!.nullable) continue;
    if (f.nonEmpty === true && typeof v === 'string' && !NOT_BLANK.test(v)) {
      throw fieldError(k, `${k} must not be empty`, v);
    }
    out[k] = v === '' && f.emptyIsNull ? null : v;
  }
  return out;
}

/** Default body → stored fields: the body keys that name stored fields. */
function pickStored(fields: EntityFields, body: Record<string, unknown>, copied: Record<string, unknown>) {
  const out: Record<string, unknown> = { ...copied };
  for (const [k, v] of Object.entries(body))
    if (!Object.hasOwn(out, k) && (Object.hasOwn(fields, k) || k === 'tags')) out[k] = v;
  return out;
}

/** Body → stored fields; synchronous when the declaration's `fromApi` is (most are). */
function toStored(
  entity: EntitySpec,
  body: Record<string, unknown>,
  w: WriteContext,
): Record<string, unknown> | Promise<Record<string, unknown>> {
  const copied = copyBodyFields(entity.fields, body);
  if (!entity.fromApi) return completeStored(entity, body, w.mode, pickStored(entity.fields, body, copied));
  // the write context itself, with `copied` added (no copy of it per write)
  const withCopied = w as WriteContext & { copied: Record<string, unknown> };
  withCopied.copied = copied;
  const data = entity.fromApi(body, withCopied);
  if (data instanceof Promise) return data.then((d) => completeStored(entity, body, w.mode, d));
  return completeStored(entity, body, w.mode, data);
}

function completeStored(
  entity: EntitySpec,
  body: Record<string, unknown>,
  mode: WriteMode,
  data: Record<string, unknown>,
): Record<string, unknown> {
  if (Object.hasOwn(body, 'tags')) data.tags = body.tags ?? {};
  if (mode === 'update') {
    // PUT replaces every field the update body defines: absent ones go back to their defaults.
    for (const key of Object.keys(entity.update?.properties ?? {})) {
      if (Object.hasOwn(data, key) || !(Object.hasOwn(entity.fields, key) || key === 'tags')) continue;
      data[key] = key === 'tags' ? {} : freshDefault(entity.fields[key]!.default);
    }
  }
  return data;
}

function opConfig(entity: EntitySpec, which: CrudOp) {
  const c = entity.operations?.[which];
  if (c === false) return null;
  const cfg = typeof c === 'object' ? c : {};
  assert(cfg.adminsOnly !== true || which === 'update' || which === 'patch', `${entity.name}: adminsOnly on ${which}`);
  return {
    apis: cfg.apis ?? (['management'] as ApiName[]),
    access: cfg.access ?? ('admin' as Access),
    operationId: cfg.operationId,
    permission: cfg.permission === null ? undefined : (cfg.permission ?? entity.permission),
    adminsOnly: cfg.adminsOnly === true,
  };
}

const ID_PATH = (name: string) => `/${name}/{id}`;

/** How the operations are named: the path segment and the operation id words (the entity's own, or an alias). */
interface OpNames {
  path: string;
  singular: string;
  plural: string;
}

function crudOps(entity: Entity, names: OpNames): OpDef<unknown>[] {
  const ops: OpDef<unknown>[] = [];
  const detailName = entity.detail.name ?? `${entity.type}Detail`;
  const base = detailName.replace(/Detail$/, '');
  const list = opConfig(entity, 'list');
  if (list) {
    ops.push(
      op({
        method: 'GET',
        path: `/${names.path}`,
        apis: list.apis,
        operationId: list.operationId ?? `list${names.plural}`,
        tags: [entity.tag],
        summary: `List ${names.plural.toLowerCase()}`,
        description: `Retrieves a list of ${entity.type} resources; supports filtering, sorting, and pagination.`,
        access: list.access,
        permission: list.permission,
        query: [
          ...LIST_QUERY,
          ...(entity.roleAttributesField
            ? ([
                { name: 'roleFilter', type: 'array' },
                { name: 'roleSemantic', type: 'string' },
              ] as const)
            : []),
          ...(entity.listView?.query ?? []),
        ],
        responses: {
          200: {
            description: `A list of ${names.plural.toLowerCase()}`,
            schema: listEnvelope(`list${names.plural}Envelope`, entity.detail),
          },
        },
        handler: (ctx) => {
          const render = entity.listView?.render(ctx) ?? ((row) => entity.renderJsonFor(row, ctx.svc, ctx.caller));
          return mapResult(listQuery(entity, ctx), (result) =>
            listResponse(result, render, entity.symbolTable(ctx.svc)),
          );
        },
      }),
    );
  }
  const detail = opConfig(entity, 'detail');
  if (detail) {
    ops.push(
      op({
        method: 'GET',
        path: ID_PATH(names.path),
        apis: detail.apis,
        operationId: detail.operationId ?? `detail${names.singular}`,
        tags: [entity.tag],
        summary: `Retrieves a single ${entity.type}`,
        access: detail.access,
        permission: detail.permission,
        responses: {
          200: {
            description: `A single ${entity.type}`,
            schema: detailEnvelope(`detail${names.singular}Envelope`, entity.detail),
          },
        },
        handler: (ctx) =>
          okJson(
            entity.renderJsonFor(requireVisibleRow(entity, ctx.svc, ctx.caller, ctx.params.id!), ctx.svc, ctx.caller),
          ),
      }),
    );
  }
  const create = opConfig(entity, 'create');
  if (create && entity.create) {
    ops.push(
      op({
        method: 'POST',
        path: `/${names.path}`,
        apis: create.apis,
        operationId: create.operationId ?? `create${names.singular}`,
        tags: [entity.tag],
        summary: `Create a ${entity.type} resource`,
        access: create.access,
        permission: create.permission,
        body: entity.create,
        bodyName: base,
        ignoredBodyFields: entity.ignoredBodyFields,
        responses: {
          201: {
            description: 'The create request was successful and the resource has been added at the following location',
            schema: createEnvelope,
          },
        },
        handler: async (ctx: OpContext<Record<string, unknown>>): Promise<HttpResponse> => {
          const w: WriteContext = { mode: 'create', svc: ctx.svc, caller: ctx.caller, expect: [] };
          const stored = toStored(entity, ctx.body, w);
          const data = stored instanceof Promise ? await stored : stored;
          const id = (data.id as string | undefined) ?? shortId();
          delete data.id;
          const at = ctx.svc.nowIso();
          const cmd: Command = withExpect({ op: 'create', entity: entity.name, id, data, at }, w.expect);
          // awaited only when it answers with a promise: the common create (e.g. an identity with no enrollment)
          // stays synchronous up to the write
          const also = entity.alsoOnCreate?.(id, ctx.body, ctx.svc, at) ?? [];
          const extra = also instanceof Promise ? await also : also;
          await ctx.svc.write(extra.length > 0 ? { op: 'batch', ops: [cmd, ...extra] } : cmd);
          return created(entity.name, id);
        },
      }),
    );
  }
  for (const which of ['update', 'patch'] as const) {
    const cfg = opConfig(entity, which);
    const schema = which === 'update' ? entity.update : entity.patch;
    if (!cfg || !schema) continue;
    ops.push(
      op({
        method: which === 'update' ? 'PUT' : 'PATCH',
        path: ID_PATH(names.path),
        apis: cfg.apis,
        operationId: cfg.operationId ?? `${which}${names.singular}`,
        tags: [entity.tag],
        summary:
          which === 'update'
            ? `Update all fields on a ${entity.type}`
            : `Update the supplied fields on a ${entity.type}`,
        access: cfg.access,
        permission: cfg.permission,
        body: schema,
        bodyName: base,
        ignoredBodyFields: entity.ignoredBodyFields,
        responses: {
          200: { description: 'The update request was successful and the resource has been altered', schema: empty },
        },
        handler: async (ctx: OpContext<Record<string, unknown>>) => {
          // A write computed from the row's current value carries rowUnchanged: refused because the row changed
          // in between (a recorded failure: nothing written), it is computed again from the fresh row.
          for (let attempt = 1; ; attempt++) {
            const existing = requireVisibleRow(entity, ctx.svc, ctx.caller, ctx.params.id!);
            if (cfg.adminsOnly && ctx.caller?.identity.isAdmin !== true) throw unauthorized('forbidden');
            const w: WriteContext = { mode: which, svc: ctx.svc, existing, caller: ctx.caller, expect: [] };
            const stored = toStored(entity, ctx.body, w);
            const set = stored instanceof Promise ? await stored : stored;
            const at = ctx.svc.nowIso();
            const cmd: Command = withExpect({ op: 'update', entity: entity.name, id: existing.id, set, at }, w.expect);
            const extra = entity.alsoOnUpdate?.(existing, set, ctx.svc, at, ctx.body) ?? [];
            try {
              await ctx.svc.write(extra.length > 0 ? { op: 'batch', ops: [cmd, ...extra] } : cmd);
              return okEmpty();
            } catch (err) {
              const merged = w.expect.some((e) => isRowUnchanged(e, entity.name, existing.id));
              const moved = ctx.svc.store.get(entity.name, existing.id)?.updatedAt !== existing.updatedAt;
              if (!(merged && moved && isRecordedFailure(err) && attempt < MAX_MERGE_ATTEMPTS)) throw err;
            }
          }
        },
      }),
    );
  }
  const del = opConfig(entity, 'delete');
  if (del) {
    ops.push(
      op({
        method: 'DELETE',
        path: ID_PATH(names.path),
        apis: del.apis,
        operationId: del.operationId ?? `delete${names.singular}`,
        tags: [entity.tag],
        summary: `Delete a ${entity.type}`,
        access: del.access,
        permission: del.permission,
        responses: {
          200: { description: 'The delete request was successful and the resource has been removed', schema: empty },
        },
        handler: async (ctx) => {
          const target = requireVisibleRow(entity, ctx.svc, ctx.caller, ctx.params.id!);
          const expect = entity.beforeDelete?.(target, ctx.svc, ctx.caller);
          const at = ctx.svc.nowIso();
          const cmd: Command = withExpect({ op: 'delete', entity: entity.name, id: ctx.params.id!, at }, expect);
          const row = entity.alsoOnDelete ? getRow(entity, ctx.svc, ctx.params.id!) : undefined;
          const extra = row ? entity.alsoOnDelete!(row, ctx.svc, at) : [];
          await ctx.svc.write(extra.length > 0 ? { op: 'batch', ops: [...extra, cmd] } : cmd);
          return okEmpty();
        },
      }),
    );
  }
  return ops;
}

/** Detail schema = baseEntity + the entity's own properties (as the spec composes it). */
export function detailSchema<T>(name: string, own: Schema<T>): Schema<T> {
  return s.named(name, s.allOf(baseEntity, own)) as unknown as Schema<T>;
}

/** Role attributes on entities: plain strings; `#`/`@` prefixes are reserved for policy roles. */
export function checkRoleAttributes(field: string, values: unknown): string[] {
  if (values === null || values === undefined) return [];
  const list = values as string[];
  for (const v of list) {
    if (v.startsWith('#') || v.startsWith('@')) {
      throw fieldError(field, 'role attributes may not be prefixed with #/@', v);
    }
  }
  return [...new Set(list)];
}
