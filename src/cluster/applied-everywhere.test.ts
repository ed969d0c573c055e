import { describe, expect, it } from 'vitest';
import { AppliedEverywhere } from './applied-everywhere.js';

/** A round source whose rounds end when the test says; `started` counts the rounds begun. */
function rounds() {
  const ends: Array<(unconfirmed: string[]) => void> = [];
  const source = {
    started: 0,
    round: () => {
      source.started++;
      return new Promise<string[]>((r) => ends.push(r));
    },
    end: (i: number, unconfirmed: string[] = []) => ends[i]!(unconfirmed),
  };
  return source;
}

const turn = () => new Promise((r) => setImmediate(r));

describe('AppliedEverywhere', () => {
  it('a caller waits for a round that starts after its call, never for one already running', async () => {
    const src = rounds();
    const ae = new AppliedEverywhere(src.round);
    const first = ae.confirm();
    await turn();
    expect(src.started).toBe(1);
    let secondDone = false;
    const second = ae.confirm().then((u) => {
      secondDone = true;
      return u;
    });
    await turn();
    // the running round may have started before the second caller's write was applied: not enough for it
    expect(src.started).toBe(1);
    src.end(0, ['n3']);
    expect(await first).toEqual(['n3']);
    await turn();
    expect(secondDone).toBe(false);
    expect(src.started).toBe(2);
    src.end(1);
    expect(await second).toEqual([]);
  });

  it('callers arriving while a round runs share the next one: at most two rounds in flight', async () => {
    const src = rounds();
    const ae = new AppliedEverywhere(src.round);
    const first = ae.confirm();
    await turn();
    const waiting = Array.from({ length: 100 }, () => ae.confirm());
    await turn();
    expect(src.started).toBe(1);
    src.end(0);
    await first;
    await turn();
    expect(src.started).toBe(2);
    src.end(1, ['n2']);
    expect(await Promise.all(waiting)).toEqual(waiting.map(() => ['n2']));
    expect(src.started).toBe(2);
  });

  it('a round that fails does not stop the next one', async () => {
    let n = 0;
    const ae = new AppliedEverywhere(async () => {
      n++;
      if (n === 1) throw new Error('boom');
      return [];
    });
    const first = ae.confirm();
    const second = ae.confirm();
    await expect(first).rejects.toThrow('boom');
    // the second call shared the first's queued round
    await expect(second).rejects.toThrow('boom');
    expect(await ae.confirm()).toEqual([]);
    expect(n).toBe(2);
  });
});
