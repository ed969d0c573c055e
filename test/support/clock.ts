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
