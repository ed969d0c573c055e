import { commandApplier } from './apply.js';
import { encodeChecked, isWellFormed, packr, UnstorableError } from './codec.js';
import { Collection } from './collection.js';
import { commandEntity } from './command-codec.js';
import { type Change, DerivedIndexes } from './derived.js';
import { storeValuesOf } from './row-values.js';
import type { Schema } from './schema.js';
import { levelStoreDb, type StoreDb, type StoreDbOp } from './store-db.js';
import { Txn } from './txn.js';
import {
  assert,
  type Command,
  type CommandResult,
  type EntityOf,
  type Row,
  type RowMap,
  type StoreError,
  StoreFailedError,
  StoreFailure,
  UnknownCommandError,
} from './types.js';

const FORMAT_VERSION = 1;
const SEP = '\u0000';
const ENTITY_PREFIX = `e${SEP}`;
const META_APPLIED = `m${SEP}applied`;

/** The LevelDB batch that stores `rows` (encoded; null: deleted) and records `index` as applied with them. */
function batchOps(rows: ReadonlyMap<string, Uint8Array | null>, index: number): StoreDbOp[] {
  const ops: StoreDbOp[] = [];
  // forEach, not for…of: no [key, value] pair per row
  rows.forEach(pushOp, ops);
  ops.push({ type: 'put', key: META_APPLIED, value: packr.pack(index) });
  return ops;
}

/** `batchOps`'s op for one row (Map.forEach's callback, the ops as its thisArg). */
function pushOp(this: StoreDbOp[], value: Uint8Array | null, key: string): void {
  this.push(value === null ? { type: 'del', key } : { type: 'put', key, value });
}
const META_FORMAT = `m${SEP}format`;
const META_PREFIX = `m${SEP}`;
/** Present while a snapshot is being restored: a store opened with it holds no consistent state. */
const META_RESTORING = `m${SEP}restoring`;
const ENTITY_END = `e${SEP}\uffff`;
const SNAPSHOT_FORMAT = 'keel-store-snapshot';
const SNAPSHOT_VERSION = 1;
/** Rows per snapshot chunk (one msgpackr frame), so no frame ever holds the whole state. */
export const SNAPSHOT_CHUNK_ROWS = 1000;
/** Rows per synced LevelDB batch while restoring a snapshot. */
const RESTORE_BATCH_ROWS = 10_000;
/** Bound on one snapshot frame (a chunk of SNAPSHOT_CHUNK_ROWS rows); a larger length means corrupt input. */
const MAX_SNAPSHOT_FRAME_BYTES = 256 << 20;
/** The largest group of commands applied as one batch. */
export const MAX_GROUP_COMMANDS = 4096;
/** Write-behind (applyGroupBehind): staged rows are written at least this often. */
export const WRITE_BEHIND_INTERVAL_MS = 100;
/** Write-behind: a flush starts as soon as this many rows are staged. */
export const WRITE_BEHIND_FLUSH_OPS = 8192;
/** Write-behind: applying waits for the batch being written once this many rows are staged (bounds memory). */
export const WRITE_BEHIND_MAX_OPS = 65_536;

/**
 * The LevelDB keys of a store's rows, from one prefix string per entity type of its schema (not one concatenation
 * chain per row). Per store and made whole at its opening: bounded by the schema, whatever other stores the process
 * holds.
 */
class RowKeys {
  private readonly prefixes = new Map<string, string>();

  constructor(entities: Iterable<string>) {
    for (const entity of entities) this.prefixes.set(entity, `${ENTITY_PREFIX}${entity}${SEP}`);
  }

  of(entity: string, id: string): string {
    const prefix = this.prefixes.get(entity);
    // the message only on failure: built on every call, it cost about 45 B per row written
    if (prefix === undefined) assert(false, `a row key of the unknown entity type '${entity}'`);
    return prefix + id;
  }
}

