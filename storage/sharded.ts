/**
 * A Map and a Set that stay responsive at hundreds of thousands of keys. V8 grows a full Map or Set by rehashing every
 * entry into a table twice the size, in one step: about 11 ms at 262 144 string keys and 22 ms at 524 288 on this
 * project's 2-core reference machine (`npm run bench -- apply` prints the longest single insert). A collection's
 * structures (rows by id, a unique index, an equality index holding every row, a role index's target map) all have the
 * same size, so they cross each power of two on the same write, and every cluster member applies that write at about
 * the same moment: one stall of every member, 50 ms and more, at each doubling.
 *
 * Both start as one native Map/Set and, once they hold SPLIT_AT keys, split into SHARDS of them by a hash of the key,
 * so that a later growth rehashes about 1/SHARDS of the keys. They never merge back.
 *
 * The shards' shares of the keys are unequal on purpose: shard i gets a share proportional to 2^(i/SHARDS), so the
 * largest is about twice the smallest and the shards' sizes are spread evenly over one doubling. Equal shares would
 * make every shard cross a power of two on about the same write (at SHARDS × 2^k keys: 524 288, 1 048 576, …): 64
 * rehashes of every structure of a collection in a burst, each moving its keys into a freshly allocated table, on
 * every member at once. Spread shares make one shard double every 1/SHARDS of a doubling instead, so the same work
 * (each key moves once per doubling either way) comes as a trickle (docs/benchmarks.md, "Shard doublings").
 *
 * Iteration visits the shards in turn: the order is the insertion order until the split and unspecified after it (no
 * caller may rely on it; the store's ordered reads come from SortedRows). An iteration must not outlive a change (as
 * no caller does: the store changes them only when it publishes, synchronously): one begun before the split keeps
 * walking the single map.
 */

/** Keys held before the split into shards (small maps stay one native map: no hashing, no extra objects). */
export const SPLIT_AT = 8192;
/** Shards after the split: at 10 million keys, one shard's rehash moves about 156 000 keys (a few milliseconds). */
export const SHARDS = 64;

/** Characters of a long string key the shard hash reads: its first HASH_HEAD and its last HASH_TAIL. */
const HASH_HEAD = 16;
const HASH_TAIL = 32;

/** Bits of a key's hash that pick its slot; each of the 2^SLOT_BITS slots belongs to one shard (SHARD_OF_SLOT). */
const SLOT_BITS = 12;

/**
 * Slot → shard, so that shard i holds a share 2^((i+1)/SHARDS) − 2^(i/SHARDS) of the slots (∝ 2^(i/SHARDS)): slot s
 * goes to floor(SHARDS × log2(1 + (s + ½) / 2^SLOT_BITS)). Every shard gets 45 to 88 of the 4 096 slots.
 */
const SHARD_OF_SLOT: Uint8Array = (() => {
  const slots = 1 << SLOT_BITS;
  const table = new Uint8Array(slots);
  for (let s = 0; s < slots; s++) table[s] = Math.floor(SHARDS * Math.log2(1 + (s + 0.5) / slots));
  return table;
})();

/** The share of the keys shard `i` is meant to hold (its slots ÷ all slots); for tests. */
export function shardShare(i: number): number {
  let n = 0;
  for (let s = 0; s < SHARD_OF_SLOT.length; s++) if (SHARD_OF_SLOT[s] === i) n++;
  return n / SHARD_OF_SLOT.length;
}

/**
 * The shard of a key: a hash of a string's characters (of a long one, the first HASH_HEAD and the last HASH_TAIL:
 * ids are random, names often share a prefix or a suffix) or of an integer, whose top SLOT_BITS bits pick a slot;
 * anything else shard 0. A poor spread costs only speed (at worst one shard holds everything, which is the native
 * map's behaviour).
 */
