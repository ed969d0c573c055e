import { forEachIndexValue, indexable } from './collection.js';
import { NO_FIELDS, ownString, storedValue } from './row-values.js';
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
  UnknownCommandError,
} from './types.js';

const BASE_FIELDS = new Set(['id', 'createdAt', 'updatedAt', 'tags', 'isSystem']);
/** Cascading deletes may chain (identity → api session → session); this bounds the depth. */
const MAX_CASCADE_DEPTH = 8;
const MAX_BATCH_OPS = 10_000;
/** Conditions one command may carry. */
const MAX_EXPECT = 16;

/** Applies commands to one transaction, one `applyCommand` at a time (`commandApplier`). */
export interface CommandApplier<M extends RowMap> {
  /**
   * Applies one command to the transaction. Deterministic: the result depends only on the command and the state
   * read through the transaction. Throws StoreFailure (a recorded, expected failure) or an invariant Error; the
   * caller drops (or rolls back) the command's writes in both cases, so a failed command leaves no trace.
   */
  applyCommand(cmd: Command<EntityOf<M>>): unknown;
}

/**
 * The applier of commands to `txn`: one for a group of commands (it keeps nothing from one command to the next, so
 * the group needs no object per command).
 */
export function commandApplier<M extends RowMap>(schema: Schema<M>, txn: Txn<M>): CommandApplier<M> {
  // Apply is generic over entity types: it reaches every entity by name (checked against the schema at run time), so
  // it works on the untyped view of the schema and the transaction (`M` is a compile-time type only).
  return new Context(schema as unknown as Schema, txn as unknown as Txn);
}

class Context implements ApplyContext {
  /** The field checkRow is checking, for its visitors (one per group of commands: nothing allocated per row). */
  private readonly fieldCheck = new FieldCheck();

  constructor(
    private readonly schema: Schema,
    readonly txn: Txn,
  ) {}

  applyCommand(cmd: Command): unknown {
    return this.run(cmd);
  }