/** A command failed (before anything of it was written): the recorded error, the same on every node. */
function commandError(cmd: Command, err: unknown): StoreError {
  if (err instanceof StoreFailure) return err.error;
  if (err instanceof UnstorableError) {
    return { code: 'UNSTORABLE', entity: commandEntity(cmd), field: err.path, reason: err.reason };
  }
  // A broken invariant rejects this command alone (deterministically: same state, same code, same message on
  // every node), instead of failing the other commands of the group or stalling a log.
  const reason = err instanceof Error ? err.message : String(err);
  return { code: 'REJECTED', entity: commandEntity(cmd), reason };
}

/** One command's LevelDB writes (key, encoded row or null: delete), kept in arrays reused from command to command. */
class EncodedWrites {
  readonly keys: string[] = [];
  readonly values: Array<Uint8Array | null> = [];
  length = 0;

  constructor(private readonly rowKeys: RowKeys) {}

  /**
   * Encodes the writes of one command's overlay, each row checked to read back as written (codec.ts). Throws
   * UnstorableError, so a row that cannot be stored faithfully fails its own command only.
   */
  encode(txn: Txn): void {
    this.length = 0;
    txn.forEachWritten(encodeWrite, this);
  }

  /** `encode`'s step for one write (a module-level visitor: no closure per command). */
  add(entity: string, id: string, row: Row | null): void {
    if (!isWellFormed(id)) throw new UnstorableError('id', 'is not well-formed UTF-16 (a lone surrogate)');
    if (row !== null && row.id !== id) assert(false, `row id ${row.id} written under id ${id}`);
    this.keys[this.length] = this.rowKeys.of(entity, id);
    this.values[this.length] = row === null ? null : encodeChecked(row);
    this.length++;
  }

  /** Sets every write in `into` (key → bytes), and lets go of them here. */
  moveTo(into: Map<string, Uint8Array | null>): void {
    for (let i = 0; i < this.length; i++) {
      into.set(this.keys[i]!, this.values[i]!);
      this.values[i] = null;
    }
    this.length = 0;
  }
}

function encodeWrite(entity: string, id: string, row: Row | null, writes: EncodedWrites): void {
  writes.add(entity, id, row);
}

export type FailureListener = (failure: StoreFailedError) => void;

export type { Change };

export type PublishListener = (changes: Change[]) => void;

/** The state as of `index`, captured by `Store.snapshotView`: each entity's rows in id order. */
export interface SnapshotView {
  index: number;
  entities: Array<[string, Row[]]>;
}

/**
 * The state machine's durable home: entity rows in LevelDB, mirrored in memory (Collections) for reads.
 *
 * Writes arrive only as groups of commands (`applyGroup`): each command applies into its own overlay, the
 * successful overlays form one LevelDB batch together with the applied log index, and only after that batch is
 * written are the changes published to memory. Readers therefore never see state that is not on disk.
 *
 * Fail-stop: after a failed LevelDB write (or a broken invariant while publishing a written batch) the store is
 * `failed` and refuses every later write with StoreFailedError; reads keep serving what was published. Its owner
 * is told (onFailure) and is expected to stop the process, so that LevelDB recovers its log on the next start.
 */
export class Store<M extends RowMap = RowMap> {
  readonly collections = new Map<string, Collection>();
  /** Indexes computed from the collections (storage/derived.ts): rebuilt on load, updated with every publish. */
  readonly derived: DerivedIndexes;
  private applying = false;
  private listeners: PublishListener[] = [];
  private failureListeners: FailureListener[] = [];
  private closed = false;
  private failure: StoreFailedError | null = null;
  appliedIndex = 0;
  /** The applied index on disk (= appliedIndex except while write-behind rows are staged). */
  private durable = 0;
  /** Write-behind: rows applied and published, not yet written (key → encoded row, null: delete). */
  private staged = new Map<string, Uint8Array | null>();
  /** The applied index the staged rows bring the disk to. */
  private stagedIndex = 0;
  /** The write-behind batch being written (settled: none). */
  private flushing: Promise<void> = Promise.resolve();
  /** A flush waiting for `flushing` to settle (null: none); `flush()` joins it. */
  private queuedFlush: Promise<void> | null = null;
  private flushTimer: NodeJS.Timeout | null = null;
  /** Bumped on every publish: a cheap "has anything changed" stamp for derived caches. */
  epoch = 0;
  /** Per collection: bumped by every publish that changes rows of it (see `stampOf`). */
  private readonly collectionEpochs = new Map<string, number>();
  /** Bumped by restore and `invalidateAll`: part of every `stampOf`. */
  private generation = 0;
  private readonly rowKeys: RowKeys;
  /** `prepare`'s scratch: the encoded writes of the command being applied. */
  private readonly encoded: EncodedWrites;

