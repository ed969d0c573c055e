import { describe, expect, it } from 'vitest';
import { ApiError } from '../../http/errors.js';
import { ADMIN_SOURCE_TTL_MS, FairGate, isAdminSource, MAX_ADMIN_SOURCES, recordAdminLogin } from './rate-limit.js';

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
    // …and once it is full, a source with no place takes the newest of the source holding two more (a's second)
    const aSecond = all[2]!.then(
      () => null,
      (e: unknown) => e,
    );
    const c = gate.run('c', async () => 5);
    let cRefused: unknown = null;
    c.catch((e: unknown) => {
      cRefused = e;
    });
    await new Promise((r) => setImmediate(r));
    expect(cRefused).toBeNull();
    expect(await aSecond).toMatchObject({ code: 'SERVER_TOO_MANY_REQUESTS' });
    // one waiter each now: a fourth source is refused rather than taking one of theirs
    await expect(gate.run('d', async () => 6)).rejects.toMatchObject({ code: 'SERVER_TOO_MANY_REQUESTS' });
    first.finish('done');
    expect(await Promise.all([all[0], all[1], all[3], c])).toEqual(['done', 1, 4, 5]);
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

/** A check that runs until `done()` is called. */
function held(): { work: () => Promise<string>; done: () => void; started: Promise<void> } {
  let done!: () => void;
  let started!: () => void;
  const startedP = new Promise<void>((r) => (started = r));
  const finished = new Promise<void>((r) => (done = r));
  return {
    work: async () => {
      started();
      await finished;
      return 'ok';
    },
    done,
    started: startedP,
  };
}

describe('FairGate fairness when full', () => {
  it('gives a newcomer a place in a queue one source filled: that source gives up its newest waiter (429)', async () => {
    const gate = new FairGate({ maxInFlight: 1, maxWaiting: 4, maxWaitingPerSource: 4, targetWait_ms: 60_000 });
    const running = held();
    const first = gate.run('flooder', running.work);
    await running.started;
    const queued = [held(), held(), held(), held()];
    const waits = queued.map((h) => gate.run('flooder', h.work));
    const outcomes = waits.map((p) =>
      p.then(
        () => 'served',
        (e: unknown) => e,
      ),
    );
    expect(gate.stats().waiting).toBe(4);
    // the flooder's fifth is over its own bound
    await expect(gate.run('flooder', async () => 'x')).rejects.toBeInstanceOf(ApiError);

    const admin = held();
    const adminRun = gate.run('admin', admin.work);
    // settled at once either way (a refusal of the newcomer would otherwise leave this test waiting on the eviction)
    let adminRefused: unknown = null;
    adminRun.catch((e: unknown) => {
      adminRefused = e;
    });
    await new Promise((r) => setImmediate(r));
    expect(adminRefused).toBeNull();
    expect(gate.stats().waiting).toBe(4);
    const evicted = await outcomes[3];
    expect(evicted).toBeInstanceOf(ApiError);
    expect((evicted as ApiError).code).toBe('SERVER_TOO_MANY_REQUESTS');
    expect((evicted as ApiError).status).toBe(429);

    // round robin: after the running check, the flooder's oldest waiter, then the newcomer
    running.done();
    await first;
    await queued[0]!.started;
    queued[0]!.done();
    await admin.started;
    admin.done();
    await expect(adminRun).resolves.toBe('ok');
    for (const h of queued.slice(1, 3)) {
      await h.started;
      h.done();
    }
    expect(await Promise.all(outcomes.slice(0, 3))).toEqual(['served', 'served', 'served']);
    expect(gate.stats()).toMatchObject({ inFlight: 0, waiting: 0 });
  });
});

describe('the admin lane', () => {
  it('is kept by a source an admin logged in from, for a day, and forgets the oldest past its bound', () => {
    const now = 1_000_000;
    expect(isAdminSource('10.9.9.1', now)).toBe(false);
    recordAdminLogin('10.9.9.1', now);
    expect(isAdminSource('10.9.9.1', now + ADMIN_SOURCE_TTL_MS - 1)).toBe(true);
    expect(isAdminSource('10.9.9.1', now + ADMIN_SOURCE_TTL_MS)).toBe(false);

    recordAdminLogin('10.9.9.2', now);
    for (let i = 0; i < MAX_ADMIN_SOURCES; i++) recordAdminLogin(`10.8.${i >> 8}.${i & 255}`, now);
    expect(isAdminSource('10.9.9.2', now)).toBe(false);
    expect(isAdminSource(`10.8.${(MAX_ADMIN_SOURCES - 1) >> 8}.${(MAX_ADMIN_SOURCES - 1) & 255}`, now)).toBe(true);
  });
});
