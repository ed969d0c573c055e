/**
 * Power-loss simulation for tests of LevelLog (and of RaftNode over LevelLog). Not used by production code.
 *
 * A PowerLossDisk hands out LogDb handles (LevelLogOptions.db) backed by a real LevelDB (classic-level) in a
 * directory of its own, and records every batch written through them with its `sync` flag. powerLoss() cuts the
 * power: the handle fails every later call (a write in flight never reports success), and the disk's durable
 * image becomes its previous image plus
 *   - every synced batch that completed (reported success),
 *   - each unsynced (or still in-flight) batch issued before the last of those, kept or lost at random: LevelDB
 *     switches log files without fsync, so an unsynced batch can be lost while a later synced one survives,
 *   - a random prefix of the batches issued after it.
 * The next db() handle is a fresh LevelDB holding exactly that image, which LevelLog.open then recovers from.
 * So a test that checks "everything acknowledged survives" fails if a write LevelLog relies on is not synced.
 *
 * The disk also holds one write-ahead file (wal(): LevelLogOptions.wal.file), whose writes are durable when they
 * report success, as with O_DSYNC. A power loss keeps every completed write and of each write still in flight a
 * random prefix of its bytes (none, some, or all) or a random subset of its 512-byte sectors: a record torn.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ClassicLevel } from 'classic-level';
import type { Random } from '../types.js';
import type { LogDb, LogDbIterator, LogDbOp, LogDbRange } from './log-db.js';
import { MIN_WAL_BYTES, type WalFile } from './wal.js';

/** One batch as written through a handle. */
export interface RecordedWrite {
  ops: LogDbOp[];
  sync: boolean;
  /** The batch reported success before the power was cut. */
  done: boolean;
}

export interface PowerLossOptions {
  /**
   * Decides the fate of each write instead of the rules above (for tests that model a specific loss, e.g. one
   * batch lost while a later synced one survives).
   */
  keep?: (w: RecordedWrite, i: number) => boolean;
}

/** A write-ahead write in flight is torn at this granularity when not at a random byte. */
const SECTOR_BYTES = 512;
/** Bound on writes recorded between two power losses (a test writing more is told so). */
const MAX_RECORDED_WRITES = 1_000_000;

export class PowerLossDisk {
  private image = new Map<string, Buffer>();
  private writes: RecordedWrite[] = [];
  private generation = 0;
  private current: PowerLossDb | null = null;
  /** The write-ahead file's durable bytes (null until wal() is first called). */
  private walImage: Buffer | null = null;
  private walWrites: WalWrite[] = [];
  private walCurrent: PowerLossWal | null = null;
  /** What the power losses kept and lost, for tests that check their own premise. */
  readonly stats = {
    powerLosses: 0,
    syncedKept: 0,
    uncertainKept: 0,
    uncertainLost: 0,
    walWrites: 0,
    /** In-flight write-ahead writes a power loss cut: some of their bytes kept, not all. */
    walTorn: 0,
  };

  /** `syncDelay_ms`: latency added to every synced batch before it reports success (emulates fsync). */
  constructor(
    private readonly dir: string,
    private readonly random: Random,
    private readonly syncDelay_ms = 0,
  ) {
    mkdirSync(dir, { recursive: true });
  }

  /** Writes recorded since the last power loss: the index the next write will have in PowerLossOptions.keep. */
  get writeCount(): number {
    return this.writes.length;
  }

  /** A handle for LevelLog.open(path, { db }) holding the durable image. Only one handle is live at a time. */
  db(): LogDb {
    if (this.current !== null && !this.current.dead) throw new Error('power-loss disk: a handle is still live');
    const path = join(this.dir, `gen-${this.generation++}`);
    this.current = new PowerLossDb(path, new Map(this.image), this.syncDelay_ms, (w) => {
      if (this.writes.length >= MAX_RECORDED_WRITES) throw new Error('power-loss disk: too many writes recorded');
      this.writes.push(w);
    });
    return this.current;
  }

