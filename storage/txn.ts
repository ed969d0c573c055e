import { indexValues } from './collection.js';
import type { EntityOf, Row, RowMap } from './types.js';

/** Read access to a state: the published store, or a transaction layered on it. `M`: the row types (types.ts). */
export interface StateReader<M extends RowMap = RowMap> {
  get<E extends EntityOf<M>>(entity: E, id: string): M[E] | undefined;
  /** Ids of `entity` rows whose `field` equals (sets: contains) `value`. The field must be indexed, unique or `id`. */
  lookup(entity: EntityOf<M>, field: string, value: unknown): string[];
}

/**
 * A write overlay on a StateReader. Commands apply into a Txn; a failed command's Txn is dropped (nothing
 * half-applied), a successful one is merged into its parent. The outermost Txn of a group becomes one LevelDB batch.
 *
 * Lookups see through the overlay: parent ids not rewritten here, plus overlay rows that match. Overlay matches
 * come from per-field indexes built on first use and kept up to date by put/del, so a group of thousands of
 * creates stays linear.
 */
export class Txn<M extends RowMap = RowMap> implements StateReader<M> {
  /** entity → id → new row, or null for a delete. Insertion-ordered, so replay order is deterministic. */
  readonly writes = new Map<string, Map<string, Row | null>>();
  /** entity → field → value → ids of overlay rows holding it. */
  private readonly overlayIdx = new Map<string, Map<string, Map<unknown, Set<string>>>>();

  constructor(private readonly parent: StateReader<M>) {}

  get<E extends EntityOf<M>>(entity: E, id: string): M[E] | undefined {
    const w = this.writes.get(entity);
    // rows of `entity` are written only through put, typed M[E]
    if (w?.has(id)) return (w.get(id) as M[E] | null) ?? undefined;
    return this.parent.get(entity, id);
  }

  lookup(entity: EntityOf<M>, field: string, value: unknown): string[] {
    const w = this.writes.get(entity);
    const base = this.parent.lookup(entity, field, value);
    if (!w || w.size === 0) return base;
    const out = base.filter((id) => !w.has(id));
    if (field === 'id') {
      if (typeof value === 'string' && w.get(value)) out.push(value);
      return out;
    }
    const ids = this.fieldIndex(entity, field).get(value);
    if (ids) for (const id of ids) out.push(id);
    return out;
  }

  private fieldIndex(entity: string, field: string): Map<unknown, Set<string>> {
    let byField = this.overlayIdx.get(entity);
    if (!byField) this.overlayIdx.set(entity, (byField = new Map()));
    let idx = byField.get(field);
    if (!idx) {
      byField.set(field, (idx = new Map()));
      for (const [id, row] of this.writes.get(entity) ?? []) if (row) addTo(idx, row, field, id);
    }
    return idx;
  }

  private reindex(entity: string, id: string, next: Row | null): void {
    const byField = this.overlayIdx.get(entity);
    if (!byField) return;
    const prev = this.writes.get(entity)?.get(id);
    for (const [field, idx] of byField) {
      if (prev) for (const v of indexValues(prev, field)) idx.get(v)?.delete(id);
      if (next) addTo(idx, next, field, id);
    }
  }

  put<E extends EntityOf<M>>(entity: E, row: M[E]): void {
    this.reindex(entity, row.id, row);
    let w = this.writes.get(entity);
    if (!w) this.writes.set(entity, (w = new Map()));
    w.set(row.id, row);
  }

  del(entity: EntityOf<M>, id: string): void {
    this.reindex(entity, id, null);
    let w = this.writes.get(entity);
    if (!w) this.writes.set(entity, (w = new Map()));
    w.set(id, null);
  }

  /** Moves this overlay's writes into `into` (the parent), in order. */
  mergeInto(into: Txn<M>): void {
    // the keys of `writes` are entity names of M (written by put/del)
    for (const [entity, w] of this.writes as Map<EntityOf<M>, Map<string, M[EntityOf<M>] | null>>) {
      for (const [id, row] of w) {
        if (row) into.put(entity, row);
        else into.del(entity, id);
      }
    }
  }

  get empty(): boolean {
    for (const w of this.writes.values()) if (w.size > 0) return false;
    return true;
  }
}

function addTo(idx: Map<unknown, Set<string>>, row: Row, field: string, id: string): void {
  for (const v of indexValues(row, field)) {
    let set = idx.get(v);
    if (!set) idx.set(v, (set = new Set()));
    set.add(id);
  }
}
