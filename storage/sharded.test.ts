import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { rng } from '../test/support/rng.js';
import { SHARDS, ShardedMap, ShardedSet, SPLIT_AT, shardOf, shardShare } from './sharded.js';

/** An id of the API's shape: 9 random bytes, URL-safe base64. */
const shortId = () => randomBytes(9).toString('base64url');

describe('ShardedMap and ShardedSet', () => {
  it('behave as a native Map and Set through the split, under random sets, deletes and clears', () => {
    const rand = rng(7);
    const keySpace = 3 * SPLIT_AT;
    const key = () => {
      const k = Math.floor(rand() * keySpace);
      return k % 5 === 0 ? k : `k${k}`; // strings and integers, as index values may be
    };
    const map = new ShardedMap<string | number, number>();
    const wantMap = new Map<string | number, number>();
    const set = new ShardedSet<string | number>();
    const wantSet = new Set<string | number>();
    for (let i = 0; i < 60_000; i++) {
      const k = key();
      const op = rand();
      if (op < 0.7) {
        map.set(k, i);
        wantMap.set(k, i);
        set.add(k);
        wantSet.add(k);
      } else {
        expect(map.delete(k)).toBe(wantMap.delete(k));
        expect(set.delete(k)).toBe(wantSet.delete(k));
      }
      if (i === 45_000) {
        // a clear starts over as one native map; the set's caller drops it instead
        map.clear();
        wantMap.clear();
      }
      expect(map.size).toBe(wantMap.size);
      expect(set.size).toBe(wantSet.size);
      const probe = key();
      expect(map.get(probe)).toBe(wantMap.get(probe));
      expect(map.has(probe)).toBe(wantMap.has(probe));
      expect(set.has(probe)).toBe(wantSet.has(probe));
    }
    expect(wantSet.size).toBeGreaterThan(SPLIT_AT); // the set did split
    expect(new Map(map)).toEqual(wantMap);
    expect(new Map(map.entries())).toEqual(wantMap);
    expect(new Set(map.keys())).toEqual(new Set(wantMap.keys()));
    expect([...map.values()].sort()).toEqual([...wantMap.values()].sort());
    const visited = new Map<string | number, number>();
    map.forEach(function (this: Map<string | number, number>, v, k, m) {
      expect(m).toBe(map);
      this.set(k, v);
    }, visited);
    expect(visited).toEqual(wantMap);
    expect(new Set(set)).toEqual(wantSet);
    expect(new Set(set.values())).toEqual(wantSet);
    expect([...set.entries()].every(([a, b]) => a === b && wantSet.has(a))).toBe(true);
    const seen: (string | number)[] = [];
    set.forEach(function (this: (string | number)[], v) {
      this.push(v);
    }, seen);
    expect(new Set(seen)).toEqual(wantSet);
    expect(seen.length).toBe(wantSet.size);
  });

  it('ShardedSet.of takes over a native set, split or not', () => {
    const small = ShardedSet.of(new Set(['a', 'b']));
    expect(small.size).toBe(2);
    expect(small.has('a') && small.has('b') && !small.has('c')).toBe(true);
    const ids = Array.from({ length: SPLIT_AT + 10 }, (_, i) => `id${i}`);
    const big = ShardedSet.of(new Set(ids));
    expect(big.size).toBe(ids.length);
    expect(ids.every((id) => big.has(id))).toBe(true);
    big.add('id0'); // already held: the size stays
    expect(big.size).toBe(ids.length);
    expect(new Set(big)).toEqual(new Set(ids));
  });

  it('gives each shard its share of the API’s ids, of names sharing a prefix or a suffix, and of integers', () => {
    // the worst shard's count against the count its share stands for, both ways (1 is exact)
    const skew = (keys: unknown[]) => {
      const counts = new Array<number>(SHARDS).fill(0);
      for (const k of keys) counts[shardOf(k)]!++;
      const r = counts.map((c, i) => c / (shardShare(i) * keys.length));
      return Math.max(...r.map((x) => Math.max(x, 1 / x)));
    };
    const n = 64 * SHARDS * 10;
    expect(skew(Array.from({ length: n }, () => shortId()))).toBeLessThan(1.25);
    expect(skew(Array.from({ length: n }, (_, i) => `bench-0016-${String(i).padStart(9, '0')}`))).toBeLessThan(1.25);
    expect(skew(Array.from({ length: n }, (_, i) => `user${i}@example.com`))).toBeLessThan(1.25);
    expect(skew(Array.from({ length: n }, (_, i) => i))).toBeLessThan(1.25);
    for (const k of ['', 'a', 'ab', 'abc', 'abcd', 'abcde', 0, 63, 64, -1, 2 ** 31, 1.5, true, null, {}]) {
      expect(shardOf(k)).toBeGreaterThanOrEqual(0);
      expect(shardOf(k)).toBeLessThan(SHARDS);
    }
  });

  it('spreads the shards’ shares over one doubling, so that they do not all double on the same write', () => {
    const shares = Array.from({ length: SHARDS }, (_, i) => shardShare(i));
    expect(shares.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
    // shard i's share is 2^((i+1)/SHARDS) − 2^(i/SHARDS), to within one of the 4 096 slots
    for (let i = 0; i < SHARDS; i++)
      expect(Math.abs(shares[i]! - (2 ** ((i + 1) / SHARDS) - 2 ** (i / SHARDS)))).toBeLessThanOrEqual(1 / 4096);
    expect(shares[SHARDS - 1]! / shares[0]!).toBeGreaterThan(1.9);
    expect(shares[SHARDS - 1]! / shares[0]!).toBeLessThanOrEqual(2);

    // Insert ids one by one and note when each shard reaches 2 048 keys (a native map's table doubles there). With
    // equal shares all 64 would reach it within a few hundred inserts of 131 072; here they are spread over the octave.
    const AT = 2048;
    const sizes = new Array<number>(SHARDS).fill(0);
    const reached: number[] = [];
    for (let i = 0; reached.length < SHARDS && i < 4 * AT * SHARDS; i++) {
      const s = shardOf(shortId());
      sizes[s] = sizes[s]! + 1;
      if (sizes[s] === AT) reached.push(i);
    }
    expect(reached).toHaveLength(SHARDS);
    const first = reached[0]!;
    const last = reached[SHARDS - 1]!;
    expect(last / first).toBeGreaterThan(1.7);
    // no stretch of 1/16 of the spread holds more than a quarter of the doublings
    const width = (last - first) / 16;
    for (const start of reached) {
      const inWindow = reached.filter((r) => r >= start && r < start + width).length;
      expect(inWindow).toBeLessThanOrEqual(SHARDS / 4);
    }
  });
});
