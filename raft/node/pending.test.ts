import { describe, expect, it } from 'vitest';
import { CatchUpWaiters, type LeaderView, type MemberProgress } from './catch-up.js';
import { RaftError } from './errors.js';
import { PendingProposals } from './proposals.js';
import { ReadBarrier } from './reads.js';

const settle = <T>(p: Promise<T>): Promise<{ ok: T } | { err: RaftError }> =>
  p.then(
    (ok) => ({ ok }),
    (err: RaftError) => ({ err }),
  );

describe('PendingProposals', () => {
  it('resolves matching terms, rejects overwritten, skipped and uncommitted proposals', async () => {
    const p = new PendingProposals(10);
    const a = settle(p.add(1, 1));
    const b = settle(p.add(2, 1));
    const c = settle(p.add(3, 1));
    const d = settle(p.add(4, 1));
    const e = settle(p.add(5, 1));
    p.applied(1, 2, (i) => (i === 1 ? 1 : 2)); // entry 2 was replaced by a term-2 entry
    expect(await a).toEqual({ ok: { index: 1, term: 1 } });
    expect(((await b) as { err: RaftError }).err.code).toBe('overwritten');
    p.skippedThrough(3);
    expect(((await c) as { err: RaftError }).err.code).toBe('leadership-lost');
    p.rejectAbove(4, new RaftError('leadership-lost', 'x'));
    expect(((await e) as { err: RaftError }).err.code).toBe('leadership-lost');
    expect(p.size).toBe(1);
    p.rejectAll(new RaftError('stopped', 'bye'));
    expect(((await d) as { err: RaftError }).err.code).toBe('stopped');
    expect(p.size).toBe(0);
  });

  it('is bounded', () => {
    const p = new PendingProposals(2);
    void p.add(1, 1).catch(() => undefined);
    expect(p.isFull()).toBe(false);
    void p.add(2, 1).catch(() => undefined);
    expect(p.isFull()).toBe(true);
  });
});

describe('ReadBarrier', () => {
  it('batches callers into one request and releases them once applied', async () => {
    const sent: string[] = [];
    const r = new ReadBarrier(10, (ctx) => sent.push(new TextDecoder().decode(ctx)) > 0);
    const first = r.wait(0);
    const second = r.wait(0);
    r.pump();
    const third = r.wait(0); // arrives after the request went out: needs the next one
    r.pump();
    expect(sent).toEqual(['r1']);
    r.answered(new TextEncoder().encode('r1'), 7);
    r.applied(6);
    r.pump();
    expect(sent).toEqual(['r1', 'r2']);
    r.applied(7);
    expect(await first).toBe(7);
    expect(await second).toBe(7);
    r.answered(new TextEncoder().encode('r2'), 9);
    r.applied(9);
    expect(await third).toBe(9);
    expect(r.size).toBe(0);
  });

  it('retries when no leader is known, re-issues after a leader change, and times out', async () => {
    let fail = true;
    const sent: string[] = [];
    const r = new ReadBarrier(2, (ctx) => {
      if (fail) return false; // no leader known
      sent.push(new TextDecoder().decode(ctx));
      return true;
    });
    const w = settle(r.wait(0));
    r.pump();
    expect(sent).toEqual([]);
    fail = false;
    r.pump();
    expect(sent).toEqual(['r2']);
    r.requeueUnanswered();
    r.pump();
    expect(sent).toEqual(['r2', 'r3']);
    const late = settle(r.wait(50));
    await expect(r.wait(50)).rejects.toMatchObject({ code: 'too-many-pending' });
    r.expire(100, 100); // the first caller is 100 ms old, the late one 50 ms
    expect(((await w) as { err: RaftError }).err.code).toBe('timeout');
    r.pump();
    r.answered(new TextEncoder().encode(sent[sent.length - 1]!), 3);
    r.applied(3);
    expect(await late).toEqual({ ok: 3 });
  });

  it('lets a real failure of the request propagate and keeps the callers queued', async () => {
    let broken = true;
    const r = new ReadBarrier(4, () => {
      if (broken) throw new Error('core invariant');
      return true;
    });
    const w = settle(r.wait(0));
    expect(() => r.pump()).toThrow('core invariant');
    expect(r.size).toBe(1);
    broken = false;
    r.pump();
    r.answered(new TextEncoder().encode('r2'), 1);
    r.applied(1);
    expect(await w).toEqual({ ok: 1 });
  });
});

describe('CatchUpWaiters', () => {
  const leading = (lastIndex: number, progress: Record<string, MemberProgress>): LeaderView => ({
    leading: true,
    lastIndex,
    progress: (id) => progress[id] ?? null,
  });

  it('resolves once the learner replicates within the allowed lag, and times out otherwise', async () => {
    const w = new CatchUpWaiters(4, 10);
    const caughtUp = settle(w.wait('d', 0, 1000));
    const late = settle(w.wait('e', 0, 100));
    w.check(50, leading(100, { d: { match: 0, state: 'probe' }, e: { match: 95, state: 'probe' } }));
    w.check(60, leading(100, { d: { match: 89, state: 'replicate' }, e: { match: 95, state: 'snapshot' } }));
    expect(w.size).toBe(2); // d lags 11 > 10; e is close but not replicating
    w.check(100, leading(100, { d: { match: 90, state: 'replicate' }, e: { match: 95, state: 'probe' } }));
    expect(await caughtUp).toEqual({ ok: undefined });
    expect(((await late) as { err: RaftError }).err.code).toBe('not-caught-up');
    expect(w.size).toBe(0);
  });

  it('rejects when leadership is lost, the learner is removed, the bound is reached or the node stops', async () => {
    const w = new CatchUpWaiters(2, 10);
    const a = settle(w.wait('d', 0, 1000));
    const b = settle(w.wait('x', 0, 1000));
    await expect(w.wait('y', 0, 1000)).rejects.toMatchObject({ code: 'too-many-pending' });
    w.check(1, leading(5, { d: { match: 0, state: 'probe' } }));
    expect(((await b) as { err: RaftError }).err.code).toBe('not-caught-up'); // x is no member
    w.check(2, { leading: false, leader: 'b' });
    const lost = (await a) as { err: RaftError };
    expect(lost.err.code).toBe('not-leader');
    expect(lost.err.leader).toBe('b');
    const c = settle(w.wait('d', 0, 1000));
    w.rejectAll(new RaftError('stopped', 'bye'));
    expect(((await c) as { err: RaftError }).err.code).toBe('stopped');
  });
});
