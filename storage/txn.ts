import { forEachIndexValue } from './collection.js';
import { assert, type EntityOf, type Row, type RowMap } from './types.js';

/** Read access to a state: the published store, or a transaction layered on it. `M`: the row types (types.ts). */
export interface StateReader<M extends RowMap = RowMap> {
  get<E extends EntityOf<M>>(entity: E, id: string): M[E] | undefined;
  /**
   * Ids of `entity` rows whose `field` equals (sets: contains) `value`. The field must be indexed, unique or `id`.
   * A fresh array, the caller's to change.
   */
  lookup(entity: EntityOf<M>, field: string, value: unknown): string[];
}

/** In the journal: the row had no write in the overlay before. */
const ABSENT = Symbol('absent');

/** Bound on the writes one command may make (a batch of MAX_BATCH_OPS commands, each cascading a little). */
const MAX_JOURNAL = 1 << 20;

/** The command's writes before this many are de-duplicated by scanning, after it through a Set. */
const SCAN_WRITTEN_MAX = 32;

/**
 * An overlay index of one field: value → the overlay rows holding it, as the one id while a single row holds it (a
 * unique field, the common case: no Set per value), as a Set of ids (in insertion order) once several do.
 */
type OverlayIndex = Map<unknown, string | Set<string>>;

/**
 * A write overlay on a StateReader: the writes of a group of commands, which becomes one LevelDB batch. Each command
 * applies into it between `begin` and `commit`; a command that fails is undone (`rollback`), so nothing of it is
 * half-applied. The journal of the command being applied lists every write it made with what it replaced.
 *
 * Lookups see through the overlay: parent ids not rewritten here, plus overlay rows that match. Overlay matches
 * come from per-field indexes built on first use and kept up to date by put/del, so a group of thousands of
 * creates stays linear.
 */
export class Txn<M extends RowMap = RowMap> implements StateReader<M> {
  /** entity → id → new row, or null for a delete. Insertion-ordered, so replay order is deterministic. */
  readonly writes = new Map<string, Map<string, Row | null>>();
  /** entity → field → value → ids of overlay rows holding it (made on the first lookup through the overlay). */
  private overlayIdx: Map<string, Map<string, OverlayIndex>> | null = null;
  /** The journal (between `begin` and `commit`/`rollback`): entity, id and replaced value of each write, in order. */
  private journaling = false;
  private journalLength = 0;
  private readonly journalEntities: string[] = [];
  private readonly journalIds: string[] = [];
  private readonly journalPrev: Array<Row | null | typeof ABSENT> = [];

