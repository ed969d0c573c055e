/**
 * A small seeded PRNG (xoshiro128**, seeded through splitmix32). Deterministic across platforms:
 * the same seed always yields the same sequence, which the simulator relies on to replay a failing seed.
 */
import type { Random } from './types.js';

const TWO_POW_32 = 4294967296;

function splitmix32(state: { x: number }): number {
  state.x = (state.x + 0x9e3779b9) | 0;
  let z = state.x;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

export class SeededRandom implements Random {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  constructor(seed: number) {
    if (!Number.isFinite(seed)) throw new Error(`random: seed must be a finite number, got ${seed}`);
    // Fold a possibly > 32-bit seed into the splitmix state.
    const state = { x: (seed | 0) ^ Math.floor(seed / TWO_POW_32) };
    this.s0 = splitmix32(state);
    this.s1 = splitmix32(state);
    this.s2 = splitmix32(state);
    this.s3 = splitmix32(state);
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  /** Uniform 32-bit unsigned integer. */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** Integer in [0, n). */
  int(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > TWO_POW_32)
      throw new Error(`random: int(n) needs 1 <= n <= 2^32, got ${n}`);
    return Math.floor((this.nextU32() / TWO_POW_32) * n);
  }

  /** Integer in [lo, hi] (inclusive). */
  range(lo: number, hi: number): number {
    if (hi < lo) throw new Error(`random: empty range [${lo}, ${hi}]`);
    return lo + this.int(hi - lo + 1);
  }

  /** Float in [0, 1). */
  float(): number {
    return this.nextU32() / TWO_POW_32;
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return p > 0 && this.float() < p;
  }

  /** A uniformly chosen element of a non-empty array. */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('random: pick from an empty array');
    return items[this.int(items.length)] as T;
  }

  /** An independent generator derived from this one (for a sub-component that must not perturb this stream). */
  fork(): SeededRandom {
    return new SeededRandom(this.nextU32() * 65536 + (this.nextU32() >>> 16));
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
