import type { HttpResponse } from '../../http/types.js';
import type { Command, EntityDef, Expect, FieldDef, Row } from '../../storage/types.js';
import { createSymbolTable, type QuerySymbol, type SymbolTable } from '../../storage/zitiql/index.js';
import { baseEntity, createEnvelope, detailEnvelope, empty, listEnvelope } from '../model/common.js';
import { type Schema, type SchemaNode, s } from '../schema/s.js';
import { shortId } from '../util/ids.js';
import { fieldError } from './errors.js';
import { LIST_QUERY, listQuery, listResponse } from './list.js';
import { type Access, type ApiName, type Caller, type OpContext, type OpDef, op } from './op.js';
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

/**
 * Everything specific to one entity type, in one place. From it come: the store's entity definition, the
 * ZitiQL symbols and `filterableFields`, the CRUD operations with their validation, and the served schemas.
 */
export interface EntitySpec<C = any, U = any, P = any> {
  /** Store collection and API path segment, e.g. `identities`. */
  name: string;
  /** Singular type for messages and refs, e.g. `identity`. */
  type: string;
  /** OpenAPI tag, e.g. `Identity`. */
  tag: string;
  /** For operation ids: `listIdentities`, `detailIdentity`, `createIdentity`... */
  singular: string;
  plural: string;
  /** Management permission entity (`identity` → `identity`, `identity.read`...). */
  permission?: string;
  fields: Record<string, FieldDef>;
  /** Extra ZitiQL symbols (computed or relational). */
  symbols?: (svc: Services) => Record<string, QuerySymbol>;
  /** Stored fields that are not ZitiQL symbols beyond those marked `filter: false`. */
  detail: Schema<any>;
  create?: Schema<C>;
  update?: Schema<U>;
  patch?: Schema<P>;
  /** Entity-specific API fields of a row (base fields and `_links.self` are added generically). */
  toApi(row: Row, svc: Services): Record<string, unknown>;
  /** Body → stored fields. Default: copy the body keys that are stored fields. May throw ApiError for semantic checks. */
  fromApi?(body: Record<string, unknown>, w: WriteContext): Promise<Record<string, unknown>> | Record<string, unknown>;
  /** Values stored for fields a PUT leaves out (PUT replaces every field). */
  updateDefaults?: Record<string, unknown>;
  /** Which CRUD operations exist, on which APIs and with which access (default: all, management, admin). */
  operations?: Partial<
    Record<CrudOp, boolean | { apis?: ApiName[]; access?: Access; operationId?: string; permission?: string | null }>
  >;
  /**
   * Removes what only an admin may see from a rendered row (e.g. other identities' session tokens), for callers
   * that hold management permissions without being admins.
   */
  redact?(data: Record<string, unknown>): Record<string, unknown>;
  /** `roleFilter`/`roleSemantic` on list (the field holding role attributes). */
  roleAttributesField?: string;
  /** Further commands applied atomically with a create (e.g. an identity's enrollments). */
  alsoOnCreate?(id: string, body: Record<string, unknown>, svc: Services, at: string): Promise<Command[]> | Command[];
  /**
   * Refuses a delete the store's generic rules would allow (throw an ApiError); returns the conditions the
   * delete relies on, re-checked inside apply (see WriteContext.expect).
   */
  beforeDelete?(row: Row, svc: Services, caller: Caller | null): Expect[] | undefined;
  /**
   * Whether a row's rendering may be cached until the next write anywhere (default true). Say no when it depends
   * on the clock (e.g. a disable that lapses by itself).
   */
  cacheable?(row: Row): boolean;
  /** `_links` beyond `self`. */
  links?(row: Row): Record<string, { href: string }>;
}

export interface Entity<C = any, U = any, P = any> extends EntitySpec<C, U, P> {
  def: EntityDef;
  symbolTable(svc: Services): SymbolTable;
  /** The full API representation: base fields, `_links`, then the entity's own fields. */
  render(row: Row, svc: Services): Record<string, unknown>;
  /** `render` as JSON text, cached per row until the store changes (reads vastly outnumber writes). */
  renderJson(row: Row, svc: Services): string;
  /** `renderJson` as `caller` may see it (`redact` applies to non-admins). */
  renderJsonFor(row: Row, svc: Services, caller: Caller | null): string;
  ops(): OpDef<any>[];
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
  };
}