  /**
   * A handle on the disk's write-ahead file (created with `size_bytes` of zeros on the first call), holding its
   * durable bytes. Like db(), one live handle at a time; the power loss cuts both.
   */
  wal(size_bytes = MIN_WAL_BYTES): WalFile {
    if (this.walCurrent !== null && !this.walCurrent.dead && !this.walCurrent.closed) {
      throw new Error('power-loss disk: a wal handle is still live');
    }
    this.cutWal(); // a closed handle's writes are all on the disk
    this.walImage ??= Buffer.alloc(size_bytes);
    this.walCurrent = new PowerLossWal(Buffer.from(this.walImage), this.syncDelay_ms, (w) => {
      if (this.walWrites.length >= MAX_RECORDED_WRITES) throw new Error('power-loss disk: too many writes recorded');
      this.walWrites.push(w);
      this.stats.walWrites++;
    });
    return this.walCurrent;
  }

  /** Cuts the power now (see the module comment); resolves once the old handle's files are gone. */
  async powerLoss(opts: PowerLossOptions = {}): Promise<void> {
    this.cutWal();
    const h = this.current;
    if (h === null || h.dead) return;
    h.dead = true;
    const writes = this.writes;
    this.writes = [];
    this.stats.powerLosses++;
    let lastSynced = -1;
    writes.forEach((w, i) => {
      if (w.sync && w.done) lastSynced = i;
    });
    const prefix = lastSynced + 1 + this.random.int(writes.length - lastSynced);
    for (const [i, w] of writes.entries()) {
      let keep: boolean;
      if (opts.keep !== undefined) keep = opts.keep(w, i);
      else if (w.sync && w.done) keep = true;
      else if (i < lastSynced) keep = this.random.int(2) === 0;
      else keep = i < prefix;
      if (w.sync && w.done && keep) this.stats.syncedKept++;
      else if (keep) this.stats.uncertainKept++;
      else this.stats.uncertainLost++;
      if (!keep) continue;
      for (const op of w.ops) {
        if (op.type === 'put') this.image.set(op.key.toString('hex'), op.value);
        else this.image.delete(op.key.toString('hex'));
      }
    }
    await h.shutdown();
  }

  /** The write-ahead file's part of a power loss: completed writes kept, those in flight cut at a random byte. */
  private cutWal(): void {
    const w = this.walCurrent;
    if (w === null || w.dead) return;
    w.dead = true; // the handle fails every later call
    const image = this.walImage!;
    for (const write of this.walWrites) {
      if (write.done) {
        write.data.copy(image, write.position);
        continue;
      }
      // A write in flight: a random prefix of its bytes, or (half the time) a random subset of its 512-byte
      // sectors, as a device may persist them in any order.
      const { data, position } = write;
      let kept = 0;
      if (this.random.int(2) === 0) {
        kept = this.random.int(data.length + 1);
        data.copy(image, position, 0, kept);
      } else {
        for (let at = 0; at < data.length; at += SECTOR_BYTES) {
          if (this.random.int(2) === 0) continue;
          const end = Math.min(data.length, at + SECTOR_BYTES);
          data.copy(image, position + at, at, end);
          kept += end - at;
        }
      }
      if (kept > 0 && kept < data.length) this.stats.walTorn++;
    }
    this.walWrites = [];
  }

  /** Closes the live handle's files (end of a test). */
  async close(): Promise<void> {
    await this.powerLoss({ keep: () => true });
  }
}

class PowerLossDb implements LogDb {
  dead = false;
  private readonly level: ClassicLevel<Buffer, Buffer>;
  private readonly pending = new Set<Promise<unknown>>();
  private opened = false;

