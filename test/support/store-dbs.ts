/**
 * StoreDb implementations for tests that inject faults at the store's database boundary (storage/store-db.ts):
 * a disk that fails writes on demand (ENOSPC), and a disk that loses unsynced writes on a power cut. The latter
 * is the Raft log's power-loss disk (raft/storage/power-loss-testkit.ts) seen through the StoreDb interface, so
 * both logs are tested against the same model of what a power cut keeps.
 */
import type { LogDb } from '../../raft/storage/log-db.js';
import { levelStoreDb, type StoreDb, type StoreDbOp, type StoreDbRange } from '../../storage/store-db.js';

/** An error like the one LevelDB reports when the disk is full. */
export function enospc(): Error {
  return Object.assign(new Error('IO error: /data/state/000005.log: No space left on device'), {
    code: 'LEVEL_IO_ERROR',
  });
}

/** A real LevelDB whose next writes fail while `failWrites` is set; counts the writes that reached it. */
export class FaultyDb implements StoreDb {
  failWrites: (() => Error) | null = null;
  writes = 0;
  private readonly inner: StoreDb;

  constructor(dir: string) {
    this.inner = levelStoreDb(dir);
  }

  open(): Promise<void> {
    return this.inner.open();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
  get(key: string): Promise<Uint8Array | undefined> {
    return this.inner.get(key);
  }
  iterator(range: StoreDbRange): AsyncIterable<[string, Uint8Array]> {
    return this.inner.iterator(range);
  }
  async put(key: string, value: Uint8Array, opts: { sync: boolean }): Promise<void> {
    return this.batch([{ type: 'put', key, value }], opts);
  }
  async batch(ops: StoreDbOp[], opts: { sync: boolean }): Promise<void> {
    this.writes++;
    if (this.failWrites) throw this.failWrites();
    return this.inner.batch(ops, opts);
  }
}

/** Entries read per step when iterating a LogDb. */
const ITERATOR_STEP = 256;

/** A StoreDb over a LogDb handle (a power-loss disk's): UTF-8 keys as bytes, the same key order as LevelDB's. */
export function storeDbOverLogDb(db: LogDb): StoreDb {
  const key = (k: string) => Buffer.from(k, 'utf8');
  const ops = (list: StoreDbOp[]) =>
    list.map((op) =>
      op.type === 'put'
        ? { type: 'put' as const, key: key(op.key), value: Buffer.from(op.value) }
        : { ...op, key: key(op.key) },
    );
  return {
    open: () => db.open(),
    close: () => db.close(),
    get: async (k) => (await db.getMany([key(k)]))[0],
    put: (k, value, opts) => db.put(key(k), Buffer.from(value), opts),
    batch: (list, opts) => db.batch(ops(list), opts),
    async *iterator(range) {
      const it = db.iterator({ gte: key(range.gte), lt: key(range.lt) });
      try {
        for (;;) {
          const step = await it.nextv(ITERATOR_STEP);
          if (step.length === 0) return;
          for (const [k, v] of step) yield [k.toString('utf8'), v] as [string, Uint8Array];
        }
      } finally {
        await it.close();
      }
    },
  };
}
