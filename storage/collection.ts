import { ShardedMap, ShardedSet, SPLIT_AT } from './sharded.js';
import { SortedIds } from './sorted-ids.js';
import { SortedRows } from './sorted-rows.js';
import { assert, type EntityDef, type Row } from './types.js';

const NO_VALUES: readonly unknown[] = Object.freeze([]);
const NO_IDS: readonly string[] = Object.freeze([]);
const NO_VALUES_MAP: ReadonlyMap<unknown, unknown> = new Map<unknown, unknown>();

/** Whether an index holds `x` (null, undefined and the empty string are skipped). */
export function indexable(x: unknown): boolean {
  return x !== undefined && x !== null && x !== '';
}

/**
 * Values of `field` in `row` that an index holds: every element of a set, or the scalar; null/undefined/'' are
 * skipped. Read-only: a set with nothing to skip is returned as it is (rows are immutable). The hot paths (indexing,
 * write checks) use `forEachIndexValue`, which allocates nothing.
 */
export function indexValues(row: Row | undefined, field: string): readonly unknown[] {
  if (!row) return NO_VALUES;
  const v = row[field];
  if (!indexable(v)) return NO_VALUES;
  if (Array.isArray(v)) return v.every(indexable) ? v : v.filter(indexable);
  return [v];
}

/**
 * Calls `visit(value, a, b)` for each value `indexValues(row, field)` gives, in the same order, without allocating
 * (`visit` is meant to be a module-level function: extra state goes through `a` and `b`, not a closure). Bounded by
 * the length of the row's array.
 */
export function forEachIndexValue<A, B>(
  row: Row | undefined,
  field: string,
  visit: (value: unknown, a: A, b: B) => void,
  a: A,
  b: B,
): void {
  if (!row) return;
  const v = row[field];
  if (!indexable(v)) return;
  if (!Array.isArray(v)) {
    visit(v, a, b);
    return;
  }
  for (let i = 0; i < v.length; i++) if (indexable(v[i])) visit(v[i], a, b);
}

/**
 * The ids holding one value of an equality index: a native Set, and once it holds SPLIT_AT ids a SortedIds (a scalar
 * field's index: one value shared by most rows, new ids appended in order) or a ShardedSet (a set field's, as the
 * role attributes: fast membership for the policy engine's intersections).
 */
export type IdSet = Set<string> | ShardedSet<string> | SortedIds;

/**
 * A field's index: value → the ids holding it (equality indexes) or the one id (unique indexes). Sharded maps and
 * sets (sharded.ts): a unique index, or an index holding every row under one value (`typeId`), grows with the
 * collection and would otherwise rehash all its keys in one step at each doubling.
 */
interface IndexOf<T> {
  field: string;
  map: ShardedMap<unknown, T>;
  /** `entity.field`, for messages. */
  label: string;
}

/** An equality index: how it adds an id to a value's set (addScalarId for a scalar field, addId for a set field). */
interface EqualityIndex extends IndexOf<IdSet> {
  add: (v: unknown, map: IdSetMap<unknown>, id: string) => void;
}

/**
 * The in-memory, published state of one entity type: rows by id, ids in order, equality indexes and unique maps.
 * Only the Store mutates it (when a durable batch is published); everything else reads. `R`: the row type (a type
 * only, see types.ts RowMap).
 */
export class Collection<R extends Row = Row> {
  private readonly rows = new ShardedMap<string, R>();
  /** The rows again, in id order (for scans and captures without a lookup per id). */
  private ordered = new SortedRows<R>();
  /**
   * The unique indexes and the equality indexes, in field order: lists, so that the indexing every write does walks
   * them without an iterator; found by name by a scan (`named`: a handful per entity type, no second map to keep).
   */
  private readonly uniques: IndexOf<string>[] = [];
  private readonly indexes: EqualityIndex[] = [];

  constructor(readonly def: EntityDef) {
    for (const [name, f] of Object.entries(def.fields)) {
      const label = `${def.name}.${name}`;
      if (f.unique) this.uniques.push({ field: name, map: new ShardedMap(), label });
      else if (f.index || f.ref)
        this.indexes.push({ field: name, map: new ShardedMap(), label, add: f.set ? addId : addScalarId });
    }
  }