  private constructor(
    readonly schema: Schema<M>,
    private readonly db: StoreDb,
  ) {
    this.rowKeys = new RowKeys(schema.defs.keys());
    this.encoded = new EncodedWrites(this.rowKeys);
    for (const def of schema.defs.values()) this.collections.set(def.name, new Collection(def));
    this.derived = new DerivedIndexes(schema.derived);
  }

  /** Opens the LevelDB in `location` (a directory), or the given StoreDb (tests inject faults there). */
  static async open<M extends RowMap = RowMap>(location: string | StoreDb, schema: Schema<M>): Promise<Store<M>> {
    const db = typeof location === 'string' ? levelStoreDb(location) : location;
    await db.open();
    const store = new Store<M>(schema, db);
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
    if ((await this.db.get(META_RESTORING)) !== undefined) {
      // A restore was cut short: the rows on disk are a mix. Start empty at index 0 so that the log's snapshot is
      // restored again (Raft restores when the application's applied index is behind its snapshot).
      this.appliedIndex = 0;
      this.derived.rebuild(this);
      return;
    }
    const applied = await this.db.get(META_APPLIED);
    this.appliedIndex = applied === undefined ? 0 : (packr.unpack(applied) as number);
    this.durable = this.appliedIndex;
    this.stagedIndex = this.appliedIndex;

    let current: string | null = null;
    let rows: Row[] = [];
    const flush = () => {
      if (current === null) return;
      const c = this.collections.get(current);
      if (!c) throw new Error(`data directory holds unknown entity type '${current}'`);
      c.load(rows);
      rows = [];
    };
    for await (const [key, value] of this.db.iterator({ gte: ENTITY_PREFIX, lt: ENTITY_END })) {
      const sep = key.indexOf(SEP, ENTITY_PREFIX.length);
      assert(sep > 0, `malformed entity key ${JSON.stringify(key)}`);
      const entity = key.slice(ENTITY_PREFIX.length, sep);
      if (entity !== current) {
        flush();
        current = entity;
      }
      const row = packr.unpack(value) as Row;
      assert(row.id === key.slice(sep + 1), `row id ${row.id} does not match its key ${key}`);
      storeValuesOf(row);
      rows.push(row);
    }
    flush();
    this.derived.rebuild(this);
  }

  collection<E extends EntityOf<M>>(entity: E): Collection<M[E]> {
    const c = this.collections.get(entity);
    if (c === undefined) assert(false, `unknown entity ${entity}`);
    // the collection holds the rows written as M[E] (the type exists only at compile time)
    return c as Collection<M[E]>;
  }

  get<E extends EntityOf<M>>(entity: E, id: string): M[E] | undefined {
    return this.collection(entity).get(id);
  }

  lookup(entity: EntityOf<M>, field: string, value: unknown): string[] {
    const ids = this.collection(entity).lookup(field, value);
    if (ids === undefined) assert(false, `lookup on unindexed field ${entity}.${field}`);
    return [...ids];
  }

  /** Set once a write failed or memory stopped matching disk; every later write is refused with it. */
  get failed(): StoreFailedError | null {
    return this.failure;
  }

  /** Called once, when the store fails (see the class comment). */
  onFailure(listener: FailureListener): void {
    this.failureListeners.push(listener);
  }

