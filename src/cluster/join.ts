/**
 * A new member's request to join: it asks a member's peer API to add it, and asks again after a refusal that
 * leaves the outcome open (a change of leader, another membership change still pending). Asking again is safe:
 * addMember finishes what an earlier request started (ClusterNode.addMember).
 */

import { setTimeout as sleep } from 'node:timers/promises';
import type { RaftErrorCode } from '../../raft/index.js';
import { withTimeout } from '../util/timeout.js';
import { orRefusal, type PeerClient, raftCodeOf } from './peer-api.js';

/** At most this many requests; the waits between them double from JOIN_RETRY_FIRST_MS up to JOIN_RETRY_MAX_MS. */
export const JOIN_ATTEMPTS = 8;
const JOIN_RETRY_FIRST_MS = 200;
const JOIN_RETRY_MAX_MS = 2_000;

/** The Raft refusals after which a join is asked again (any other error ends it). */
const JOIN_RETRY_CODES: ReadonlySet<RaftErrorCode> = new Set<RaftErrorCode>([
  'leadership-lost',
  'not-leader',
  'overwritten',
  'conf-change-refused',
  'not-caught-up',
  'too-many-pending',
]);

export interface JoinOptions {
  /** Bound on each request. */
  timeout_ms: number;
  /** True once the joining node is stopping (no further request). */
  stopped: () => boolean;
  onRetry?: (attempt: number, code: RaftErrorCode) => void;
  /** The first wait between two requests (then doubled, up to JOIN_RETRY_MAX_MS). */
  firstWait_ms?: number;
}

/** Asks the member behind `c` (at `address`) to add `member` as a voter; resolves once it has. */
export async function askToJoin(
  c: PeerClient,
  address: string,
  member: { id: string; address: string },
  opts: JoinOptions,
): Promise<void> {
  const firstWait_ms = opts.firstWait_ms ?? JOIN_RETRY_FIRST_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      await orRefusal(c, address, () =>
        withTimeout(
          c.api.addMember.mutate({ id: member.id, address: member.address, voter: true }),
          opts.timeout_ms,
          `joining through ${address}`,
        ),
      );
      return;
    } catch (err) {
      const code = raftCodeOf(err);
      if (code === null || !JOIN_RETRY_CODES.has(code) || attempt >= JOIN_ATTEMPTS || opts.stopped()) throw err;
      opts.onRetry?.(attempt, code);
      await sleep(Math.min(JOIN_RETRY_MAX_MS, firstWait_ms * 2 ** (attempt - 1)));
    }
  }
}
