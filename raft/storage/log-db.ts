/**
 * The part of a LevelDB (classic-level) handle LevelLog uses. LevelLog opens a ClassicLevel itself; tests may
 * inject another implementation (raft/storage/power-loss-testkit.ts simulates power loss) through
 * LevelLogOptions.db. Production code never does.
 */
export type LogDbOp = { type: 'put'; key: Buffer; value: Buffer } | { type: 'del'; key: Buffer };

export interface LogDbRange {
  gte?: Buffer;
  lt?: Buffer;
  limit?: number;
}

export interface LogDbIterator {
  /** Up to `size` entries in key order; an empty array at the end. */
  nextv(size: number): Promise<Array<[Buffer, Buffer]>>;
  close(): Promise<void>;
}

export interface LogDb {
  open(): Promise<void>;
  close(): Promise<void>;
  getMany(keys: Buffer[]): Promise<Array<Buffer | undefined>>;
  keys(range: LogDbRange): { all(): Promise<Buffer[]> };
  iterator(range: LogDbRange): LogDbIterator;
  /** Applies `ops` atomically, in order; with `sync` resolves only once they are on stable storage. */
  batch(ops: LogDbOp[], opts: { sync: boolean }): Promise<void>;
  put(key: Buffer, value: Buffer, opts: { sync: boolean }): Promise<void>;
}