  /** The arguments of the write being reindexed (reindex). */
  private readonly reindexStep: ReindexStep = { id: '', replaced: null, next: null };

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
    if (typeof ids === 'string') out.push(ids);
    else if (ids !== undefined) for (const id of ids) out.push(id);
    return out;
  }

  private fieldIndex(entity: string, field: string): OverlayIndex {
    if (this.overlayIdx === null) this.overlayIdx = new Map();
    let byField = this.overlayIdx.get(entity);
    if (!byField) this.overlayIdx.set(entity, (byField = new Map()));
    let idx = byField.get(field);
    if (!idx) {
      byField.set(field, (idx = new Map()));
      for (const [id, row] of this.writes.get(entity) ?? [])
        if (row) forEachIndexValue(row, field, addOverlayId, idx, id);
    }
    return idx;
  }

  /** Moves `id` in the overlay's field indexes from `replaced` (its overlay value being replaced, if any) to `next`. */
  private reindex(entity: string, id: string, replaced: Row | null | undefined, next: Row | null): void {
    const byField = this.overlayIdx?.get(entity);
    if (!byField) return;
    // one reused argument record and a module function, not a closure per write
    const step = this.reindexStep;
    step.id = id;
    step.replaced = replaced;
    step.next = next;
    byField.forEach(reindexField, step);
    step.replaced = null;
    step.next = null;
  }

  put<E extends EntityOf<M>>(entity: E, row: M[E]): void {
    this.write(entity, row.id, row);
  }

  del(entity: EntityOf<M>, id: string): void {
    this.write(entity, id, null);
  }

  private write(entity: string, id: string, row: Row | null): void {
    let w = this.writes.get(entity);
    if (!w) this.writes.set(entity, (w = new Map()));
    const replaced = w.get(id); // undefined: no write of the row in the overlay yet (a delete is null)
    if (this.journaling) {
      const i = this.journalLength++;
      if (i >= MAX_JOURNAL) assert(false, `a command writing more than ${MAX_JOURNAL} rows`);
      this.journalEntities[i] = entity;
      this.journalIds[i] = id;
      this.journalPrev[i] = replaced === undefined ? ABSENT : replaced;
    }
    this.reindex(entity, id, replaced, row);
    w.set(id, row);
  }

  /** Starts the journal of a command: its writes can be undone (`rollback`) or kept (`commit`). */
  begin(): void {
    assert(!this.journaling, 'begin inside a command');
    this.journaling = true;
    this.journalLength = 0;
  }

  /** Keeps the command's writes. */
  commit(): void {
    assert(this.journaling, 'commit outside a command');
    this.endJournal();
  }

  /** Undoes every write of the command, last first: the overlay is as it was at `begin`. */
  rollback(): void {
    assert(this.journaling, 'rollback outside a command');
    for (let i = this.journalLength - 1; i >= 0; i--) {
      const entity = this.journalEntities[i]!;
      const id = this.journalIds[i]!;
      const prev = this.journalPrev[i]!;
      const w = this.writes.get(entity)!;
      this.reindex(entity, id, w.get(id), prev === ABSENT ? null : prev);
      if (prev === ABSENT) w.delete(id);
      else w.set(id, prev);
    }
    this.endJournal();
  }

  private endJournal(): void {
    for (let i = 0; i < this.journalLength; i++) this.journalPrev[i] = null; // nothing kept alive by the journal
    this.journalLength = 0;
    this.journaling = false;
  }

  /**
   * Calls `visit(entity, id, row, a)` once for every row the command being applied wrote (its value now: a row, or
   * null for a delete). `visit` is meant to be a module-level function, its state passed as `a` (no closure per
   * command). Bounded by the journal's length.
   */
  forEachWritten<A>(visit: (entity: string, id: string, row: Row | null, a: A) => void, a: A): void {
    assert(this.journaling, 'forEachWritten outside a command');
    const n = this.journalLength;
    const seen = n > SCAN_WRITTEN_MAX ? new Set<string>() : null;
    // last write first: a row written again later is visited at its last write only
    for (let i = n - 1; i >= 0; i--) {
      const entity = this.journalEntities[i]!;
      const id = this.journalIds[i]!;
      if (seen !== null) {
        const key = `${entity}\u0000${id}`;
        if (seen.has(key)) continue;
        seen.add(key);
      } else if (this.writtenAfter(i, entity, id)) continue;
      visit(entity, id, this.writes.get(entity)!.get(id)!, a);
    }
  }

  private writtenAfter(i: number, entity: string, id: string): boolean {
    for (let j = i + 1; j < this.journalLength; j++) {
      if (this.journalIds[j] === id && this.journalEntities[j] === entity) return true;
    }
    return false;
  }

  /** Rows written in the overlay (a delete counts): what the group publishes. Bounded by the entity types written. */
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

interface ReindexStep {
  id: string;
  replaced: Row | null | undefined;
  next: Row | null;
}

/** One overlay index's update for the write in `this` (Map.forEach's thisArg). */
function reindexField(this: ReindexStep, idx: OverlayIndex, field: string): void {
  if (this.replaced) forEachIndexValue(this.replaced, field, removeOverlayId, idx, this.id);
  if (this.next) forEachIndexValue(this.next, field, addOverlayId, idx, this.id);
}

/** Adds `id` to the overlay rows holding `v` (collection.ts's addId for an OverlayIndex). */
function addOverlayId(v: unknown, idx: OverlayIndex, id: string): void {
  const held = idx.get(v);
  if (held === undefined) idx.set(v, id);
  else if (typeof held !== 'string') held.add(id);
  else if (held !== id) idx.set(v, new Set([held, id]));
}

/** Removes `id` from the overlay rows holding `v`, and `v` from the index once no row holds it. */
function removeOverlayId(v: unknown, idx: OverlayIndex, id: string): void {
  const held = idx.get(v);
  if (held === undefined) return;
  if (typeof held === 'string') {
    if (held === id) idx.delete(v);
    return;
  }
  held.delete(id);
  if (held.size === 0) idx.delete(v);
}
