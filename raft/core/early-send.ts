/**
 * Which of a Ready's messages may leave before the Ready's write is durable (the leader's fsync overlapping its
 * followers', Raft thesis §10.2.1; etcd's asynchronous storage writes).
 *
 * Only a leader's replication traffic (`append`, `heartbeat`, `snapshot`) may go early, and only when the term it
 * speaks for is durable already (a leader elected in this very Ready, a single voter, must first persist its term
 * and vote, or a restart could lead the same term again with other entries). The core counts the leader's own
 * entries toward a commit only once the driver has advanced the Ready that carries them, so the commit index these
 * messages carry is durable on a quorum. Everything else — votes, grants, acknowledgements, read answers — asserts
 * state that must be durable first, and waits.
 *
 * Likewise, committed entries the log already holds durably may be applied while the Ready's write runs
 * (durableCommitted): a write committed by acknowledgements is answered without waiting for an unrelated fsync.
 */
import type { Message, Ready } from '../types.js';

const EARLY_TYPES: ReadonlySet<Message['type']> = new Set(['append', 'heartbeat', 'snapshot']);

export interface SplitMessages {
  /** May be sent while the Ready's write is in flight. */
  beforePersist: Message[];
  /** Must wait until the Ready's write is durable. */
  afterPersist: Message[];
}

/** Splits `rd.messages`; `durableTerm` is the term on disk before this Ready's write. */
export function splitMessages(rd: Ready, durableTerm: number): SplitMessages {
  return splitEarly(rd.messages, durableTerm);
}

/** Splits `messages` (in order) into those that may leave before the write of term `durableTerm` and the rest. */
export function splitEarly(messages: readonly Message[], durableTerm: number): SplitMessages {
  const beforePersist: Message[] = [];
  const afterPersist: Message[] = [];
  for (const m of messages) {
    if (EARLY_TYPES.has(m.type) && m.term <= durableTerm) beforePersist.push(m);
    else afterPersist.push(m);
  }
  return { beforePersist, afterPersist };
}

/**
 * How many of the Ready's committed entries, from the first, the log already holds durably, so that the driver may
 * apply them while the Ready's own write runs: those below the Ready's new entries (committed entries are never
 * overwritten, so a committed index at or past the first new entry is one of them, not durable yet), up to the
 * first membership change (whose application records it in the log). None with a snapshot to install first.
 */
export function durableCommitted(rd: Ready): number {
  if (rd.snapshot !== null) return 0;
  const firstNew = rd.entries.length > 0 ? rd.entries[0]!.index : Number.POSITIVE_INFINITY;
  let n = 0;
  while (n < rd.committed.length && rd.committed[n]!.index < firstNew && rd.committed[n]!.type !== 'conf') n++;
  return n;
}
