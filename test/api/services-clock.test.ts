/**
 * Services.nowIso, the time every write is stamped with: the clock's time as ISO text, made once per millisecond
 * and made again whenever the clock shows another one (forwards, backwards, by a fraction).
 */
import { describe, expect, it } from 'vitest';
import { Services } from '../../src/api/services.js';
import { manualClock } from '../support/clock.js';

describe('Services.nowIso', () => {
  it("answers the clock's time as ISO text, whichever way the clock moves", () => {
    const clock = manualClock(Date.parse('2026-11-27T10:00:00.000Z'));
    const config = { sessionTimeout_ms: 60_000, apiBaseUrls: [], instanceId: 'x', clustered: false };
    const svc = new Services({} as never, {} as never, config, clock);
    const seen: string[] = [];
    for (const step of [0, 0, 1, 999, 0.5, -1_000, 86_400_000, -1]) {
      clock.advance(step);
      const iso = svc.nowIso();
      expect(iso).toBe(new Date(clock.now()).toISOString());
      seen.push(iso);
    }
    expect(seen[0]).toBe('2026-11-27T10:00:00.000Z');
    expect(seen[3]).toBe('2026-11-27T10:00:01.000Z');
    expect(seen[5]).toBe('2026-11-27T10:00:00.000Z');
  });
});
