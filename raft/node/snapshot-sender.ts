/**
 * Sends a leader's snapshot chunks. The core emits `snapshot` messages without bytes (it never holds a
 * snapshot's data); each is queued here, its bytes read from the log's chunk records (DurableLog.readSnapshot),
 * then handed to the transport, one read at a time and in order. Memory is bounded by the core's window of
 * chunks in flight per follower (maxInflightSnapshotChunks) and by MAX_QUEUED here: beyond it a chunk is dropped,
 * which the stream recovers from like any lost message (the core rewinds to what the follower acknowledged).
 */
import type { Message, SnapshotMeta } from '../types.js';

/** Bound on chunks waiting to be read and sent (all followers together). */
export const MAX_QUEUED_SNAPSHOT_CHUNKS = 256;

export interface SnapshotSenderDeps {
  read(meta: SnapshotMeta, offset_bytes: number, max_bytes: number): Promise<Uint8Array | null>;
  chunk_bytes: number;
  send(m: Message): void;
  /** The snapshot a chunk belongs to is not the log's any more (replaced by a newer one). */
  gone(to: string): void;
  /** Reading the log failed. */
  failed(err: Error): void;
}

export class SnapshotSender {
  private readonly queue: Message[] = [];
  private running = false;
  private stopped = false;
  /** Chunks dropped because the queue was full (for tests and status). */
  dropped = 0;

  constructor(private readonly deps: SnapshotSenderDeps) {}

  enqueue(m: Message): void {
    if (this.stopped) return;
    if (m.type !== 'snapshot' || m.snapshot === undefined) throw new Error(`raft: ${m.type} is not a snapshot chunk`);
    if (this.queue.length >= MAX_QUEUED_SNAPSHOT_CHUNKS) {
      this.dropped++;
      return;
    }
    this.queue.push(m);
    if (!this.running) void this.pump();
  }

  get queued(): number {
    return this.queue.length;
  }

  stop(): void {
    this.stopped = true;
    this.queue.length = 0;
  }

  private async pump(): Promise<void> {
    this.running = true;
    try {
      // Bounded: each pass takes one queued chunk, and the queue holds at most MAX_QUEUED_SNAPSHOT_CHUNKS.
      while (!this.stopped && this.queue.length > 0) {
        const m = this.queue.shift()!;
        const c = m.snapshot!;
        let data: Uint8Array | null;
        try {
          data = await this.deps.read(c.meta, c.offset_bytes, this.deps.chunk_bytes);
        } catch (err) {
          if (!this.stopped) this.deps.failed(err as Error);
          return;
        }
        if (this.stopped) return;
        if (data === null) {
          // Later chunks of the same stream are as stale: drop them too.
          for (let i = this.queue.length - 1; i >= 0; i--) {
            const q = this.queue[i]!;
            if (q.to === m.to && q.snapshot!.meta.index === c.meta.index) this.queue.splice(i, 1);
          }
          this.deps.gone(m.to);
          continue;
        }
        this.deps.send({ ...m, snapshot: { ...c, data } });
      }
    } finally {
      this.running = false;
    }
  }
}