  private run(cmd: Command): unknown {
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
        if (fn === undefined) throw new UnknownCommandError(`custom command ${String(cmd.name)}`);
        return fn(this, cmd.args as never, cmd.at);
      }
    }
    throw new UnknownCommandError(`op ${String((cmd as { op?: unknown }).op)}`);
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
    const row = definedCopy(def, data, true) as Row; // checks every field of `data` (checkFields)
    if (data.isSystem && !system) fail({ code: 'INVALID', entity, id, reason: 'cannot create a system entity' });
    const stamp = ownString(at);
    row.id = ownString(id);
    row.createdAt = stamp;
    row.updatedAt = stamp;
    row.tags = row.tags ?? NO_FIELDS;
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
    const next = definedCopy(def, old, false) as Row;
    next.updatedAt = ownString(at);
    for (const k in set) {
      const v = set[k];
      if (v === undefined) delete next[k];
      else next[k] = storedValue(v);
    }
    if (next.tags === null || next.tags === undefined) next.tags = NO_FIELDS;
    this.checkRow(def, next, old);
    this.txn.put(entity, next);
    return next;
  }

  delete(entity: string, id: string, at: string, system = false, depth = 0): void {
    if (depth > MAX_CASCADE_DEPTH) assert(false, `cascade deeper than ${MAX_CASCADE_DEPTH} deleting ${entity}/${id}`);
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
    if (!Array.isArray(expect) || expect.length > MAX_EXPECT)
      assert(false, `expect of more than ${MAX_EXPECT} conditions`);
    for (const e of expect) {
      let holds: boolean;
      if (e.check === 'absent') {
        holds = this.txn.lookup(e.entity, e.field, e.value).length === 0;
      } else {
        if (typeof e.id !== 'string') assert(false, `expect ${e.check} without an id`);
        const row = this.txn.get(e.entity, e.id);
        holds = e.check === 'eq' ? row !== undefined && row[e.field] === e.value : row?.[e.field] !== e.value;
      }
      if (!holds) {
        fail({
          code: 'PRECONDITION',
          entity: e.entity,
          ...(e.id === undefined ? {} : { id: e.id }),
          // the request's field, if the condition names one: its own field is the store's (never reported)
          ...(e.errorField === undefined ? {} : { field: e.errorField }),
          value: e.value,
          reason: e.reason,
          ...(e.apiCode === undefined ? {} : { apiCode: e.apiCode }),
        });
      }
    }
  }

  /**
   * Reference and uniqueness checks for a row about to be written (old = its previous version): per field, its role
   * list's `@id`s, then its references, then its unique values, each in `indexValues` order (`forEachIndexValue`
   * with the visitors below); without allocating on the common path (a scalar value, or a short old list).
   */
  private checkRow(def: EntityDef, row: Row, old: Row | undefined): void {
    const fields = checkedFields(def);
    const c = this.fieldCheck;
    c.def = def;
    c.row = row;
    for (let i = 0; i < fields.length; i++) {
      const { name: field, f } = fields[i]!;
      if (!indexable(row[field])) continue;
      c.field = field;
      c.f = f;
      // what the old row held, for the role and reference checks (a unique value is checked whatever it was)
      c.before = old === undefined || !(f.roles || f.ref) ? undefined : beforeOf(old[field]);
      c.missing = undefined;
      if (f.roles) {
        forEachIndexValue(row, field, checkRoleId, this, c);
        // OpenZiti: "no <type> found with the given ids", naming every missing one
        if (c.missing !== undefined) {
          fail({
            code: 'REF_NOT_FOUND',
            entity: def.name,
            id: row.id,
            field,
            value: c.missing,
            reason: `no ${f.roles.entity} found with the given ids`,
          });
        }
      }
      if (f.ref) forEachIndexValue(row, field, checkRefValue, this, c);
      if (f.unique) forEachIndexValue(row, field, checkUniqueValue, this, c);
    }
  }

  /** The id of the `target` row `v` names (the same string), or a REF_NOT_FOUND failure. */
  checkRef(def: EntityDef, row: Row, field: string, target: string, v: unknown): string {
    const found = typeof v === 'string' ? this.txn.get(target, v) : undefined;
    if (found) return found.id;
    fail({
      code: 'REF_NOT_FOUND',
      entity: def.name,
      id: row.id,
      field,
      value: v,
      reason: `${this.schema.def(target).type} with id ${String(v)} not found`,
    });
  }

  checkUnique(def: EntityDef, row: Row, field: string, f: FieldDef, v: unknown): void {
    const holders = this.txn.lookup(def.name, field, v);
    if (heldByAnother(holders, row.id)) {
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

/**
 * The field `checkRow` is checking, read by its visitors (`forEachIndexValue` passes them the context and this; no
 * closure, nothing allocated per row). One per Context, set field by field.
 */
class FieldCheck {
  def!: EntityDef;
  row!: Row;
  field = '';
  f!: FieldDef;
  /** `beforeOf` the old row's value of the field (undefined: a create). */
  before: unknown = undefined;
  /** The `@id`s of a role list that name no row. */
  missing: string[] | undefined = undefined;
}

/** Every `@id` a role list gains names an existing row (values the old row held are not checked again). */
function checkRoleId(v: unknown, ctx: Context, c: FieldCheck): void {
  if (typeof v !== 'string' || !v.startsWith('@') || heldBefore(c.before, v)) return;
  if (!ctx.txn.get(c.f.roles!.entity, v.slice(1))) (c.missing ??= []).push(v.slice(1));
}

/** A reference names an existing row (unless the old row held it already). */
function checkRefValue(v: unknown, ctx: Context, c: FieldCheck): void {
  if (heldBefore(c.before, v)) return;
  const target = ctx.checkRef(c.def, c.row, c.field, c.f.ref!.entity, v);
  // the row keeps the referenced row's id (one string in memory for every row naming it), not its own copy
  if (!Array.isArray(c.row[c.field])) c.row[c.field] = target;
}

/** A unique value is held by no other row. */
function checkUniqueValue(v: unknown, ctx: Context, c: FieldCheck): void {
  ctx.checkUnique(c.def, c.row, c.field, c.f, v);
}

/** Whether `ids` names a row other than `id`. */
function heldByAnother(ids: readonly string[], id: string): boolean {
  for (let i = 0; i < ids.length; i++) if (ids[i] !== id) return true;
  return false;
}

/** Old lists longer than this are looked up through a Set (checking n new values against m old ones: n + m). */
const SCAN_BEFORE_MAX = 16;

/** What `heldBefore` searches for an old row's value of a field: the value itself, or a Set of a long list. */
function beforeOf(held: unknown): unknown {
  return Array.isArray(held) && held.length > SCAN_BEFORE_MAX ? new Set(held) : held;
}

/** Whether the old row already held `v` (`before`: `beforeOf` the old value; undefined: no old row). */
function heldBefore(before: unknown, v: unknown): boolean {
  // `v` is indexable, so it never equals one of the values an index skips (null, undefined, '')
  if (before instanceof Set) return before.has(v);
  if (Array.isArray(before)) return before.includes(v);
  return before === v || (Number.isNaN(before) && Number.isNaN(v));
}

/** Per declaration, the fields `checkRow` checks: role lists, references and unique fields (computed once). */
const CHECKED_FIELDS = new WeakMap<EntityDef, ReadonlyArray<{ name: string; f: FieldDef }>>();

function checkedFields(def: EntityDef): ReadonlyArray<{ name: string; f: FieldDef }> {
  let fields = CHECKED_FIELDS.get(def);
  if (fields === undefined) {
    fields = Object.entries(def.fields)
      .filter(([, f]) => Boolean(f.roles || f.ref || f.unique))
      .map(([name, f]) => ({ name, f }));
    CHECKED_FIELDS.set(def, fields);
  }
  return fields;
}

function checkFields(def: EntityDef, data: Record<string, unknown>): void {
  for (const k in data) checkField(def, k);
}

function checkField(def: EntityDef, k: string): void {
  if (!BASE_FIELDS.has(k) && !Object.hasOwn(def.fields, k)) assert(false, `${def.name} has no field ${k}`);
}

/**
 * A shallow copy of `data` without its undefined fields, in its key order, built key by key: the object a row is
 * made from (stored rows hold no undefined field, so for them it is a plain copy). Not `{ ...data, id, … }`: V8
 * builds a new hidden class for every property added to an object made by spread, about 1 µs each, and the rows
 * come out slower to encode and index (bench/apply.ts: 11 of the 41 µs an identity create cost a member). With
 * `fresh` (`data` is a command's: a create), every key is checked to be a field of `def` on the way (`checkFields`)
 * and values are stored as row-values.ts keeps them, except a single reference: `checkRow` replaces it by the
 * referenced row's id (or fails the command), so a copy of it would be thrown away. `for…in`, not `Object.keys`: no
 * array of keys per row (the data is a plain object, decoded or built by apply: no enumerable inherited keys).
 */
function definedCopy(def: EntityDef, data: Record<string, unknown>, fresh: boolean): Record<string, unknown> {
  const out = newRow(def);
  for (const k in data) {
    if (fresh) checkField(def, k);
    const v = data[k];
    if (v === undefined) continue;
    out[k] = !fresh || (typeof v === 'string' && def.fields[k]?.ref !== undefined) ? v : storedValue(v);
  }
  return out;
}

/** Per declaration, the constructor of its rows (see `newRow`). */
const ROW_MAKERS = new WeakMap<EntityDef, new () => Record<string, unknown>>();

/**
 * An empty row of `def`: a plain object (its prototype Object.prototype, its constructor Object) made by a
 * constructor of the entity type's own, so that V8 sizes its objects to the fields its rows get (slack tracking)
 * and keeps every field in the object. A `{}` has room for four: the other fields of a row would live in a separate
 * property array (64 B more per identity).
 */
function newRow(def: EntityDef): Record<string, unknown> {
  let make = ROW_MAKERS.get(def);
  if (make === undefined) {
    const maker = function Row() {} as unknown as new () => Record<string, unknown>;
    maker.prototype = Object.prototype;
    make = maker;
    ROW_MAKERS.set(def, make);
  }
  return new make();
}
