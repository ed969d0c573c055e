import { describe, expect, it } from 'vitest';
import { ApiError } from '../../http/errors.js';
import { FairGate } from './rate-limit.js';

/** Work that finishes when the test says so. */
function pending(): { work: () => Promise<string>; finish: (v: string) => void } {
  let finish!: (v: string) => void;
  const p = new Promise<string>((r) => {
    finish = r;
  });
  return { work: () => p, finish };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('FairGate', () => {
  it('serves sources round robin: a newcomer is not stuck behind a flooding source', async () => {
    const gate = new FairGate({ maxInFlight: 1, maxWaiting: 100, maxWaitingPerSource: 100, targetWait_ms: 1e9 });
    const order: string[] = [];
    const first = pending();
    const running = gate.run('flood', first.work);
    const queued = [1, 2, 3, 4].map((i) => gate.run('flood', async () => void order.push(`flood-${i}`)));
    const other = gate.run('other', async () => void order.push('other'));
    expect(gate.stats()).toMatchObject({ inFlight: 1, waiting: 5 });
    first.finish('x');
    await Promise.all([running, ...queued, other]);
    expect(order).toEqual(['flood-1', 'other', 'flood-2', 'flood-3', 'flood-4']);
    expect(gate.stats()).toMatchObject({ inFlight: 0, waiting: 0 });
  });

  it('refuses with 429 SERVER_TOO_MANY_REQUESTS beyond the per-source and overall bounds', async () => {
    const gate = new FairGate({ maxInFlight: 1, maxWaiting: 3, maxWaitingPerSource: 2, targetWait_ms: 1e9 });
    const first = pending();
    const all = [gate.run('a', first.work), gate.run('a', async () => 1), gate.run('a', async () => 2)];
    const refused = await gate.run('a', async () => 3).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).code).toBe('SERVER_TOO_MANY_REQUESTS');
    expect((refused as ApiError).status).toBe(429);
    all.push(gate.run('b', async () => 4)); // another source still fits the overall bound…
    await expect(gate.run('c', async () => 5)).rejects.toMatchObject({ code: 'SERVER_TOO_MANY_REQUESTS' }); // …until it is full
    first.finish('done');
    expect(await Promise.all(all)).toEqual(['done', 1, 2, 4]);
  });

  it('adapts: the queue shrinks to what can be served within the target wait', async () => {
    const gate = new FairGate({ maxInFlight: 2, maxWaiting: 64, maxWaitingPerSource: 64, targetWait_ms: 1_000 });
    expect(gate.capacity()).toBe(40); // 1000 ms × 2 / 50 ms (the first estimate)
    for (let i = 0; i < 10; i++) await gate.run('a', () => new Promise((r) => setTimeout(r, 40)));
    const fast = gate.capacity();
    expect(fast).toBeGreaterThan(30);
    for (let i = 0; i < 10; i++) await gate.run('a', () => new Promise((r) => setTimeout(r, 200)));
    expect(gate.capacity()).toBeLessThan(12);
    expect(gate.capacity()).toBeGreaterThanOrEqual(1);
    await tick();
  });
});
