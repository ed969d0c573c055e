import { indexValues } from './collection.js';
import type { ApplyContext, Schema } from './schema.js';
import type { Txn } from './txn.js';
import {
  assert,
  type Command,
  type EntityDef,
  type EntityOf,
  type Expect,
  type FieldDef,
  fail,
  type Row,
  type RowMap,
} from './types.js';

const BASE_FIELDS = new Set(['id', 'createdAt', 'updatedAt', 'tags', 'isSystem']);
/** Cascading deletes may chain (identity → api session → session); this bounds the depth. */
const MAX_CASCADE_DEPTH = 8;
const MAX_BATCH_OPS = 10_000;
/** Conditions one command may carry. */
const MAX_EXPECT = 16;

/**
 * Applies one command to `txn`. Deterministic: the result depends only on the command and the state read
 * through `txn`. Throws StoreFailure (a recorded, expected failure) or an invariant Error; the caller drops `txn`
 * in both cases, so a failed command leaves no trace.
 */
export function applyCommand<M extends RowMap>(schema: Schema<M>, txn: Txn<M>, cmd: Command<EntityOf<M>>): unknown {
  // Apply is generic over entity types: it reaches every entity by name (checked against the schema at run time), so
  // it works on the untyped view of the schema and the transaction (`M` is a compile-time type only).
  const ctx = new Context(schema as unknown as Schema, txn as unknown as Txn);
  return ctx.run(cmd);
}

class Context implements ApplyContext {
  constructor(
    private readonly schema: Schema,
    readonly txn: Txn,
  ) {}

  run(cmd: Command): unknown {
    if (cmd.op !== 'custom' && cmd.expect !== undefined) this.checkExpect(cmd.expect);
    switch (cmd.op) {
      case 'create':
        this.create(cmd.entity, cmd.id, cmd.data, cmd.at, cmd.system);
        return cmd.id;
      case 'update':
        this.update(cmd.entity, cmd.id, cmd.set, cmd.at, cmd.system);
        return cmd.id;
      case 'delete':
        if (cmd.ifExists && !this.txn.get(cmd.entity, cmd.id)) return null;
        this.delete(cmd.entity, cmd.id, cmd.at, cmd.system);
        return cmd.id;
      case 'batch': {
        assert(cmd.ops.length <= MAX_BATCH_OPS, `batch of ${cmd.ops.length} ops exceeds ${MAX_BATCH_OPS}`);
        const out: unknown[] = [];
        for (const op of cmd.ops) out.push(this.run(op));
        return out;
      }
      case 'custom': {
        const fn = this.schema.custom.get(cmd.name);
        assert(fn, `unknown custom command ${cmd.name}`);
        return fn(this, cmd.args as never, cmd.at);
      }
    }
  }

  create(entity: string, id: string, data: Record<string, unknown>, at: string, system = false): void {
    const def = this.schema.def(entity);
    assert(typeof id === 'string' && id.length > 0, 'create without id');
    if (this.txn.get(entity, id)) {
      fail({
        code: 'ALREADY_EXISTS',
        entity,
        id,
        reason: `an entity of type ${def.type} already exists with id ${id}`,
      });
    }
    checkFields(def, data);
    if (data.isSystem && !system) fail({ code: 'INVALID', entity, id, reason: 'cannot create a system entity' });
    const row = definedCopy(data) as Row;
    row.id = id;
    row.createdAt = at;
    row.updatedAt = at;
    row.tags = (data.tags as Row['tags'] | undefined) ?? {};
    this.checkRow(def, row, undefined);
    this.txn.put(entity, row);
  }

  update(entity: string, id: string, set: Record<string, unknown>, at: string, system = false): Row {
    const def = this.schema.def(entity);
    const old = this.txn.get(entity, id);
    if (!old) fail({ code: 'NOT_FOUND', entity, id, reason: `${def.type} with id ${id} not found` });
    if (old.isSystem && !system) {
      fail({
        code: 'SYSTEM_UPDATE',
        entity,
        id,
        reason: `cannot update system ${def.type} in a non-system context (id=${id})`,
      });
    }
    checkFields(def, set);
    assert(!('id' in set) && !('createdAt' in set), 'update may not change id or createdAt');
    const next = definedCopy(old) as Row;
    next.updatedAt = at;
    for (const [k, v] of Object.entries(set)) {
      if (v === undefined) delete next[k];
      else next[k] = v;
    }
    if (next.tags === null || next.tags === undefined) next.tags = {};
    this.checkRow(def, next, old);
    this.txn.put(entity, next);
    return next;
  }

  delete(entity: string, id: string, at: string, system = false, depth = 0): void {
    assert(depth <= MAX_CASCADE_DEPTH, `cascade deeper than ${MAX_CASCADE_DEPTH} deleting ${entity}/${id}`);
    const def = this.schema.def(entity);
    const row = this.txn.get(entity, id);
    if (!row) fail({ code: 'NOT_FOUND', entity, id, reason: `${def.type} with id ${id} not found` });
    if (row.isSystem && !system) {
      fail({
        code: 'SYSTEM_DELETE',
        entity,
        id,
        reason: `cannot delete system ${def.type} in a non-system context (id=${id})`,
      });
    }
    const referrers = this.schema.referrers.get(entity) ?? [];
    for (const r of referrers) {
      if (r.onDelete !== 'restrict') continue;
      const ids = this.txn.lookup(r.entity, r.field, id);
      if (ids.length > 0) {
        const type = this.schema.def(r.entity).type;
        fail({
          code: 'REFERENCED',
          entity,
          id,
          field: 'id',
          value: id,
          reason: `cannot delete ${def.type} ${id}, referenced by ${type} [${ids.sort().join(', ')}]`,
        });
      }
    }
    for (const r of referrers) {
      if (r.onDelete === 'restrict') continue;
      const ids = this.txn.lookup(r.entity, r.field, id).sort();
      for (const rid of ids) {
        if (r.onDelete === 'cascade') {
          if (this.txn.get(r.entity, rid)) this.delete(r.entity, rid, at, true, depth + 1);
        } else {
          const other = this.txn.get(r.entity, rid)!;
          const v = other[r.field];
          const cleared = Array.isArray(v) ? v.filter((x) => x !== id) : null;
          this.txn.put(r.entity, { ...other, [r.field]: cleared, updatedAt: at });
        }
      }
    }
    // policies naming the row by `@id` stop naming it
    const ref = `@${id}`;
    for (const r of this.schema.roleReferrers.get(entity) ?? []) {
      for (const pid of this.txn.lookup(r.entity, r.field, ref).sort()) {
        const policy = this.txn.get(r.entity, pid)!;
        const roles = (policy[r.field] as string[]).filter((x) => x !== ref);
        this.txn.put(r.entity, { ...policy, [r.field]: roles, updatedAt: at });
      }
    }
    this.txn.del(entity, id);
  }

