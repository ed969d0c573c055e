import { addId, forEachIndexValue, removeId } from './collection.js';
import type { EntityOf, Row, RowMap } from './types.js';

/** Read access to a state: the published store, or a transaction layered on it. `M`: the row types (types.ts). */
export interface StateReader<M extends RowMap = RowMap> {
  get<E extends EntityOf<M>>(entity: E, id: string): M[E] | undefined;
  /**
   * Ids of `entity` rows whose `field` equals (sets: contains) `value`. The field must be indexed, unique or `id`.
   * A fresh array, the caller's to change.
   */
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
  /** entity → field → value → ids of overlay rows holding it (made on the first lookup through the overlay). */
  private overlayIdx: Map<string, Map<string, Map<unknown, Set<string>>>> | null = null;

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
    // the parent's answer is a fresh array (StateReader.lookup): drop the ids rewritten here in place
    let kept = 0;
    for (let i = 0; i < base.length; i++) if (!w.has(base[i]!)) base[kept++] = base[i]!;
    base.length = kept;
    const out = base;
    if (field === 'id') {
      if (typeof value === 'string' && w.get(value)) out.push(value);
      return out;
    }
    const ids = this.fieldIndex(entity, field).get(value);
    if (ids) for (const id of ids) out.push(id);
    return out;
  }

  private fieldIndex(entity: string, field: string): Map<unknown, Set<string>> {
    if (this.overlayIdx === null) this.overlayIdx = new Map();
    let byField = this.overlayIdx.get(entity);
    if (!byField) this.overlayIdx.set(entity, (byField = new Map()));
    let idx = byField.get(field);
    if (!idx) {
      byField.set(field, (idx = new Map()));
      for (const [id, row] of this.writes.get(entity) ?? []) if (row) forEachIndexValue(row, field, addId, idx, id);
    }
    return idx;
  }

  private reindex(entity: string, id: string, next: Row | null): void {
    const byField = this.overlayIdx?.get(entity);
    if (!byField) return;
    const prev = this.writes.get(entity)?.get(id);
    byField.forEach((idx, field) => {
      if (prev) forEachIndexValue(prev, field, removeId, idx, id);
      if (next) forEachIndexValue(next, field, addId, idx, id);
    });
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
    (this.writes as Map<EntityOf<M>, Map<string, M[EntityOf<M>] | null>>).forEach((w, entity) => {
      w.forEach((row, id) => {
        if (row) into.put(entity, row);
        else into.del(entity, id);
      });
    });
  }

  /** The number of rows written (put or deleted) in this overlay. */
  get size(): number {
    let n = 0;
    for (const w of this.writes.values()) n += w.size;
    return n;
  }

  get empty(): boolean {
    for (const w of this.writes.values()) if (w.size > 0) return false;
    return true;
  }
}
