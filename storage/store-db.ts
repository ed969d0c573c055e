import { ClassicLevel } from 'classic-level';
// the same chained batch as the Raft log's (a LevelDB helper; raft/ itself imports nothing from here)
import { chainedBatch } from '../raft/storage/log-db.js';

/**
 * The part of a LevelDB (classic-level) handle the Store uses. Production opens a ClassicLevel (levelStoreDb);
 * tests inject other implementations at this boundary: a disk that fails writes (ENOSPC), a disk that loses
 * unsynced writes on a simulated power cut.
 */
export type StoreDbOp = { type: 'put'; key: string; value: Uint8Array } | { type: 'del'; key: string };

export interface StoreDbRange {
  gte: string;
  lt: string;
}

export interface StoreDb {
  open(): Promise<void>;
  close(): Promise<void>;
  get(key: string): Promise<Uint8Array | undefined>;
  /** Writes one key; with `sync` resolves only once it is on stable storage. */
  put(key: string, value: Uint8Array, opts: { sync: boolean }): Promise<void>;
  /** Applies `ops` atomically, in order; with `sync` resolves only once they are on stable storage. */
  batch(ops: StoreDbOp[], opts: { sync: boolean }): Promise<void>;
  /** Every entry with gte ≤ key < lt, in key order (UTF-8 byte order). */
  iterator(range: StoreDbRange): AsyncIterable<[string, Uint8Array]>;
}

/** The production StoreDb: a ClassicLevel in `dir` (UTF-8 keys, byte values). */
export function levelStoreDb(dir: string): StoreDb {
  const db = new ClassicLevel<string, Uint8Array>(dir, { keyEncoding: 'utf8', valueEncoding: 'view' });
  return {
    open: () => db.open(),
    close: () => db.close(),
    get: (key) => db.get(key),
    put: (key, value, opts) => db.put(key, value, opts),
    batch: (ops, opts) => chainedBatch(db, ops, opts),
    iterator: (range) => db.iterator(range),
  };
}
