/**
 * Adapters between a state machine's snapshot interface and the log's snapshot storage, which writes and reads a
 * snapshot chunk by chunk (DurableLog.createSnapshot / snapshotChunks): with the streaming forms
 * (snapshotStream/restoreStream) no buffer of the whole snapshot is ever built; the whole-buffer forms
 * (snapshot/restore) of simple machines are served by joining the chunks.
 */
import { concatBytes } from '../snapshot-receipt.js';
import type { SnapshotMeta } from '../types.js';
import type { SnapshotChunks, StateMachine } from './state-machine.js';

/** Bound on the chunks one snapshot stream may yield (2^20 chunks: 1 TiB at 1 MiB each). */
const MAX_CHUNKS = 1 << 20;

/**
 * The chunks of `stream`, passed on as they come, checked: at most MAX_CHUNKS of them, and exactly `size_bytes`
 * bytes in total when the stream announced its size (a stream yielding more or less is refused: RangeError).
 */
export async function* checkedChunks(stream: SnapshotChunks): AsyncGenerator<Uint8Array> {
  const { size_bytes } = stream;
  if (size_bytes !== undefined && !(Number.isSafeInteger(size_bytes) && size_bytes >= 0)) {
    throw new RangeError(`raft: snapshot stream size_bytes ${size_bytes} is not a byte count`);
  }
  let total = 0;
  let n = 0;
  for await (const chunk of stream.chunks) {
    if (++n > MAX_CHUNKS) throw new RangeError(`raft: snapshot stream yields more than ${MAX_CHUNKS} chunks`);
    total += chunk.byteLength;
    if (size_bytes !== undefined && total > size_bytes) {
      throw new RangeError(`raft: snapshot stream yields more than its size_bytes ${size_bytes}`);
    }
    yield chunk;
  }
  if (size_bytes !== undefined && total !== size_bytes) {
    throw new RangeError(`raft: snapshot stream yields ${total} bytes, size_bytes ${size_bytes}`);
  }
}

/** The state machine's snapshot for the log: its chunks as it streams them (snapshotStream), or one buffer. */
export async function takeSnapshot(
  sm: StateMachine,
): Promise<{ index: number; data: Uint8Array | AsyncIterable<Uint8Array> }> {
  if (sm.snapshotStream === undefined) return sm.snapshot();
  const stream = await sm.snapshotStream();
  return { index: stream.index, data: checkedChunks(stream) };
}

/** Joins chunks into one buffer (for a state machine without restoreStream). */
export async function joinChunks(chunks: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let total = 0;
  for await (const c of chunks) {
    if (parts.length >= MAX_CHUNKS) throw new RangeError(`raft: a snapshot of more than ${MAX_CHUNKS} chunks`);
    parts.push(c);
    total += c.byteLength;
  }
  return concatBytes(parts, total);
}

/**
 * Restores the state machine from a snapshot whose bytes are `chunks` (the log's records, read one at a time):
 * through restoreStream as they are read, or restore() with them joined.
 */
export async function restoreSnapshot(
  sm: StateMachine,
  meta: SnapshotMeta,
  chunks: AsyncIterable<Uint8Array>,
): Promise<void> {
  if (sm.restoreStream !== undefined) return sm.restoreStream(meta, chunks);
  return sm.restore({ meta, data: await joinChunks(chunks) });
}
