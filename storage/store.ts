import { ClassicLevel } from 'classic-level';
import { Packr } from 'msgpackr';
import { applyCommand } from './apply.js';
import { Collection } from './collection.js';
import { type Change, DerivedIndexes } from './derived.js';
import type { Schema } from './schema.js';
import { Txn } from './txn.js';
import { assert, type Command, type CommandResult, type Row, StoreFailure } from './types.js';

const FORMAT_VERSION = 1;
const SEP = '\u0000';
const ENTITY_PREFIX = `e${SEP}`;
const META_APPLIED = `m${SEP}applied`;
const META_FORMAT = `m${SEP}format`;
const META_PREFIX = `m${SEP}`;
/** The largest group of commands applied as one batch. */
export const MAX_GROUP_COMMANDS = 4096;

function commandEntity(cmd: Command): string {
  return 'entity' in cmd ? cmd.entity : cmd.op === 'custom' ? cmd.name : 'batch';
}

export const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false });

export type { Change };

export type PublishListener = (changes: Change[]) => void;

/**
 * The state machine's durable home: entity rows in LevelDB, mirrored in memory (Collections) for reads.
 *
 * Writes arrive only as groups of commands (`applyGroup`): each command applies into its own overlay, the
 * successful overlays form one LevelDB batch together with the applied log index, and only after that batch is
 * written are the changes published to memory. Readers therefore never see state that is not on disk.
 */
export class Store {
  readonly collections = new Map<string, Collection>();
  /** Indexes computed from the collections (storage/derived.ts): rebuilt on load, updated with every publish. */
  readonly derived: DerivedIndexes;
  private applying = false;
  private listeners: PublishListener[] = [];
  private closed = false;
  appliedIndex = 0;
  /** Bumped on every publish: a cheap "has anything changed" stamp for derived caches. */
  epoch = 0;

  private constructor(
    readonly schema: Schema,
    private readonly db: ClassicLevel<string, Uint8Array>,
  ) {
    for (const def of schema.defs.values()) this.collections.set(def.name, new Collection(def));
    this.derived = new DerivedIndexes(schema.derived);
  }

  static async open(dir: string, schema: Schema): Promise<Store> {
    const db = new ClassicLevel<string, Uint8Array>(dir, { keyEncoding: 'utf8', valueEncoding: 'view' });
    await db.open();
    const store = new Store(schema, db);
    try {
      await store.load();
    } catch (err) {
      await db.close();
      throw err;
    }
    return store;
  }

  private async load(): Promise<void> {
    const format = await this.db.get(META_FORMAT);
    if (format === undefined) {
      await this.db.put(META_FORMAT, packr.pack(FORMAT_VERSION), { sync: true });
    } else {
      const v = packr.unpack(format);
      if (v !== FORMAT_VERSION)
        throw new Error(`data directory has format ${v}, this Keel reads format ${FORMAT_VERSION}`);
    }
    const applied = await this.db.get(META_APPLIED);
    this.appliedIndex = applied === undefined ? 0 : (packr.unpack(applied) as number);

    let current: string | null = null;
    let rows: Row[] = [];
    const flush = () => {
      if (current === null) return;
      const c = this.collections.get(current);
      if (!c) throw new Error(`data directory holds unknown entity type '${current}'`);
      c.load(rows);
      rows = [];
    };
    for await (const [key, value] of this.db.iterator({ gt: ENTITY_PREFIX, lt: `e${SEP}\uffff` })) {
      const sep = key.indexOf(SEP, ENTITY_PREFIX.length);
      assert(sep > 0, `malformed entity key ${JSON.stringify(key)}`);
      const entity = key.slice(ENTITY_PREFIX.length, sep);
      if (entity !== current) {
        flush();
        current = entity;
      }
      const row = packr.unpack(value) as Row;
      assert(row.id === key.slice(sep + 1), `row id ${row.id} does not match its key ${key}`);
      rows.push(row);
    }
    flush();
    this.derived.rebuild(this);
  }

  collection(entity: string): Collection {
    const c = this.collections.get(entity);
    assert(c, `unknown entity ${entity}`);
    return c;
  }

  get(entity: string, id: string): Row | undefined {
    return this.collection(entity).get(id);
  }

  lookup(entity: string, field: string, value: unknown): string[] {
    const ids = this.collection(entity).lookup(field, value);
    assert(ids !== undefined, `lookup on unindexed field ${entity}.${field}`);
    return [...ids];
  }

  onPublish(listener: PublishListener): () => void {
    this.listeners.push(listener);
    return () => {
      this.listeners = this.listeners.filter((l) => l !== listener);
    };
  }

  /**
   * Applies commands in order as one durable batch. Each command succeeds or fails as a whole; a failure is a
   * recorded result, not an exception. `index` is the log index of the last command (recorded with the batch).
   */
  async applyGroup(cmds: Command[], opts: { index?: number; sync: boolean }): Promise<CommandResult[]> {
    assert(!this.closed, 'applyGroup on a closed store');
    assert(!this.applying, 'applyGroup is not re-entrant');
    assert(cmds.length <= MAX_GROUP_COMMANDS, `group of ${cmds.length} commands`);
    this.applying = true;
    try {
      const group = new Txn(this);
      const results: CommandResult[] = [];
      for (const cmd of cmds) {
        const txn = new Txn(group);
        try {
          const value = applyCommand(this.schema, txn, cmd);
          txn.mergeInto(group);
          results.push({ ok: true, value });
        } catch (err) {
          if (err instanceof StoreFailure) {
            results.push({ ok: false, error: err.error });
          } else {
            // A broken invariant rejects this command alone (deterministically: same state, same code, same
            // message on every node), instead of failing the other commands of the group or stalling a log.
            const reason = err instanceof Error ? err.message : String(err);
            results.push({ ok: false, error: { code: 'REJECTED', entity: commandEntity(cmd), reason } });
          }
        }
      }
      const index = opts.index ?? this.appliedIndex;
      assert(index >= this.appliedIndex, `applied index going back from ${this.appliedIndex} to ${index}`);
      const batch = this.db.batch();
      for (const [entity, writes] of group.writes) {
        for (const [id, row] of writes) {
          const key = `${ENTITY_PREFIX}${entity}${SEP}${id}`;
          if (row) batch.put(key, packr.pack(row));
          else batch.del(key);
        }
      }
      batch.put(META_APPLIED, packr.pack(index));
      await batch.write({ sync: opts.sync });
      this.appliedIndex = index;
      this.publish(group);
      return results;
    } finally {
      this.applying = false;
    }
  }

  private publish(group: Txn): void {
    this.epoch++;
    const changes: Change[] = [];
    for (const [entity, writes] of group.writes) {
      const c = this.collection(entity);
      for (const [id, row] of writes) {
        const before = c.get(id);
        if (row) c.put(row);
        else c.delete(id);
        changes.push({ entity, id, before, after: row ?? undefined });
      }
    }
    this.derived.update(changes, this);
    for (const l of this.listeners) l(changes);
  }

  async getMeta(key: string): Promise<unknown> {
    const v = await this.db.get(META_PREFIX + key);
    return v === undefined ? undefined : packr.unpack(v);
  }

  async putMeta(key: string, value: unknown): Promise<void> {
    await this.db.put(META_PREFIX + key, packr.pack(value), { sync: true });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.db.close();
  }
}