export function shardOf(key: unknown): number {
  let h: number;
  if (typeof key === 'string') {
    const n = key.length;
    h = n;
    const head = n <= HASH_HEAD + HASH_TAIL ? n : HASH_HEAD;
    for (let i = 0; i < head; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
    for (let i = Math.max(head, n - HASH_TAIL); i < n; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  } else if (typeof key === 'number' && Number.isInteger(key)) {
    h = key | 0;
  } else {
    return 0;
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return SHARD_OF_SLOT[(h ^ (h >>> 16)) >>> (32 - SLOT_BITS)]!;
}

/** What ShardedMap and ShardedSet share: one native collection, split into SHARDS of them at SPLIT_AT keys. */
abstract class Sharded<K, C extends Map<K, unknown> | Set<K>> {
  protected one: C | null = this.fresh();
  protected shards: C[] | null = null;
  protected count = 0;

  /** An empty native collection of the kind held. */
  protected abstract fresh(): C;
  /** Puts every key (and value) of `from` into its shard of `shards`. */
  protected abstract place(from: C, shards: C[]): void;

  get size(): number {
    return this.count;
  }

  has(key: K): boolean {
    return this.partOf(key).has(key);
  }

  delete(key: K): boolean {
    if (!this.partOf(key).delete(key)) return false;
    this.count--;
    return true;
  }

  clear(): void {
    this.one = this.fresh();
    this.shards = null;
    this.count = 0;
  }

  /** The native collection that holds `key`, or would. */
  protected partOf(key: K): C {
    return this.one ?? this.shards![shardOf(key)]!;
  }

  /** After an insert into `part`, whose size was `before`: counts a new key, and splits at SPLIT_AT. */
  protected counted(part: C, before: number): void {
    if (part.size === before) return;
    this.count++;
    if (this.one !== null && this.count >= SPLIT_AT) this.split();
  }

  /** The native collections holding the keys, to iterate one after the other. */
  protected parts(): readonly C[] {
    return this.one !== null ? [this.one] : this.shards!;
  }

  protected split(): void {
    const shards = Array.from({ length: SHARDS }, () => this.fresh());
    this.place(this.one!, shards);
    this.shards = shards;
    this.one = null;
  }
}

/** A Map<K, V> that splits into shards at SPLIT_AT keys (see the module's comment). */
export class ShardedMap<K, V> extends Sharded<K, Map<K, V>> implements ReadonlyMap<K, V> {
  protected fresh(): Map<K, V> {
    return new Map();
  }

  protected place(from: Map<K, V>, shards: Map<K, V>[]): void {
    for (const [k, v] of from) shards[shardOf(k)]!.set(k, v);
  }

  get(key: K): V | undefined {
    return this.partOf(key).get(key);
  }

  set(key: K, value: V): this {
    const m = this.partOf(key);
    const before = m.size;
    m.set(key, value);
    this.counted(m, before);
    return this;
  }

  forEach(visit: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    for (const m of this.parts()) for (const [k, v] of m) visit.call(thisArg, v, k, this);
  }

  *entries(): MapIterator<[K, V]> {
    for (const m of this.parts()) yield* m.entries();
  }

  *keys(): MapIterator<K> {
    for (const m of this.parts()) yield* m.keys();
  }

  *values(): MapIterator<V> {
    for (const m of this.parts()) yield* m.values();
  }

  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }
}

/** A Set<K> that splits into shards at SPLIT_AT keys (see the module's comment). */
export class ShardedSet<K> extends Sharded<K, Set<K>> implements ReadonlySet<K> {
  /** A ShardedSet of the keys of `set` (which it takes over: the caller drops it). */
  static of<K>(set: Set<K>): ShardedSet<K> {
    const s = new ShardedSet<K>();
    s.one = set;
    s.count = set.size;
    if (s.count >= SPLIT_AT) s.split();
    return s;
  }

  protected fresh(): Set<K> {
    return new Set();
  }

  protected place(from: Set<K>, shards: Set<K>[]): void {
    for (const k of from) shards[shardOf(k)]!.add(k);
  }

  add(key: K): this {
    const s = this.partOf(key);
    const before = s.size;
    s.add(key);
    this.counted(s, before);
    return this;
  }

  forEach(visit: (value: K, key: K, set: ReadonlySet<K>) => void, thisArg?: unknown): void {
    for (const s of this.parts()) for (const k of s) visit.call(thisArg, k, k, this);
  }

  *keys(): SetIterator<K> {
    for (const s of this.parts()) yield* s.keys();
  }

  values(): SetIterator<K> {
    return this.keys();
  }

  *entries(): SetIterator<[K, K]> {
    for (const k of this.keys()) yield [k, k];
  }

  [Symbol.iterator](): SetIterator<K> {
    return this.keys();
  }
}
