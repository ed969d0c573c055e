/** Thrown when the durable log fails a checksum or continuity check on open. Never swallowed: data loss must be loud. */
export class LogCorruptError extends Error {
  /** Printable form of the LevelDB key that failed the check. */
  readonly key: string;
  /** Log index concerned, when the record is an entry. */
  readonly index: number | null;

  constructor(key: string, index: number | null, reason: string) {
    super(`raft log corrupt at ${index === null ? '' : `entry ${index} `}(key ${key}): ${reason}`);
    this.name = 'LogCorruptError';
    this.key = key;
    this.index = index;
  }
}

/** Thrown when a caller uses the log after close() or violates its write protocol. */
export class LogStateError extends Error {
  constructor(reason: string) {
    super(`raft log: ${reason}`);
    this.name = 'LogStateError';
  }
}

/**
 * createSnapshot refused a snapshot not newer than the log's (e.g. a newer one was received from the leader while
 * it was being written): nothing changed; the caller skips it.
 */
export class SnapshotSupersededError extends LogStateError {
  constructor(index: number, current: number) {
    super(`snapshot at ${index} is not newer than ${current}`);
    this.name = 'SnapshotSupersededError';
  }
}
