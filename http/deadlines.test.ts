import { describe, expect, it } from 'vitest';
import { Deadline, DeadlineQueue } from './deadlines.js';

class Entry extends Deadline {
  constructor(readonly name: string) {
    super();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits (at most 5 s: a loaded machine delays timers) until `cond` holds. */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await sleep(10);
}

describe('DeadlineQueue', () => {
  it('expires entries in the order they were added, each once, never before duration_ms after it was added', async () => {
    const added = new Map<string, number>();
    const expired: Array<{ name: string; after_ms: number }> = [];
    const q = new DeadlineQueue<Entry>(40, (e) => {
      expired.push({ name: e.name, after_ms: performance.now() - added.get(e.name)! });
    });
    const add = (name: string) => {
      const e = new Entry(name);
      added.set(name, performance.now());
      q.add(e);
      return e;
    };
    const a = add('a');
    await sleep(15);
    add('b');
    add('c');
    expect(q.size).toBe(3);
    await sleep(30);
    // (on a loaded machine the sleep may overrun b's deadline too)
    if (performance.now() - added.get('b')! < 39) expect(expired.map((x) => x.name)).toEqual(['a']);
    await until(() => expired.length >= 3);
    expect(expired.map((x) => x.name)).toEqual(['a', 'b', 'c']);
    for (const x of expired) expect(x.after_ms).toBeGreaterThanOrEqual(39);
    expect(q.size).toBe(0);
    expect(q.cancel(a)).toBe(false); // expired already
  });

  it('a cancelled entry never expires; the others keep their deadlines; an entry can be added again', async () => {
    const expired: string[] = [];
    const q = new DeadlineQueue<Entry>(20, (e) => expired.push(e.name));
    const entries = ['a', 'b', 'c', 'd'].map((n) => new Entry(n));
    for (const e of entries) q.add(e);
    expect(() => q.add(entries[0]!)).toThrow(/already queued/);
    // the head, one in the middle and the tail
    expect(q.cancel(entries[0]!)).toBe(true);
    expect(q.cancel(entries[2]!)).toBe(true);
    expect(q.cancel(entries[2]!)).toBe(false);
    expect(q.size).toBe(2);
    await until(() => expired.length >= 2);
    await sleep(30); // a cancelled entry that would expire would have by now
    expect(expired).toEqual(['b', 'd']);
    q.add(entries[0]!);
    await until(() => expired.length >= 3);
    expect(expired).toEqual(['b', 'd', 'a']);
  });

  it('an entry added by an expire callback is expired in its turn', async () => {
    const expired: string[] = [];
    const q: DeadlineQueue<Entry> = new DeadlineQueue<Entry>(15, (e) => {
      expired.push(e.name);
      if (e.name === 'first') q.add(new Entry('second'));
    });
    q.add(new Entry('first'));
    await until(() => expired.length >= 2);
    expect(expired).toEqual(['first', 'second']);
  });

  it('refuses a duration that is not positive', () => {
    expect(() => new DeadlineQueue<Entry>(0, () => {})).toThrow(RangeError);
    expect(() => new DeadlineQueue<Entry>(Number.NaN, () => {})).toThrow(RangeError);
  });
});