  private checkExpect(expect: Expect[]): void {
    assert(Array.isArray(expect) && expect.length <= MAX_EXPECT, `expect of more than ${MAX_EXPECT} conditions`);
    for (const e of expect) {
      let holds: boolean;
      if (e.check === 'absent') {
        holds = this.txn.lookup(e.entity, e.field, e.value).length === 0;
      } else {
        assert(typeof e.id === 'string', `expect ${e.check} without an id`);
        const row = this.txn.get(e.entity, e.id);
        holds = e.check === 'eq' ? row !== undefined && row[e.field] === e.value : row?.[e.field] !== e.value;
      }
      if (!holds) {
        fail({
          code: 'PRECONDITION',
          entity: e.entity,
          ...(e.id === undefined ? {} : { id: e.id }),
          field: e.errorField ?? e.field,
          value: e.value,
          reason: e.reason,
          ...(e.apiCode === undefined ? {} : { apiCode: e.apiCode }),
        });
      }
    }
  }

  /** Every `@id` a role list gains names an existing row (OpenZiti: "no <type> found with the given ids"). */
  private checkRoleIds(
    def: EntityDef,
    row: Row,
    field: string,
    target: string,
    values: readonly unknown[],
    before: ReadonlySet<unknown>,
  ): void {
    const missing: string[] = [];
    for (const v of values) {
      if (before.has(v) || typeof v !== 'string' || !v.startsWith('@')) continue;
      if (!this.txn.get(target, v.slice(1))) missing.push(v.slice(1));
    }
    if (missing.length === 0) return;
    fail({
      code: 'REF_NOT_FOUND',
      entity: def.name,
      id: row.id,
      field,
      value: missing,
      reason: `no ${target} found with the given ids`,
    });
  }

  /** Reference and uniqueness checks for a row about to be written (old = its previous version). */
  private checkRow(def: EntityDef, row: Row, old: Row | undefined): void {
    for (const [field, f] of checkedFields(def)) {
      const values = indexValues(row, field);
      if (values.length === 0) continue;
      const before: ReadonlySet<unknown> = old === undefined ? NONE : new Set(indexValues(old, field));
      if (f.roles) this.checkRoleIds(def, row, field, f.roles.entity, values, before);
      if (f.ref) {
        const target = this.schema.def(f.ref.entity);
        for (const v of values) {
          if (before.has(v)) continue;
          if (typeof v !== 'string' || !this.txn.get(f.ref.entity, v)) {
            fail({
              code: 'REF_NOT_FOUND',
              entity: def.name,
              id: row.id,
              field,
              value: v,
              reason: `${target.type} with id ${String(v)} not found`,
            });
          }
        }
      }
      if (f.unique) {
        for (const v of values) {
          const holders = this.txn.lookup(def.name, field, v).filter((x) => x !== row.id);
          if (holders.length > 0) {
            fail({
              code: 'UNIQUE',
              entity: def.name,
              id: row.id,
              field,
              value: v,
              reason: `duplicate value '${String(v)}' in unique index on ${def.name} store`,
              ...(f.conflictCode ? { apiCode: f.conflictCode } : {}),
            });
          }
        }
      }
    }
  }
}

const NONE: ReadonlySet<unknown> = new Set();

/** Per declaration, the fields `checkRow` checks: role lists, references and unique fields (computed once). */
const CHECKED_FIELDS = new WeakMap<EntityDef, ReadonlyArray<[string, FieldDef]>>();

function checkedFields(def: EntityDef): ReadonlyArray<[string, FieldDef]> {
  let fields = CHECKED_FIELDS.get(def);
  if (fields === undefined) {
    fields = Object.entries(def.fields).filter(([, f]) => Boolean(f.roles || f.ref || f.unique));
    CHECKED_FIELDS.set(def, fields);
  }
  return fields;
}

function checkFields(def: EntityDef, data: Record<string, unknown>): void {
  for (const k of Object.keys(data)) {
    assert(BASE_FIELDS.has(k) || k in def.fields, `${def.name} has no field ${k}`);
  }
}

/**
 * A shallow copy of `data` without its undefined fields, in its key order, built key by key: the object a row is
 * made from (stored rows hold no undefined field, so for them it is a plain copy). Not `{ ...data, id, … }`: V8
 * builds a new hidden class for every property added to an object made by spread, about 1 µs each, and the rows
 * come out slower to encode and index (bench/apply.ts: 11 of the 41 µs an identity create cost a member).
 */
function definedCopy(data: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(data)) {
    const v = data[k];
    if (v !== undefined) out[k] = v;
  }
  return out;
}