export function fieldSymbols(fields: Record<string, FieldDef>): Record<string, QuerySymbol> {
  const out: Record<string, QuerySymbol> = {};
  for (const [name, f] of Object.entries(fields)) {
    const type = TYPE_OF[f.type];
    if (f.filter === false || !type) continue;
    out[name] = {
      type,
      set: !!f.set,
      get: (r: Row) => r[name],
      indexed: !!(f.index || f.unique || f.ref),
    };
  }
  return out;
}

/** Rendered JSON by row object (rows are immutable: an update makes a new object). */
const jsonCache = new WeakMap<Row, { epoch: number; json: string }>();

export function defineEntity<C, U, P>(spec: EntitySpec<C, U, P>): Entity<C, U, P> {
  const def: EntityDef = { name: spec.name, type: spec.type, fields: spec.fields };
  const symbolTables = new WeakMap<Services, SymbolTable>();
  const entity: Entity<C, U, P> = {
    ...spec,
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
        _links: { self: { href: `./${spec.name}/${row.id}` }, ...(spec.links?.(row) ?? {}) },
        createdAt: row.createdAt,
        id: row.id,
        tags: row.tags ?? {},
        updatedAt: row.updatedAt,
        ...spec.toApi(row, svc),
      };
    },
    renderJson(row, svc) {
      const hit = jsonCache.get(row);
      if (hit && hit.epoch === svc.store.epoch) return hit.json;
      const json = JSON.stringify(entity.render(row, svc));
      if (spec.cacheable?.(row) !== false) jsonCache.set(row, { epoch: svc.store.epoch, json });
      return json;
    },
    renderJsonFor(row, svc, caller) {
      if (!spec.redact || caller?.identity.isAdmin === true) return entity.renderJson(row, svc);
      return JSON.stringify(spec.redact(entity.render(row, svc)));
    },
    ops: () => crudOps(entity),
  };
  return entity;
}

function withExpect(expect: Expect[] | undefined): { expect?: Expect[] } {
  return expect && expect.length > 0 ? { expect } : {};
}

/** Default body → stored fields: the body keys that name stored fields. */
function pickStored(entity: EntitySpec, body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) if (k in entity.fields || k === 'tags') out[k] = v;
  return out;
}

async function toStored(entity: EntitySpec, body: Record<string, unknown>, w: WriteContext) {
  const mode = w.mode;
  const data = entity.fromApi ? await entity.fromApi(body, w) : pickStored(entity, body);
  if ('tags' in body) data.tags = body.tags ?? {};
  if (mode === 'update') {
    // PUT replaces every field the update body defines: absent ones go back to their defaults.
    for (const key of Object.keys(entity.update?.properties ?? {})) {
      if (key in data || !(key in entity.fields || key === 'tags')) continue;
      data[key] = key === 'tags' ? {} : (entity.updateDefaults?.[key] ?? null);
    }
  }
  return data;
}

function opConfig(entity: EntitySpec, which: CrudOp) {
  const c = entity.operations?.[which];
  if (c === false) return null;
  const cfg = typeof c === 'object' ? c : {};
  return {
    apis: cfg.apis ?? (['management'] as ApiName[]),
    access: cfg.access ?? ('admin' as Access),
    operationId: cfg.operationId,
    permission: cfg.permission === null ? undefined : (cfg.permission ?? entity.permission),
  };
}

const ID_PATH = (name: string) => `/${name}/{id}`;

