/** A minimal typed listener list with a bound (guards against listener leaks). */
export class Listeners<A extends unknown[]> {
  private list: Array<(...args: A) => void> = [];

  constructor(private readonly max = 64) {}

  add(fn: (...args: A) => void): () => void {
    if (this.list.length >= this.max) throw new Error(`raft: more than ${this.max} listeners`);
    this.list.push(fn);
    return () => {
      this.list = this.list.filter((f) => f !== fn);
    };
  }

  /** Calls every listener; a throwing listener cannot break the caller (its error is rethrown asynchronously). */
  emit(...args: A): void {
    for (const fn of this.list) {
      try {
        fn(...args);
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }
}
