/**
 * The vocabulary of Keel's replicated state machine.
 *
 * A Command is plain data. It is built by an API handler (which computes ids, timestamps and password hashes
 * beforehand, so that applying it is deterministic), replicated through the log, and applied by `apply` on every
 * node in log order. Nothing here reads a clock, draws a random number or does I/O.
 */

/** A stored entity row: base fields plus the fields its declaration names. Rows are immutable once published. */
export interface Row {
  id: string;
  createdAt: string;
  updatedAt: string;
  tags: Record<string, unknown>;
  isSystem?: boolean;
  [field: string]: unknown;
}

/**
 * The row type of each entity type a store holds, by entity name. Storage is generic in it (`Store<M>`, `Txn<M>`,
 * `Command<E>`): the application instantiates it with its declarations' inferred row types, so that entity names are
 * checked by the compiler and rows read back typed; the default (any name → Row) is what storage itself and its
 * tests use. Purely a type: nothing at run time depends on it.
 */
export type RowMap = Record<string, Row>;

/** The entity names of a row map. */
export type EntityOf<M extends RowMap> = keyof M & string;

export type FieldType = 'string' | 'number' | 'bool' | 'datetime' | 'object' | 'map';

export interface FieldDef {
  type: FieldType;
  /** An array of `type` values (role attributes, id lists). */
  set?: boolean;
  /** Values must be unique across the collection (null/undefined/'' are not indexed). */
  unique?: boolean;
  /** Maintain an equality index (sets index every element). Reference fields are always indexed. */
  index?: boolean;
  /** The field holds ids of another collection. */
  ref?: { entity: string; onDelete: 'restrict' | 'cascade' | 'clear' };
  /** Hidden from ZitiQL (secrets, internal fields). Default: visible. */
  filter?: false;
  /** Error code the API reports when `unique` is violated (default: a field validation error). */
  conflictCode?: string;
  /**
   * A policy role list (`#attr`, `@id`, `#all`) naming rows of `entity` by `@id`: every `@id` a write adds must
   * exist, and deleting the row removes its `@id` from the lists naming it (OpenZiti's deleteEntityReferences).
   * The field must be an indexed set.
   */
  roles?: { entity: string };
}

export interface EntityDef {
  /** Collection name (the API path segment, e.g. `identities`). */
  name: string;
  /** Singular entity type used in messages (`identity`). */
  type: string;
  fields: Record<string, FieldDef>;
}

/**
 * A condition on the state a command was built against, checked inside apply before the command runs (so the
 * check and the write see the same state, however long the command took to reach the log):
 * - `eq`: the row `entity/id` exists and its `field` equals `value`;
 * - `ne`: the row is absent or its `field` differs from `value`;
 * - `absent`: no row of `entity` holds `value` in the indexed `field`.
 * A failed expectation is a recorded `PRECONDITION` failure, answered as the handler answers its own check: with
 * `apiCode` (the API error), or as a field error on `errorField` (a field of the request); each condition names one
 * or both. The condition's own `field` is the store's and is never reported (it may be internal: `fingerprint` of
 * a router row, `extJwtPending` of a session).
 */
export type Expect<E extends string = string> = {
  check: 'eq' | 'ne' | 'absent';
  entity: E;
  id?: string;
  field: string;
  value: unknown;
  reason: string;
} & ({ apiCode: string; errorField?: string } | { apiCode?: undefined; errorField: string });

/** A command; `E` is the entity names it may name (the application's, or any string). */
export type Command<E extends string = string> =
  | {
      op: 'create';
      entity: E;
      id: string;
      data: Record<string, unknown>;
      at: string;
      system?: boolean;
      expect?: Expect<E>[];
    }
  | {
      op: 'update';
      entity: E;
      id: string;
      set: Record<string, unknown>;
      at: string;
      system?: boolean;
      expect?: Expect<E>[];
    }
  | { op: 'delete'; entity: E; id: string; at: string; system?: boolean; ifExists?: boolean; expect?: Expect<E>[] }
  | { op: 'batch'; ops: Command<E>[]; expect?: Expect<E>[] }
  | { op: 'custom'; name: string; args: unknown; at: string };

export type StoreErrorCode =
  | 'NOT_FOUND'
  | 'ALREADY_EXISTS'
  | 'UNIQUE'
  | 'REFERENCED'
  | 'REF_NOT_FOUND'
  | 'SYSTEM_UPDATE'
  | 'SYSTEM_DELETE'
  | 'INVALID'
  | 'CONFLICT'
  /** An `Expect` of the command did not hold (the state changed since the handler checked it). */
  | 'PRECONDITION'
  /** The command broke an invariant (a bug, or a malformed command): rejected alone, recorded, never half-applied. */
  | 'REJECTED'
  /**
   * The command, or a row it writes, would not read back as written (storage/codec.ts: a lone UTF-16 surrogate,
   * nesting too deep to encode): rejected alone, recorded, never half-applied. `field` names where.
   */
  | 'UNSTORABLE';

/** A deterministic, recorded failure of a command: the handler turns it into an HTTP error. */
export interface StoreError {
  code: StoreErrorCode;
  entity: string;
  id?: string;
  field?: string;
  value?: unknown;
  reason: string;
  /** An API error code chosen by the declaration (FieldDef.conflictCode) or a custom command. */
  apiCode?: string;
}

export type CommandResult = { ok: true; value?: unknown } | { ok: false; error: StoreError };

export class StoreFailure extends Error {
  constructor(public readonly error: StoreError) {
    super(error.reason);
    this.name = 'StoreFailure';
  }
}

/**
 * The store can no longer be trusted to make writes durable: a LevelDB write failed (ENOSPC, EIO …; LevelDB's log
 * may hold a torn record after it, and later writes could be dropped on recovery), memory stopped matching disk
 * (a broken invariant while publishing a written batch), or an invariant of the group broke (a bug). From then on every write is refused with this error; reads
 * of what was published keep working. The process is meant to stop and restart: LevelDB then recovers its log.
 */
export class StoreFailedError extends Error {
  readonly code = 'STORE_FAILED';
  constructor(
    /** Where: an invariant while building the batch (nothing written), the LevelDB write, the publish after it. */
    readonly stage: 'apply' | 'write' | 'publish',
    /** What failed first (every later refusal carries the same). */
    readonly reason: string,
  ) {
    super(`store failed (${stage}): ${reason}; refusing writes until restarted`);
    this.name = 'StoreFailedError';
  }
}

/**
 * A command this code does not know (a member of a newer release proposed it during a rolling upgrade). Not one
 * command's failure: recorded as a refusal here while the members that know it apply it, the states would drift
 * apart. It fails the whole group, so the store fails and the member stops (docs/cluster.md, "Upgrades").
 */
export class UnknownCommandError extends Error {
  constructor(what: string) {
    super(`unknown command: ${what}`);
    this.name = 'UnknownCommandError';
  }
}

export function fail(error: StoreError): never {
  throw new StoreFailure(error);
}

/**
 * Invariant check that stays on in production (TIGER_STYLE). The message is an argument, built before the call: on
 * the write path, where a message names values (a template), test the condition first and call `assert(false, …)`
 * in the failing branch, so the message is built only on failure (built on every call, such messages cost the
 * apply bench about 370 B of its 3 800 B per identity create).
 */
export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`invariant violated: ${message}`);
}