  constructor(
    private readonly path: string,
    private readonly initial: Map<string, Buffer>,
    private readonly syncDelay_ms: number,
    private readonly record: (w: RecordedWrite) => void,
  ) {
    this.level = new ClassicLevel<Buffer, Buffer>(path, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  }

  async open(): Promise<void> {
    this.alive();
    await this.track(this.level.open());
    this.opened = true;
    const ops: LogDbOp[] = [...this.initial].map(([k, value]) => ({ type: 'put', key: Buffer.from(k, 'hex'), value }));
    if (ops.length > 0) await this.track(this.level.batch(ops));
    this.alive();
  }

  async close(): Promise<void> {
    if (this.dead) return; // the power is off: the disk owns the files now
    await this.shutdown();
  }

  getMany(keys: Buffer[]): Promise<Array<Buffer | undefined>> {
    this.alive();
    return this.track(this.level.getMany(keys));
  }

  keys(range: LogDbRange): { all(): Promise<Buffer[]> } {
    this.alive();
    return { all: () => this.track(this.level.keys(range).all()) };
  }

  iterator(range: LogDbRange): LogDbIterator {
    this.alive();
    const it = this.level.iterator(range);
    return {
      nextv: (size) => {
        this.alive();
        return this.track(it.nextv(size));
      },
      close: () => this.track(it.close()),
    };
  }

  async batch(ops: LogDbOp[], opts: { sync: boolean }): Promise<void> {
    this.alive();
    const w: RecordedWrite = { ops: [...ops], sync: opts.sync, done: false };
    this.record(w);
    // The simulator decides durability; the real LevelDB write need not be synced.
    await this.track(this.level.batch(ops));
    if (opts.sync && this.syncDelay_ms > 0) await this.track(new Promise((r) => setTimeout(r, this.syncDelay_ms)));
    this.alive(); // cut while in flight: never reported as written
    w.done = true;
  }

  put(key: Buffer, value: Buffer, opts: { sync: boolean }): Promise<void> {
    return this.batch([{ type: 'put', key, value }], opts);
  }

  /** @internal Waits for operations in flight, closes the LevelDB and deletes its files. */
  async shutdown(): Promise<void> {
    this.dead = true;
    await Promise.allSettled([...this.pending]);
    if (this.opened) await this.level.close();
    this.opened = false;
    rmSync(this.path, { recursive: true, force: true });
  }

  private alive(): void {
    if (this.dead) throw new Error('power-loss disk: the power was cut');
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.pending.add(p);
    const remove = (): void => {
      this.pending.delete(p);
    };
    p.then(remove, remove);
    return p;
  }
}

interface WalWrite {
  position: number;
  data: Buffer;
  /** The write reported success before the power was cut. */
  done: boolean;
}

/** A write-ahead file in memory: reads see every write issued; what survives a power loss is the disk's call. */
class PowerLossWal implements WalFile {
  /** Cut by a power loss (or retired by the next handle): every call fails. */
  dead = false;
  closed = false;
  readonly size_bytes: number;

  constructor(
    private readonly bytes: Buffer,
    private readonly syncDelay_ms: number,
    private readonly record: (w: WalWrite) => void,
  ) {
    this.size_bytes = bytes.length;
  }

  async read(position: number, length: number): Promise<Buffer> {
    this.alive();
    await Promise.resolve();
    return Buffer.from(this.bytes.subarray(position, Math.min(this.size_bytes, position + length)));
  }

  async write(parts: readonly Buffer[], position: number): Promise<void> {
    this.alive();
    const data = Buffer.concat(parts);
    if (position + data.length > this.size_bytes)
      throw new RangeError('power-loss disk: write past the end of the wal');
    const w: WalWrite = { position, data, done: false };
    this.record(w);
    data.copy(this.bytes, position);
    await new Promise((r) => setTimeout(r, this.syncDelay_ms));
    this.alive(); // cut while in flight: never reported as written
    w.done = true;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private alive(): void {
    if (this.dead || this.closed) throw new Error('power-loss disk: the power was cut or the handle closed');
  }
}
