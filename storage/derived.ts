import type { Collection } from './collection.js';
import type { EntityOf, Row, RowMap } from './types.js';

/** One published change of a row (`before` absent: created; `after` absent: deleted). */
export interface Change {
  entity: string;
  id: string;
  before: Row | undefined;
  after: Row | undefined;
}

/** A Change typed by the row types `M` (types.ts RowMap): narrowing on `entity` types `before` and `after`. */
export type ChangeOf<M extends RowMap> = {
  [E in EntityOf<M>]: { entity: E; id: string; before: M[E] | undefined; after: M[E] | undefined };
}[EntityOf<M>];

/** The published state a derived index reads: the in-memory collections. */
export interface PublishedState {
  collection(entity: string): Collection;
}

/**
 * An index computed from other entities (e.g. a policy's roles × identities' role attributes → matched ids).
 *
 * It is a pure function of the published state, kept up to date by the Store from each group's changes in the same
 * synchronous step that publishes them (so it changes identically on every node that applies the same log), and
 * rebuilt from the collections when the store is loaded. `update` must give the same result as `rebuild` on the
 * state after the changes; the tests check exactly that.
 */
export interface DerivedIndex {
  readonly name: string;
  /** The entity types whose changes the index depends on; changes of other types are not passed to `update`. */
  readonly sources: readonly string[];
  /** Recomputes everything from the published collections. */
  rebuild(state: PublishedState): void;
  /** Brings the index up to date with a published group of changes (`state` already reflects them). */
  update(changes: readonly Change[], state: PublishedState): void;
  /**
   * Differences from `fresh`, an index of the same declaration rebuilt from scratch (a data integrity check): at
   * most `limit` descriptions, none when they agree.
   */
  diff(fresh: DerivedIndex, limit: number): string[];
}

/** Derived indexes are declared with the schema and instantiated per store (they hold state). */
export type DerivedIndexFactory = () => DerivedIndex;

/** The derived indexes of one store: rebuilt on load, updated per published group. */
export class DerivedIndexes {
  private readonly byName = new Map<string, DerivedIndex>();
  private readonly factories = new Map<string, DerivedIndexFactory>();

  constructor(factories: readonly DerivedIndexFactory[]) {
    for (const make of factories) {
      const idx = make();
      if (this.byName.has(idx.name)) throw new Error(`invariant violated: derived index ${idx.name} declared twice`);
      this.byName.set(idx.name, idx);
      this.factories.set(idx.name, make);
    }
  }

  /** The indexes, each with a fresh instance of its declaration (for a comparison with a rebuild). */
  *withFresh(): Generator<{ index: DerivedIndex; fresh: () => DerivedIndex }> {
    for (const [name, index] of this.byName) yield { index, fresh: this.factories.get(name)! };
  }

  get<T extends DerivedIndex>(name: string): T {
    const idx = this.byName.get(name);
    if (!idx) throw new Error(`invariant violated: unknown derived index ${name}`);
    return idx as T;
  }

  rebuild(state: PublishedState): void {
    for (const idx of this.byName.values()) idx.rebuild(state);
  }

  update(changes: readonly Change[], state: PublishedState): void {
    if (this.byName.size === 0 || changes.length === 0) return;
    for (const idx of this.byName.values()) {
      const n = relevantCount(changes, idx.sources);
      // most groups change one entity type: then an index gets all of them or none (no filtered copy)
      if (n === changes.length) idx.update(changes, state);
      else if (n > 0)
        idx.update(
          changes.filter((c) => idx.sources.includes(c.entity)),
          state,
        );
    }
  }
}

function relevantCount(changes: readonly Change[], sources: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < changes.length; i++) if (sources.includes(changes[i]!.entity)) n++;
  return n;
}