function crudOps(entity: Entity): OpDef<any>[] {
  const ops: OpDef<any>[] = [];
  const detailName = (entity.detail as SchemaNode).name ?? `${entity.type}Detail`;
  const base = detailName.replace(/Detail$/, '');
  const list = opConfig(entity, 'list');
  if (list) {
    ops.push(
      op({
        method: 'GET',
        path: `/${entity.name}`,
        apis: list.apis,
        operationId: list.operationId ?? `list${entity.plural}`,
        tags: [entity.tag],
        summary: `List ${entity.plural.toLowerCase()}`,
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
        ],
        responses: {
          200: {
            description: `A list of ${entity.plural.toLowerCase()}`,
            schema: listEnvelope(`list${entity.plural}Envelope`, entity.detail),
          },
        },
        handler: (ctx) => {
          const result = listQuery(entity, ctx);
          return listResponse(
            result,
            (row) => entity.renderJsonFor(row, ctx.svc, ctx.caller),
            entity.symbolTable(ctx.svc),
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
        path: ID_PATH(entity.name),
        apis: detail.apis,
        operationId: detail.operationId ?? `detail${entity.singular}`,
        tags: [entity.tag],
        summary: `Retrieves a single ${entity.type}`,
        access: detail.access,
        permission: detail.permission,
        responses: {
          200: {
            description: `A single ${entity.type}`,
            schema: detailEnvelope(`detail${entity.singular}Envelope`, entity.detail),
          },
        },
        handler: (ctx) =>
          okJson(entity.renderJsonFor(ctx.svc.require(entity.name, ctx.params.id!), ctx.svc, ctx.caller)),
      }),
    );
  }
  const create = opConfig(entity, 'create');
  if (create && entity.create) {
    ops.push(
      op({
        method: 'POST',
        path: `/${entity.name}`,
        apis: create.apis,
        operationId: create.operationId ?? `create${entity.singular}`,
        tags: [entity.tag],
        summary: `Create a ${entity.type} resource`,
        access: create.access,
        permission: create.permission,
        body: entity.create,
        bodyName: base,
        responses: {
          201: {
            description: 'The create request was successful and the resource has been added at the following location',
            schema: createEnvelope,
          },
        },
        handler: async (ctx: OpContext<any>): Promise<HttpResponse> => {
          const w: WriteContext = { mode: 'create', svc: ctx.svc, caller: ctx.caller, expect: [] };
          const data = await toStored(entity, ctx.body, w);
          const id = (data.id as string | undefined) ?? shortId();
          delete data.id;
          const at = ctx.svc.nowIso();
          const cmd: Command = { op: 'create', entity: entity.name, id, data, at, ...withExpect(w.expect) };
          const extra = entity.alsoOnCreate ? await entity.alsoOnCreate(id, ctx.body, ctx.svc, at) : [];
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
        path: ID_PATH(entity.name),
        apis: cfg.apis,
        operationId: cfg.operationId ?? `${which}${entity.singular}`,
        tags: [entity.tag],
        summary:
          which === 'update'
            ? `Update all fields on a ${entity.type}`
            : `Update the supplied fields on a ${entity.type}`,
        access: cfg.access,
        permission: cfg.permission,
        body: schema,
        bodyName: base,
        responses: {
          200: { description: 'The update request was successful and the resource has been altered', schema: empty },
        },
        handler: async (ctx: OpContext<any>) => {
          const existing = ctx.svc.require(entity.name, ctx.params.id!);
          const w: WriteContext = { mode: which, svc: ctx.svc, existing, caller: ctx.caller, expect: [] };
          const set = await toStored(entity, ctx.body, w);
          const at = ctx.svc.nowIso();
          await ctx.svc.write({ op: 'update', entity: entity.name, id: existing.id, set, at, ...withExpect(w.expect) });
          return okEmpty();
        },
      }),
    );
  }
  const del = opConfig(entity, 'delete');
  if (del) {
    ops.push(
      op({
        method: 'DELETE',
        path: ID_PATH(entity.name),
        apis: del.apis,
        operationId: del.operationId ?? `delete${entity.singular}`,
        tags: [entity.tag],
        summary: `Delete a ${entity.type}`,
        access: del.access,
        permission: del.permission,
        responses: {
          200: { description: 'The delete request was successful and the resource has been removed', schema: empty },
        },
        handler: async (ctx) => {
          const expect = entity.beforeDelete
            ? entity.beforeDelete(ctx.svc.require(entity.name, ctx.params.id!), ctx.svc, ctx.caller)
            : undefined;
          const at = ctx.svc.nowIso();
          await ctx.svc.write({ op: 'delete', entity: entity.name, id: ctx.params.id!, at, ...withExpect(expect) });
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
