/**
 * The follower's side of a snapshot transfer, one rule for every log: chunks (Ready.snapshotChunks) arrive in
 * order; a chunk at offset 0 starts a snapshot (replacing a partial one); any other chunk must belong to the
 * snapshot being received and start exactly where its bytes end, or it is refused; a received snapshot is adopted
 * only once every byte of it arrived. Each log keeps the bytes in a sink of its own (`S`: parts in memory, records
 * in LevelDB) and refuses with an error of its own (`refuse`).
 */
import type { SnapshotChunk, SnapshotInfo, SnapshotMeta } from './types.js';

/** Where a log puts the bytes of a snapshot being received; `size_bytes` counts those received so far. */
export interface SnapshotSink {
  readonly size_bytes: number;
}

export class SnapshotReceipt<S extends SnapshotSink> {
  private incoming: { meta: SnapshotMeta; sink: S } | null = null;

  constructor(private readonly refuse: (reason: string) => Error) {}

  /** The sink of the snapshot being received, if any. */
  get sink(): S | null {
    return this.incoming?.sink ?? null;
  }

  /**
   * The sink for the bytes of chunk `c`: at offset 0 a new one (`open()`), with the partial one it replaces as
   * `abandoned`; otherwise the current one, refused unless `c` continues it exactly.
   */
  accept(c: SnapshotChunk, open: () => S): { sink: S; abandoned: S | null } {
    let abandoned: S | null = null;
    if (c.offset_bytes === 0) {
      abandoned = this.sink;
      this.incoming = { meta: c.meta, sink: open() };
    }
    const inc = this.incoming;
    if (inc === null || !sameSnapshot(inc.meta, c.meta)) {
      throw this.refuse(`snapshot chunk at ${c.offset_bytes} of snapshot ${c.meta.index} without its start`);
    }
    if (c.offset_bytes !== inc.sink.size_bytes) {
      throw this.refuse(`snapshot chunk at ${c.offset_bytes}, expected ${inc.sink.size_bytes}`);
    }
    return { sink: inc.sink, abandoned };
  }

  /** The sink holding every byte of `snap`; refused unless `snap` is the one received, in full. Keeps it. */
  received(snap: SnapshotInfo): S {
    const inc = this.incoming;
    if (inc === null || !sameSnapshot(inc.meta, snap.meta)) {
      throw this.refuse(`snapshot at ${snap.meta.index} was not received`);
    }
    if (inc.sink.size_bytes !== snap.size_bytes) {
      throw this.refuse(`snapshot at ${snap.meta.index}: received ${inc.sink.size_bytes} of ${snap.size_bytes} bytes`);
    }
    return inc.sink;
  }

  /** Like received(), and forgets it (the log has recorded it). */
  take(snap: SnapshotInfo): S {
    const sink = this.received(snap);
    this.clear();
    return sink;
  }

  /** Forgets the snapshot being received. */
  clear(): void {
    this.incoming = null;
  }
}

/** A sink keeping the bytes in memory (copies: the chunks may be views of buffers reused by their sender). */
export class MemorySink implements SnapshotSink {
  size_bytes = 0;
  private readonly parts: Uint8Array[] = [];

  write(data: Uint8Array): void {
    this.parts.push(data.slice());
    this.size_bytes += data.byteLength;
  }

  /** Every byte written, in one buffer. */
  bytes(): Uint8Array {
    return concatBytes(this.parts, this.size_bytes);
  }
}

/** `parts` in one buffer of `total_bytes` (their total size). */
export function concatBytes(parts: readonly Uint8Array[], total_bytes: number): Uint8Array {
  const data = new Uint8Array(total_bytes);
  let at = 0;
  for (const p of parts) {
    data.set(p, at);
    at += p.byteLength;
  }
  if (at !== total_bytes) throw new RangeError(`raft: joined ${at} bytes, expected ${total_bytes}`);
  return data;
}

function sameSnapshot(a: SnapshotMeta, b: SnapshotMeta): boolean {
  return a.index === b.index && a.term === b.term;
}
