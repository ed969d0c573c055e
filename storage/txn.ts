import { indexValues } from './collection.js';
import type { Row } from './types.js';

/** Read access to a state: the published store, or a transaction layered on it. */
export interface StateReader {
  get(entity: string, id: string): Row | undefined;
  /** Ids of `entity` rows whose `field` equals (sets: contains) `value`. The field must be indexed, unique or `id`. */
  lookup(entity: string, field: string, value: unknown): string[];
}

/**
 * A write overlay on a StateReader. Commands apply into a Txn; a failed command's Txn is dropped (nothing
 * half-applied), a successful one is merged into its parent. The outermost Txn of a group becomes one LevelDB batch.
 */
export class Txn implements StateReader {
  /** entity → id → new row, or null for a delete. Insertion-ordered, so replay order is deterministic. */
  readonly writes = new Map<string, Map<string, Row | null>>();

  constructor(private readonly parent: StateReader) {}

  get(entity: string, id: string): Row | undefined {
    const w = this.writes.get(entity);
    if (w?.has(id)) return w.get(id) ?? undefined;
    return this.parent.get(entity, id);
  }

  lookup(entity: string, field: string, value: unknown): string[] {
    const w = this.writes.get(entity);
    const base = this.parent.lookup(entity, field, value);
    if (!w || w.size === 0) return base;
    const out = base.filter((id) => !w.has(id));
    for (const [id, row] of w) {
      if (!row) continue;
      if (field === 'id' ? id === value : indexValues(row, field).includes(value)) out.push(id);
    }
    return out;
  }

  put(entity: string, row: Row): void {
    let w = this.writes.get(entity);
    if (!w) this.writes.set(entity, (w = new Map()));
    w.set(row.id, row);
  }

  del(entity: string, id: string): void {
    let w = this.writes.get(entity);
    if (!w) this.writes.set(entity, (w = new Map()));
    w.set(id, null);
  }

  /** Moves this overlay's writes into `into` (the parent), in order. */
  mergeInto(into: Txn): void {
    for (const [entity, w] of this.writes) {
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
