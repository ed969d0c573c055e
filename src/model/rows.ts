import type { Change as AnyChange, ChangeOf } from '../../storage/derived.js';
import type { ApplyContext as AnyApplyContext, CustomCommand as AnyCustomCommand } from '../../storage/schema.js';
import type { Store as AnyStore } from '../../storage/store.js';
import type { Txn as AnyTxn } from '../../storage/txn.js';
import type { Command as AnyCommand, Expect as AnyExpect } from '../../storage/types.js';
import type { RowOf } from '../api/entity.js';
import type { ENTITIES, EntityName } from './index.js';

type Declared = (typeof ENTITIES)[number];

/** Each stored entity type's row type, by name, inferred from its declaration's `fields` (api/entity.ts RowOf). */
export type EntityRows = { [D in Declared as D['name']]: RowOf<D['fields']> };

/** The row type of entity `E`. */
export type RowFor<E extends EntityName> = EntityRows[E];

/*
 * Storage's generic types instantiated with Keel's entities: what src/ uses (entity names are checked against
 * ENTITIES, rows read back typed). Same names as storage's untyped defaults, which src/ does not use.
 */
export type Store = AnyStore<EntityRows>;
export type Txn = AnyTxn<EntityRows>;
export type Command = AnyCommand<EntityName>;
export type Expect = AnyExpect<EntityName>;
export type ApplyContext = AnyApplyContext<EntityRows>;
export type CustomCommand<A> = AnyCustomCommand<A, EntityRows>;
/** A published change of a row: narrowing on `entity` types `before` and `after`. */
export type Change = ChangeOf<EntityRows>;

/** `store.onPublish` with the changes typed (they are of rows written as their entity's row type). */
export function onChanges(store: Store, listener: (changes: Change[]) => void): () => void {
  return store.onPublish(listener as (changes: AnyChange[]) => void);
}

/** The entity names the declarations' reference (`ref`) and policy role (`roles`) fields point at. */
type Referenced = {
  [D in Declared as D['name']]: {
    [K in keyof D['fields']]: D['fields'][K] extends { ref: { entity: infer R } }
      ? R
      : D['fields'][K] extends { roles: { entity: infer R } }
        ? R
        : never;
  }[keyof D['fields']];
}[EntityName];

/**
 * Compile-time check that every referenced entity is declared: a misspelt `ref.entity` makes this fail, naming it
 * ("Type '…' does not satisfy the constraint 'never'"). (The store schema also asserts it at start.)
 */
export type UndeclaredReferences = MustBeEmpty<Exclude<Referenced, EntityName>>;
type MustBeEmpty<T extends never> = T;
