import type { DerivedIndexFactory } from './derived.js';
import type { Txn } from './txn.js';
import { assert, type EntityDef, type EntityOf, type RowMap } from './types.js';

/**
 * A named, deterministic state transition registered by the application (e.g. "touch sessions"). `A` is the shape
 * of its `args`; the registry holds commands of any args (`never` accepts them all), and apply passes the command's
 * args as recorded.
 */
export type CustomCommand<A = never, M extends RowMap = RowMap> = (
  ctx: ApplyContext<M>,
  args: A,
  at: string,
) => unknown;

/**
 * What a custom command may do: read through the transaction and write with the same checks as plain commands.
 * `M`: the row types (types.ts RowMap).
 */
export interface ApplyContext<M extends RowMap = RowMap> {
  readonly txn: Txn<M>;
  create(entity: EntityOf<M>, id: string, data: Record<string, unknown>, at: string, system?: boolean): void;
  update<E extends EntityOf<M>>(
    entity: E,
    id: string,
    set: Record<string, unknown>,
    at: string,
    system?: boolean,
  ): M[E];
  delete(entity: EntityOf<M>, id: string, at: string, system?: boolean): void;
}

export interface Referrer {
  entity: string;
  field: string;
  onDelete: 'restrict' | 'cascade' | 'clear';
}

/**
 * Every entity type the store holds, the reverse references between them, the custom commands and the derived
 * indexes (storage/derived.ts).
 */
export class Schema<M extends RowMap = RowMap> {
  /** Type only (never set): the row types of the entities, so that `Store.open` infers its `M` from the schema. */
  declare readonly rowTypes?: M;
  readonly defs = new Map<string, EntityDef>();
  readonly referrers = new Map<string, Referrer[]>();
  /** entity → the policy role fields naming its rows by `@id` (FieldDef.roles). */
  readonly roleReferrers = new Map<string, { entity: string; field: string }[]>();
  /** By name; apply runs them on the untyped view of its transaction (storage is generic over entity types). */
  readonly custom = new Map<string, CustomCommand<never>>();

  constructor(
    defs: EntityDef[],
    custom: Record<string, CustomCommand<never, M>> = {},
    readonly derived: readonly DerivedIndexFactory[] = [],
  ) {
    for (const def of defs) {
      assert(!this.defs.has(def.name), `entity ${def.name} declared twice`);
      assert(/^[a-z][a-zA-Z-]*$/.test(def.name), `bad entity name ${def.name}`);
      this.defs.set(def.name, def);
    }
    for (const def of defs) {
      for (const [field, f] of Object.entries(def.fields)) {
        if (f.roles) {
          assert(this.defs.has(f.roles.entity), `${def.name}.${field} names unknown entity ${f.roles.entity}`);
          assert(f.set && f.index, `${def.name}.${field}: a role list must be an indexed set`);
          const list = this.roleReferrers.get(f.roles.entity) ?? [];
          list.push({ entity: def.name, field });
          this.roleReferrers.set(f.roles.entity, list);
        }
        if (!f.ref) continue;
        assert(this.defs.has(f.ref.entity), `${def.name}.${field} references unknown entity ${f.ref.entity}`);
        const list = this.referrers.get(f.ref.entity) ?? [];
        list.push({ entity: def.name, field, onDelete: f.ref.onDelete });
        this.referrers.set(f.ref.entity, list);
      }
    }
    for (const [name, fn] of Object.entries(custom)) this.custom.set(name, fn as CustomCommand<never>);
  }

  def(entity: string): EntityDef {
    const d = this.defs.get(entity);
    if (d === undefined) assert(false, `unknown entity ${entity}`);
    return d;
  }
}