  get size(): number {
    return this.rows.size;
  }

  get(id: string): R | undefined {
    // Ids sort by creation time (src/util/ids.ts): a new row's id is past every id held, so the common miss — the
    // check that a create's id is free — is one comparison instead of a probe of a map of every row.
    const last = this.ordered.lastId();
    if (last === undefined || id > last) return undefined;
    return this.rows.get(id);
  }

  /** All rows in ascending id order. */
  scan(offset = 0): IterableIterator<R> {
    return this.ordered.from(offset);
  }

  /** All rows in ascending id order, as a new array captured now (rows are replaced on write, never changed). */
  rowsInOrder(): R[] {
    return this.ordered.toArray();
  }

  isIndexed(field: string): boolean {
    return field === 'id' || named(this.indexes, field) !== undefined || named(this.uniques, field) !== undefined;
  }

  /** Ids whose `field` equals (or, for sets, contains) `value`; undefined when the field has no index. */
  lookup(field: string, value: unknown): Iterable<string> | undefined {
    if (field === 'id') return typeof value === 'string' && this.rows.has(value) ? [value] : NO_IDS;
    const u = named(this.uniques, field);
    if (u) {
      const id = u.map.get(value);
      return id === undefined ? NO_IDS : [id];
    }
    const idx = named(this.indexes, field);
    if (!idx) return undefined;
    return idx.map.get(value) ?? NO_IDS;
  }

  /** How many ids `lookup(field, value)` yields, without reading them; undefined when the field has no index. */
  lookupSize(field: string, value: unknown): number | undefined {
    if (field === 'id') return typeof value === 'string' && this.rows.has(value) ? 1 : 0;
    const u = named(this.uniques, field);
    if (u) return u.map.has(value) ? 1 : 0;
    const idx = named(this.indexes, field);
    if (!idx) return undefined;
    return idx.map.get(value)?.size ?? 0;
  }

  /** Distinct indexed values of a field (role attributes listing). */
  values(field: string): Iterable<unknown> {
    return (named(this.indexes, field)?.map ?? named(this.uniques, field)?.map ?? NO_VALUES_MAP).keys();
  }

  /** Bulk load at start: rows in ascending id order. */
  load(rows: R[]): void {
    assert(this.rows.size === 0, 'load into a non-empty collection');
    for (const row of rows) {
      this.rows.set(row.id, row);
      this.indexRow(row);
    }
    this.ordered = SortedRows.fromSorted(rows);
  }

  put(row: R): void {
    const old = this.get(row.id);
    if (old) this.unindexRow(old);
    this.rows.set(row.id, row);
    // the ordered rows follow the map at once: if indexing fails (the store then stops), reads still agree
    if (this.ordered.set(row) !== (old === undefined))
      assert(false, 'collection: the id order is out of step with the rows');
    this.indexRow(row);
  }

  delete(id: string): void {
    const old = this.rows.get(id);
    if (!old) return;
    this.unindexRow(old);
    this.rows.delete(id);
    if (!this.ordered.delete(id)) assert(false, 'collection: the id order is out of step with the rows');
  }

