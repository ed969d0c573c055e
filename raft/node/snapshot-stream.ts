/**
 * Adapters between a state machine's streaming snapshot interface (StateMachine.snapshotStream/restoreStream)
 * and the log's snapshot, which is one buffer: the Raft log keeps the encoded snapshot once in memory (the core
 * reads it synchronously to stream it to followers in chunks).
 */
import type { Snapshot } from '../types.js';
import type { SnapshotChunks, StateMachine } from './state-machine.js';

/** Chunk size handed to restoreStream: bounded, so a receiver writes the state in bounded batches. */
export const RESTORE_CHUNK_BYTES = 1 << 20;

/** Bound on the chunks one snapshot stream may yield (2^20 chunks: 1 TiB at 1 MiB each). */
const MAX_CHUNKS = 1 << 20;

/** The views of `data` in chunks of at most `chunk_bytes` (no copies). */
export async function* chunksOf(data: Uint8Array, chunk_bytes = RESTORE_CHUNK_BYTES): AsyncGenerator<Uint8Array> {
  if (!(chunk_bytes >= 1)) throw new RangeError('raft: chunk_bytes must be positive');
  for (let off = 0; off < data.byteLength; off += chunk_bytes) {
    yield data.subarray(off, Math.min(data.byteLength, off + chunk_bytes));
  }
}

/**
 * Reads a snapshot stream into one buffer. With `size_bytes` the chunks are copied into a buffer of that size as
 * they arrive (the state machine never holds more than the chunk it is producing); without it they are kept
 * until the end and joined once.
 */
export async function collectSnapshot(stream: SnapshotChunks): Promise<{ index: number; data: Uint8Array }> {
  const { index, size_bytes } = stream;
  if (size_bytes !== undefined) {
    if (!(Number.isSafeInteger(size_bytes) && size_bytes >= 0)) {
      throw new RangeError(`raft: snapshot stream size_bytes ${size_bytes} is not a byte count`);
    }
    const data = new Uint8Array(size_bytes);
    let at = 0;
    let n = 0;
    for await (const chunk of stream.chunks) {
      if (++n > MAX_CHUNKS) throw new RangeError(`raft: snapshot stream yields more than ${MAX_CHUNKS} chunks`);
      if (at + chunk.byteLength > size_bytes) {
        throw new RangeError(`raft: snapshot stream yields more than its size_bytes ${size_bytes}`);
      }
      data.set(chunk, at);
      at += chunk.byteLength;
    }
    if (at !== size_bytes) throw new RangeError(`raft: snapshot stream yields ${at} bytes, size_bytes ${size_bytes}`);
    return { index, data };
  }
  const parts: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of stream.chunks) {
    if (parts.length >= MAX_CHUNKS) throw new RangeError(`raft: snapshot stream yields more than ${MAX_CHUNKS} chunks`);
    parts.push(chunk);
    total += chunk.byteLength;
  }
  const data = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    data.set(p, at);
    at += p.byteLength;
  }
  return { index, data };
}

/** The state machine's snapshot, through snapshotStream when it has one. */
export function takeSnapshot(sm: StateMachine): Promise<{ index: number; data: Uint8Array }> {
  if (sm.snapshotStream === undefined) return sm.snapshot();
  return sm.snapshotStream().then(collectSnapshot);
}

/** Restores the state machine from `snap`, through restoreStream (in bounded chunks) when it has one. */
export function restoreSnapshot(sm: StateMachine, snap: Snapshot): Promise<void> {
  if (sm.restoreStream === undefined) return sm.restore(snap);
  return sm.restoreStream(snap.meta, chunksOf(snap.data));
}
