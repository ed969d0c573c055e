import type { Clock } from '../../src/api/services.js';

/** A clock the test moves by hand (ControllerOptions.clock). */
export interface ManualClock extends Clock {
  advance(ms: number): void;
}

export function manualClock(startMs = Date.parse('2026-01-01T00:00:00Z')): ManualClock {
  let t = startMs;
  return {
    now: () => t,
    advance(ms: number) {
      t += ms;
    },
  };
}

/** Real time shifted by a settable offset: `during(ms, fn)` runs `fn` that far in the future, then goes back. */
export interface ShiftedClock extends Clock {
  during<T>(offset_ms: number, fn: () => Promise<T>): Promise<T>;
}

export function shiftedClock(): ShiftedClock {
  let offset_ms = 0;
  return {
    now: () => Date.now() + offset_ms,
    async during(ms, fn) {
      offset_ms = ms;
      try {
        return await fn();
      } finally {
        offset_ms = 0;
      }
    },
  };
}
