import { describe, expect, it } from 'vitest';
import type { Services } from '../api/services.js';
import { CATCH_UP_TIMEOUT_MS, MAX_CATCH_UPS, SessionService } from './sessions.js';

/** A member whose read barrier answers only when `release()` is called (a leader that confirmed an index this
 * member is still far from applying). */
function stuckMember() {
  let started = 0;
  const waiting: Array<() => void> = [];
  const svc = {
    cluster: {
      readBarrier: () => {
        started++;
        return new Promise<void>((resolve) => waiting.push(resolve));
      },
    },
  } as unknown as Services;
  const release = () => {
    for (const resolve of waiting.splice(0)) resolve();
  };
  return { svc, started: () => started, release };
}

describe('SessionService.catchUp: bounded waits', () => {
  it('gives up on a barrier after catchUpTimeout_ms and goes on', async () => {
    const m = stuckMember();
    const sessions = new SessionService(m.svc, { flush_ms: 1_000, sweep_ms: 1_000, catchUpTimeout_ms: 50 });
    const t0 = performance.now();
    await sessions.catchUp();
    const waited_ms = performance.now() - t0;
    expect(m.started()).toBe(1);
    expect(waited_ms).toBeGreaterThanOrEqual(45);
    expect(waited_ms).toBeLessThan(CATCH_UP_TIMEOUT_MS);
    m.release();
  }, 3_000); // an unbounded wait fails here, not after the suite's default timeout

  it('waits for at most maxCatchUps barriers at once; a caller beyond does not wait', async () => {
    expect(MAX_CATCH_UPS).toBeGreaterThan(0);
    const m = stuckMember();
    const sessions = new SessionService(m.svc, {
      flush_ms: 1_000,
      sweep_ms: 1_000,
      catchUpTimeout_ms: 2_000,
      maxCatchUps: 2,
    });
    let settled = 0;
    const held = [sessions.catchUp(), sessions.catchUp()].map((p) => p.then(() => settled++));
    await sessions.catchUp(); // the third returns at once, without a barrier
    expect(m.started()).toBe(2);
    expect(settled).toBe(0);
    m.release();
    await Promise.all(held);
    expect(settled).toBe(2);
    // the slots are free again
    const again = sessions.catchUp();
    expect(m.started()).toBe(3);
    m.release();
    await again;
  });

  it('does nothing on a single node', async () => {
    const sessions = new SessionService({} as Services);
    await sessions.catchUp();
  });
});
