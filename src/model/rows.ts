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
