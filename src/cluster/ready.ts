/**
 * When a starting member is ready to serve: it knows a leader, and a read index confirmed by that leader has been
 * applied here (so its reads and its own writes are as fresh as the leader's). A cluster restarted all at once may
 * elect a leader that loses its term, or that has not committed an entry in it yet, just as a member starts: a read
 * index that timed out or met a change of leader is asked again while time remains, instead of failing the start on
 * the first try.
 */
import { RaftError, type RaftErrorCode } from '../../raft/index.js';

/** The read index refusals after which a starting member asks again. */
export const READY_RETRY_CODES: ReadonlySet<RaftErrorCode> = new Set<RaftErrorCode>([
  'timeout',
  'not-leader',
  'leadership-lost',
]);
/** Bound on the read indexes asked for (each is bounded in time by the Raft node's read timeout). */
export const MAX_READY_ATTEMPTS = 16;

export interface ReadySource {
  /** Resolves with the leader once this node knows one; rejects after `timeout_ms` (or at once when removed). */
  waitForLeader(timeout_ms: number): Promise<unknown>;
  /** A linearizable read index, applied here once it resolves. */
  readIndex(): Promise<unknown>;
  /** The removal this node learnt meanwhile, if any (thrown in place of a read's own error). */
  removal(): Error | null;
  onRetry?(code: RaftErrorCode, attempt: number): void;
}

/** Resolves once `source` is ready (see the module comment), within `timeout_ms`; else rejects with the last error. */
export async function untilReady(source: ReadySource, timeout_ms: number): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  for (let attempt = 1; ; attempt++) {
    await source.waitForLeader(Math.max(0, deadline - Date.now()));
    try {
      await source.readIndex();
      return;
    } catch (err) {
      const removal = source.removal();
      if (removal !== null) throw removal;
      const again = err instanceof RaftError && READY_RETRY_CODES.has(err.code);
      if (!again || Date.now() >= deadline || attempt >= MAX_READY_ATTEMPTS) throw err;
      source.onRetry?.(err.code, attempt);
    }
  }
}
