import { SortedIds } from './sorted-ids.js';
import { assert, type EntityDef, type Row } from './types.js';

const NO_VALUES: readonly unknown[] = Object.freeze([]);

function indexable(x: unknown): boolean {
  return x !== undefined && x !== null && x !== '';
}

/**
 * Values of `field` in `row` that an index holds: every element of a set, or the scalar; null/undefined/'' are
 * skipped. Read-only: a set with nothing to skip is returned as it is (rows are immutable), so the indexing every
 * write does allocates only for scalars.
 */
export function indexValues(row: Row | undefined, field: string): readonly unknown[] {
  if (!row) return NO_VALUES;
  const v = row[field];
  if (!indexable(v)) return NO_VALUES;
  if (Array.isArray(v)) return v.every(indexable) ? v : v.filter(indexable);
  return [v];
}

/**
 * The in-memory, published state of one entity type: rows by id, ids in order, equality indexes and unique maps.
 * Only the Store mutates it (when a durable batch is published); everything else reads. `R`: the row type (a type
 * only, see types.ts RowMap).
 */
export class Collection<R extends Row = Row> {
  private readonly rows = new Map<string, R>();
  private ids = new SortedIds();
  private readonly indexes = new Map<string, Map<unknown, Set<string>>>();
  private readonly uniques = new Map<string, Map<unknown, string>>();

  constructor(readonly def: EntityDef) {
    for (const [name, f] of Object.entries(def.fields)) {
      if (f.unique) this.uniques.set(name, new Map());
      else if (f.index || f.ref) this.indexes.set(name, new Map());
    }
  }

  get size(): number {
    return this.rows.size;
  }

  get(id: string): R | undefined {
    return this.rows.get(id);
  }

  /** All rows in ascending id order. */
  *scan(offset = 0): IterableIterator<R> {
    for (const id of this.ids.from(offset)) yield this.rows.get(id)!;
  }

  isIndexed(field: string): boolean {
    return field === 'id' || this.indexes.has(field) || this.uniques.has(field);
  }

  /** Ids whose `field` equals (or, for sets, contains) `value`; undefined when the field has no index. */
  lookup(field: string, value: unknown): Iterable<string> | undefined {
    if (field === 'id') return typeof value === 'string' && this.rows.has(value) ? [value] : [];
    const u = this.uniques.get(field);
    if (u) {
      const id = u.get(value);
      return id === undefined ? [] : [id];
    }
    const idx = this.indexes.get(field);
    if (!idx) return undefined;
    return idx.get(value) ?? [];
  }

  /** Distinct indexed values of a field (role attributes listing). */
  values(field: string): Iterable<unknown> {
    return (this.indexes.get(field) ?? this.uniques.get(field) ?? new Map()).keys();
  }

  /** Bulk load at start: rows in ascending id order. */
  load(rows: R[]): void {
    assert(this.rows.size === 0, 'load into a non-empty collection');
    for (const row of rows) {
      this.rows.set(row.id, row);
      this.indexRow(row);
    }
    this.ids = SortedIds.fromSorted(rows.map((r) => r.id));
  }

  put(row: R): void {
    const old = this.rows.get(row.id);
    if (old) this.unindexRow(old);
    this.rows.set(row.id, row);
    this.indexRow(row);
    if (!old) this.ids.insert(row.id);
  }

  delete(id: string): void {
    const old = this.rows.get(id);
    if (!old) return;
    this.unindexRow(old);
    this.rows.delete(id);
    this.ids.delete(id);
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
    const ids = [...this.ids.from(0)];
    if (ids.length !== rows.length || ids.some((id, i) => id !== rows[i]!.id))
      note('the id order does not match the rows');
    const fresh = new Collection(this.def);
    try {
      fresh.load(rows);
    } catch (err) {
      // a unique value held by two rows: the store refused it on every write, so the rows themselves are damaged
      note(`rows violate a unique index (${(err as Error).message})`);
      return out;
    }
    for (const [field, map] of this.uniques) {
      const want = fresh.uniques.get(field)!;
      for (const [v, id] of map)
        if (want.get(v) !== id) note(`unique index ${field} holds ${String(v)} → ${id} wrongly`);
      for (const [v, id] of want) if (!map.has(v)) note(`unique index ${field} lacks ${String(v)} → ${id}`);
    }
    for (const [field, map] of this.indexes) {
      const want = fresh.indexes.get(field)!;
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
    for (const map of this.uniques.values()) map.clear();
    for (const map of this.indexes.values()) map.clear();
    for (const row of rows) this.indexRow(row);
    this.ids = SortedIds.fromSorted(rows.map((r) => r.id));
  }

  private indexRow(row: Row): void {
    for (const [field, map] of this.uniques) {
      for (const v of indexValues(row, field)) {
        const holder = map.get(v);
        assert(
          holder === undefined || holder === row.id,
          `unique index ${this.def.name}.${field} violated by ${row.id}`,
        );
        map.set(v, row.id);
      }
    }
    for (const [field, map] of this.indexes) {
      for (const v of indexValues(row, field)) {
        let set = map.get(v);
        if (!set) map.set(v, (set = new Set()));
        set.add(row.id);
      }
    }
  }

  private unindexRow(row: Row): void {
    for (const [field, map] of this.uniques) {
      for (const v of indexValues(row, field)) if (map.get(v) === row.id) map.delete(v);
    }
    for (const [field, map] of this.indexes) {
      for (const v of indexValues(row, field)) {
        const set = map.get(v);
        if (!set) continue;
        set.delete(row.id);
        if (set.size === 0) map.delete(v);
      }
    }
  }
}
