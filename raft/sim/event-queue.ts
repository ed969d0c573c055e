/** A binary min-heap of timed events; ties break by insertion order, so runs are deterministic. */

export interface Timed {
  time: number;
  seq: number;
}

export class EventQueue<T extends Timed> {
  private readonly heap: T[] = [];
  private nextSeq = 0;

  constructor(readonly maxEvents: number) {}

  get size(): number {
    return this.heap.length;
  }

  /** Schedules `ev` (its seq is assigned here). Throws when the bound is exceeded. */
  push(ev: T): void {
    if (this.heap.length >= this.maxEvents) throw new Error(`event queue overflow (${this.maxEvents} events)`);
    ev.seq = this.nextSeq++;
    const h = this.heap;
    h.push(ev);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!less(h[i] as T, h[parent] as T)) break;
      [h[i], h[parent]] = [h[parent] as T, h[i] as T];
      i = parent;
    }
  }

  pop(): T | undefined {
    const h = this.heap;
    if (h.length === 0) return undefined;
    const top = h[0] as T;
    const last = h.pop() as T;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && less(h[l] as T, h[m] as T)) m = l;
        if (r < h.length && less(h[r] as T, h[m] as T)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m] as T, h[i] as T];
        i = m;
      }
    }
    return top;
  }
}

function less(a: Timed, b: Timed): boolean {
  return a.time < b.time || (a.time === b.time && a.seq < b.seq);
}
