/**
 * Shared pieces of the Raft log's tests (level-log, power-loss and write-ahead file tests). Not used by production
 * code.
 */
import type { ConfState } from '../types.js';
import { MIN_WAL_BYTES, type WalFile } from './wal.js';

/** Three voters a, b, c: the membership the log tests record with snapshots and conf records. */
export const conf3: ConfState = {
  voters: ['a', 'b', 'c'],
  learners: [],
  votersOutgoing: [],
  learnersNext: [],
  autoLeave: false,
};

/** A (non-joint unless `votersOutgoing`) configuration of these voters and learners. */
export function confOf(voters: string[], learners: string[] = [], votersOutgoing: string[] = []): ConfState {
  return { voters, learners, votersOutgoing, learnersNext: [], autoLeave: false };
}

/**
 * A write-ahead file in memory: every write is "durable" at once, and `bytes` is the file, for tests that damage
 * or inspect it. (power-loss-testkit.ts simulates one that power losses tear.)
 */
export function memoryWal(size_bytes = MIN_WAL_BYTES): WalFile & { bytes: Buffer } {
  const bytes = Buffer.alloc(size_bytes);
  return {
    bytes,
    size_bytes,
    read: async (position, length) => Buffer.from(bytes.subarray(position, position + length)),
    write: async (parts, position) => {
      Buffer.concat(parts).copy(bytes, position);
    },
    close: async () => undefined,
  };
}