  /** Enters the failed state (the first failure wins) and returns the error to throw. */
  private fail(stage: StoreFailedError['stage'], err: unknown): StoreFailedError {
    if (this.failure === null) {
      const failure = new StoreFailedError(stage, err instanceof Error ? err.message : String(err));
      this.failure = failure;
      // after the current call unwinds: a listener stops the process, it does not get to change this call's result
      for (const l of this.failureListeners) queueMicrotask(() => l(failure));
    }
    return this.failure;
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
  async applyGroup(cmds: Command<EntityOf<M>>[], opts: { index?: number; sync: boolean }): Promise<CommandResult[]> {
    this.enterApply(cmds);
    assert(this.staged.size === 0 && this.stagedIndex === this.appliedIndex, 'applyGroup on a write-behind store');
    // A failure that is not one command's (a broken invariant, the disk, memory after the disk) fails the store.
    let stage: StoreFailedError['stage'] = 'apply';
    try {
      const encoded = new Map<string, Uint8Array | null>();
      const { group, results } = this.prepare(cmds, encoded);
      const index = this.checkIndex(opts.index);
      const ops = batchOps(encoded, index);
      stage = 'write';
      await this.db.batch(ops, { sync: opts.sync });
      this.appliedIndex = index;
      this.stagedIndex = index;
      this.durable = index;
      // the batch is on disk: a failure now leaves memory holding part of it
      stage = 'publish';
      this.publish(group);
      return results;
    } catch (err) {
      throw this.fail(stage, err);
    } finally {
      this.applying = false;
    }
  }

  /**
   * Write-behind (a Raft member, whose log already holds every command durably): applies commands like
   * `applyGroup` and publishes them at once, but only stages their rows; `flush()` — every WRITE_BEHIND_INTERVAL_MS,
   * or sooner once WRITE_BEHIND_FLUSH_OPS rows are staged — writes everything staged as one synced batch together
   * with the index of its last command. So the store on disk is always the state as of some applied index
   * (`durableIndex`, ≤ `appliedIndex`), never a mix, and after a crash the member replays its log above it. Whoever
   * compacts the log must not pass `durableIndex` (flush first). Applying waits for the batch being written when
   * WRITE_BEHIND_MAX_OPS rows are staged, so staging is bounded.
   */
  async applyGroupBehind(cmds: Command<EntityOf<M>>[], index: number): Promise<CommandResult[]> {
    if (this.staged.size >= WRITE_BEHIND_MAX_OPS) await this.flush();
    this.enterApply(cmds);
    let stage: StoreFailedError['stage'] = 'apply';
    try {
      // staged directly: a failure before the publish fails the store, which then never writes what is staged
      const { group, results } = this.prepare(cmds, this.staged);
      this.checkIndex(index);
      this.stagedIndex = index;
      this.appliedIndex = index;
      stage = 'publish';
      this.publish(group);
      if (this.staged.size >= WRITE_BEHIND_FLUSH_OPS) void this.flush().catch(() => {});
      else this.scheduleFlush();
      return results;
    } catch (err) {
      throw this.fail(stage, err);
    } finally {
      this.applying = false;
    }
  }

  /** The applied index whose state is on disk (synced): what a restart starts from. */
  get durableIndex(): number {
    return this.durable;
  }

  /**
   * Writes what `applyGroupBehind` staged as one synced batch with its applied index; resolves once everything
   * staged before the call is durable. Batches are written one at a time, in order.
   */
  flush(): Promise<void> {
    if (this.flushTimer !== null) {
      clearTimeout(this.flushTimer);
      this.flushTimer = null;
    }
    // a flush queued behind the batch being written, not started yet, writes everything staged by the time it
    // starts: later calls join it (so a slow disk queues one flush, not one per apply)
    if (this.queuedFlush !== null) return this.queuedFlush;
    const next = this.flushing.then(() => {
      this.queuedFlush = null;
      return this.writeStaged();
    });
    this.queuedFlush = next;
    this.flushing = next.catch(() => {});
    return next;
  }

  private scheduleFlush(): void {
    if (this.flushTimer !== null || this.closed) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null;
      void this.flush().catch(() => {});
    }, WRITE_BEHIND_INTERVAL_MS);
  }

  private async writeStaged(): Promise<void> {
    if (this.failure !== null) throw this.failure;
    const index = this.stagedIndex;
    if (index === this.durable) return;
    assert(index > this.durable, `staged index ${index} below the durable index ${this.durable}`);
    const ops = batchOps(this.staged, index);
    this.staged = new Map();
    try {
      await this.db.batch(ops, { sync: true });
    } catch (err) {
      throw this.fail('write', err);
    }
    this.durable = index;
  }

  /** Drops the staged rows (a snapshot is about to replace the whole state) once the batch being written is done. */
  private async dropStaged(): Promise<void> {
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    await this.flushing;
    this.staged = new Map();
    this.stagedIndex = this.durable;
  }

  private enterApply(cmds: Command[]): void {
    assert(!this.closed, 'applyGroup on a closed store');
    if (this.failure !== null) throw this.failure;
    assert(!this.applying, 'applyGroup is not re-entrant');
    if (cmds.length > MAX_GROUP_COMMANDS) assert(false, `group of ${cmds.length} commands`);
    this.applying = true;
  }

  private checkIndex(given: number | undefined): number {
    const index = given ?? this.appliedIndex;
    if (index < this.appliedIndex) assert(false, `applied index going back from ${this.appliedIndex} to ${index}`);
    return index;
  }

  /**
   * Applies each command into the group's overlay (a failed one undone): the overlay and every command's result.
   * The LevelDB writes of the successful commands (key → encoded row, null: delete) are set in `writes`, in order
   * (the last write of a key wins).
   */
  private prepare(cmds: Command[], writes: Map<string, Uint8Array | null>): { group: Txn; results: CommandResult[] } {
    const group = new Txn(this);
    const applier = commandApplier(this.schema, group);
    const results: CommandResult[] = [];
    const encoded = this.encoded;
    const heldBefore = writes.size;
    for (let i = 0; i < cmds.length; i++) {
      const cmd = cmds[i]!;
      group.begin();
      let value: unknown;
      try {
        value = applier.applyCommand(cmd);
        encoded.encode(group);
      } catch (err) {
        // a command this code does not know fails the group, never only itself (UnknownCommandError)
        if (err instanceof UnknownCommandError) throw err;
        group.rollback(); // nothing of the command is written
        results.push({ ok: false, error: commandError(cmd, err) });
        continue;
      }
      group.commit();
      encoded.moveTo(writes);
      results.push({ ok: true, value });
    }
    // What is published (the overlay's rows) is what is written: each overlay row's key was set in `writes`, and
    // only theirs. Counted, not compared row by row: `writes` starting empty (applyGroup; write-behind after a
    // flush) gains exactly one key per overlay row; staged rows of earlier groups (write-behind) may hold some.
    const rows = group.size;
    const added = writes.size - heldBefore;
    const matched = heldBefore === 0 ? added === rows : added <= rows && rows <= writes.size;
    if (!matched) assert(false, `${added} encoded rows (${heldBefore} staged before) for ${rows} rows written`);
    return { group, results };
  }

  private publish(group: Txn): void {
    this.epoch++;
    const changes: Change[] = [];
    group.writes.forEach((writes, entity) => {
      const c: Collection = this.collection(entity);
      if (writes.size > 0) this.collectionEpochs.set(entity, (this.collectionEpochs.get(entity) ?? 0) + 1);
      writes.forEach((row, id) => {
        const before = c.get(id);
        if (row) c.put(row);
        else c.delete(id);
        changes.push({ entity, id, before, after: row ?? undefined });
      });
    });
    this.derived.update(changes, this);
    for (const l of this.listeners) l(changes);
  }

  /**
   * The state as of `appliedIndex`, captured at once (the rows of every collection in id order, by reference: rows
   * are replaced on write, never changed in place), for `snapshotFrames` to encode later while writes go on.
   */
  snapshotView(): SnapshotView {
    const entities: Array<[string, Row[]]> = [];
    for (const [entity, c] of this.collections) entities.push([entity, c.rowsInOrder()]);
    return { index: this.appliedIndex, entities };
  }

  /**
   * A captured state as framed chunks (`u32` length + one msgpackr value each): a header `{format, version,
   * index}`, then `[entity, rows]` chunks of at most SNAPSHOT_CHUNK_ROWS rows (entities and rows in id order), then
   * `{end: rowCount}`.
   */
  *snapshotFrames(view: SnapshotView): Generator<Uint8Array> {
    yield frame({ format: SNAPSHOT_FORMAT, version: SNAPSHOT_VERSION, index: view.index });
    let count = 0;
    for (const [entity, rows] of view.entities) {
      for (let at = 0; at < rows.length; at += SNAPSHOT_CHUNK_ROWS) {
        yield frame([entity, rows.slice(at, at + SNAPSHOT_CHUNK_ROWS)]);
      }
      count += rows.length;
    }
    yield frame({ end: count });
  }

  /** The state as of `appliedIndex` as framed chunks (`snapshotFrames` of a view captured now). */
  snapshotChunks(): Generator<Uint8Array> {
    return this.snapshotFrames(this.snapshotView());
  }

  /** The snapshot as one buffer (the Raft state machine interface takes one `Uint8Array`). */
  async snapshot(): Promise<{ index: number; data: Uint8Array }> {
    assert(!this.applying, 'snapshot while applying');
    const index = this.appliedIndex;
    return { index, data: Buffer.concat([...this.snapshotChunks()]) };
  }

  /**
   * Replaces the whole state with a snapshot (from `snapshot()`/`snapshotChunks()`). Crash-safe: a marker written
   * first makes a store reopened mid-restore start empty at index 0, so the restore is simply done again. Every
   * batch is synced (an unsynced LevelDB batch may be lost while a later synced one survives). Listeners are told
   * about the rows that disappeared; the epoch bump invalidates derived caches.
   */
  restore(data: Uint8Array): Promise<number> {
    return this.restoreStream(oneChunk(data));
  }

  /**
   * `restore` from the snapshot's bytes handed over in chunks of any size (frames may span chunks): rows are
   * written batch by batch as they arrive. Returns the snapshot's index.
   */
  async restoreStream(chunks: AsyncIterable<Uint8Array>): Promise<number> {
    assert(!this.closed, 'restore on a closed store');
    assert(!this.applying, 'restore while applying');
    this.applying = true;
    try {
      // staged write-behind rows are older than the snapshot, which replaces everything
      await this.dropStaged();
      const frames = readFrames(chunks);
      const header = (await frames.next()).value as
        | { format?: unknown; version?: unknown; index?: unknown }
        | undefined;
      if (header?.format !== SNAPSHOT_FORMAT || header.version !== SNAPSHOT_VERSION) {
        throw new Error('restore: not a Keel store snapshot of a known version');
      }
      const index = header.index;
      assert(Number.isSafeInteger(index) && (index as number) >= 0, 'restore: bad snapshot index');
      await this.db.put(META_RESTORING, packr.pack(index), { sync: true });
      let ops: StoreDbOp[] = [];
      const flushOps = async () => {
        if (ops.length > 0) await this.db.batch(ops, { sync: true });
        ops = [];
      };
      for await (const [key] of this.db.iterator({ gte: ENTITY_PREFIX, lt: ENTITY_END })) {
        ops.push({ type: 'del', key });
        if (ops.length === RESTORE_BATCH_ROWS) await flushOps();
      }
      await flushOps();
      const loaded = new Map<string, Row[]>();
      let count = 0;
      let end: number | undefined;
      for await (const f of frames) {
        assert(end === undefined, 'restore: data after the end frame');
        if (!Array.isArray(f)) {
          end = (f as { end?: number }).end;
          assert(Number.isSafeInteger(end), 'restore: malformed frame');
          continue;
        }
        const [entity, rows] = f as [string, Row[]];
        assert(this.collections.has(entity), `restore: unknown entity type '${entity}'`);
        let list = loaded.get(entity);
        if (!list) loaded.set(entity, (list = []));
        for (const row of rows) {
          ops.push({ type: 'put', key: this.rowKeys.of(entity, row.id), value: packr.pack(row) });
          storeValuesOf(row);
          list.push(row);
          count++;
          if (ops.length === RESTORE_BATCH_ROWS) await flushOps();
        }
      }
      assert(end === count, `restore: snapshot ends after ${count} rows, its end frame says ${end}`);
      ops.push({ type: 'put', key: META_APPLIED, value: packr.pack(index) }, { type: 'del', key: META_RESTORING });
      await flushOps();

      const changes: Change[] = [];
      for (const def of this.schema.defs.values()) {
        const old = this.collection(def.name);
        const next = new Collection(def);
        next.load(loaded.get(def.name) ?? []);
        for (const row of old.scan()) {
          if (!next.get(row.id)) changes.push({ entity: def.name, id: row.id, before: row, after: undefined });
        }
        this.collections.set(def.name, next);
      }
      this.appliedIndex = index as number;
      this.durable = this.appliedIndex;
      this.stagedIndex = this.appliedIndex;
      this.invalidateAll();
      this.derived.rebuild(this);
      for (const l of this.listeners) l(changes);
      return index as number;
    } finally {
      this.applying = false;
    }
  }

  /**
   * A stamp for caches of answers computed from the collections `names`: it changes whenever a publish changes a
   * row of one of them, and on restore and `invalidateAll` (a sum of counters that only grow, so an equal stamp
   * means none of them moved). Unknown names are refused.
   */
  stampOf(names: readonly string[]): number {
    let stamp = this.generation;
    for (const name of names) {
      assert(this.collections.has(name), `stamp of an unknown collection '${name}'`);
      stamp += this.collectionEpochs.get(name) ?? 0;
    }
    return stamp;
  }

  /** Makes every cached answer stale: changes `epoch` and every `stampOf` (e.g. after an index repair). */
  invalidateAll(): void {
    this.epoch++;
    this.generation++;
  }

  async getMeta(key: string): Promise<unknown> {
    const v = await this.db.get(META_PREFIX + key);
    return v === undefined ? undefined : packr.unpack(v);
  }

  async putMeta(key: string, value: unknown): Promise<void> {
    if (this.failure !== null) throw this.failure;
    const bytes = encodeChecked(value);
    try {
      await this.db.put(META_PREFIX + key, bytes, { sync: true });
    } catch (err) {
      throw this.fail('write', err);
    }
  }

  /** Closes the store; staged write-behind rows are written first (unless the store failed). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.failure === null) await this.flush().catch(() => {});
    await this.flushing;
    await this.db.close();
  }
}

function frame(value: unknown): Uint8Array {
  const body = packr.pack(value);
  const out = Buffer.allocUnsafe(4 + body.length);
  out.writeUInt32BE(body.length, 0);
  body.copy(out, 4);
  return out;
}

async function* oneChunk(data: Uint8Array): AsyncGenerator<Uint8Array> {
  yield data;
}

/** The decoded frames of a snapshot whose bytes arrive in chunks of any size. */
async function* readFrames(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<unknown> {
  let pending: Buffer = Buffer.alloc(0);
  for await (const chunk of chunks) {
    const c = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    pending = pending.length === 0 ? c : Buffer.concat([pending, c]);
    let at = 0;
    while (pending.length - at >= 4) {
      const len = pending.readUInt32BE(at);
      assert(len <= MAX_SNAPSHOT_FRAME_BYTES, 'restore: oversized frame');
      if (pending.length - at - 4 < len) break;
      yield packr.unpack(pending.subarray(at + 4, at + 4 + len));
      at += 4 + len;
    }
    pending = pending.subarray(at);
  }
  assert(pending.length === 0, 'restore: truncated frame');
}