  /**
   * Differences between the indexes held and the indexes the rows give when indexed from scratch (a data integrity
   * check: the indexes are maintained incrementally on every publish). At most `limit` descriptions.
   */
  indexProblems(limit: number): string[] {
    const out: string[] = [];
    const note = (msg: string) => {
      if (out.length < limit) out.push(`${this.def.name}: ${msg}`);
    };
    const rows = [...this.rows.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const ordered = this.ordered.toArray();
    if (ordered.length !== rows.length || ordered.some((row, i) => row !== rows[i]))
      note('the id order does not match the rows');
    const fresh = new Collection(this.def);
    try {
      fresh.load(rows);
    } catch (err) {
      // a unique value held by two rows: the store refused it on every write, so the rows themselves are damaged
      note(`rows violate a unique index (${(err as Error).message})`);
      return out;
    }
    // `fresh` has the same definition: the same indexes in the same order
    for (let i = 0; i < this.uniques.length; i++) {
      const { field, map } = this.uniques[i]!;
      const want = fresh.uniques[i]!.map;
      for (const [v, id] of map)
        if (want.get(v) !== id) note(`unique index ${field} holds ${String(v)} → ${id} wrongly`);
      for (const [v, id] of want) if (!map.has(v)) note(`unique index ${field} lacks ${String(v)} → ${id}`);
    }
    for (let i = 0; i < this.indexes.length; i++) {
      const { field, map } = this.indexes[i]!;
      const want = fresh.indexes[i]!.map;
      for (const [v, set] of map) {
        const wanted = want.get(v);
        for (const id of set) if (!wanted?.has(id)) note(`index ${field} holds ${String(v)} → ${id} wrongly`);
      }
      for (const [v, set] of want) {
        const held = map.get(v);
        for (const id of set) if (!held?.has(id)) note(`index ${field} lacks ${String(v)} → ${id}`);
      }
    }
    return out;
  }

  /** Rebuilds the id order and every index from the rows (the repair of `indexProblems`). */
  reindex(): void {
    const rows = [...this.rows.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    for (const u of this.uniques) u.map.clear();
    for (const idx of this.indexes) idx.map.clear();
    for (const row of rows) this.indexRow(row);
    this.ordered = SortedRows.fromSorted(rows);
  }

  private indexRow(row: Row): void {
    for (let i = 0; i < this.uniques.length; i++) {
      const u = this.uniques[i]!;
      forEachIndexValue(row, u.field, holdUnique, u, row.id);
    }
    for (let i = 0; i < this.indexes.length; i++) {
      const idx = this.indexes[i]!;
      forEachIndexValue(row, idx.field, idx.add, idx.map, row.id);
    }
  }

  private unindexRow(row: Row): void {
    for (let i = 0; i < this.uniques.length; i++) {
      const u = this.uniques[i]!;
      forEachIndexValue(row, u.field, releaseUnique, u.map, row.id);
    }
    for (let i = 0; i < this.indexes.length; i++)
      forEachIndexValue(row, this.indexes[i]!.field, removeId, this.indexes[i]!.map, row.id);
  }
}

/** The index of `field` in `list`, if any (bounded by the entity type's fields). */
function named<T>(list: readonly IndexOf<T>[], field: string): IndexOf<T> | undefined {
  for (let i = 0; i < list.length; i++) if (list[i]!.field === field) return list[i];
  return undefined;
}

function holdUnique(v: unknown, u: IndexOf<string>, id: string): void {
  const holder = u.map.get(v);
  if (holder !== undefined && holder !== id) assert(false, `unique index ${u.label} violated by ${id}`);
  u.map.set(v, id);
}

function releaseUnique(v: unknown, map: ShardedMap<unknown, string>, id: string): void {
  if (map.get(v) === id) map.delete(v);
}

/** A map of id sets, native or sharded (an equality index; the role index's maps). */
export interface IdSetMap<K> {
  get(key: K): IdSet | undefined;
  set(key: K, ids: IdSet): unknown;
  delete(key: K): unknown;
}

/** `set` as an IdSet is held: a ShardedSet (taking it over) once it holds SPLIT_AT ids, else itself. */
export function idSetOf(set: Set<string>): IdSet {
  return set.size >= SPLIT_AT ? ShardedSet.of(set) : set;
}

/** Adds `id` to the ids holding `v` (idSetOf: a native Set becomes a ShardedSet at SPLIT_AT ids). */
export function addId<K>(v: K, map: IdSetMap<K>, id: string): void {
  const set = map.get(v);
  if (set === undefined) map.set(v, new Set([id]));
  else if (set.add(id).size >= SPLIT_AT && set instanceof Set) map.set(v, idSetOf(set));
}

/** Adds `id` to the ids holding `v` of a scalar field's index (a native Set becomes a SortedIds at SPLIT_AT ids). */
export function addScalarId<K>(v: K, map: IdSetMap<K>, id: string): void {
  const set = map.get(v);
  if (set === undefined) map.set(v, new Set([id]));
  else if (set.add(id).size >= SPLIT_AT && set instanceof Set) map.set(v, SortedIds.of(set));
}

/** Removes `id` from the ids holding `v`, and `v` from the map once no id holds it. */
export function removeId<K>(v: K, map: IdSetMap<K>, id: string): void {
  const set = map.get(v);
  if (set === undefined) return;
  set.delete(id);
  if (set.size === 0) map.delete(v);
}
