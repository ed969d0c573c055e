/**
 * `npm run bench -- apply [--quick] [--creates N] [--group G] [--rounds R]`: the CPU one replicated write costs a
 * cluster member in its apply path, on the real schema and store. N identity creates, each the command
 * `POST /identities` proposes (`{"name":…,"type":"User","isAdmin":false}`), are encoded as Raft log entries the way
 * the proposer logs them, then handed to the Raft state machine (`StoreStateMachine.apply`: decode, apply through
 * `Store.applyGroupBehind`, publish) G entries at a time, as Raft hands committed entries over; the write-behind
 * store's flush (one synced LevelDB batch) runs every 100 ms of work, as in a member. Printed per create: the
 * process's CPU time (user + system, every thread: LevelDB's writes included), and the main thread's wall time in
 * apply and in flush. R rounds on fresh stores; the best and the median round. Then one more round, not timed,
 * for memory: the bytes allocated on the V8 heap per create (V8's sampling heap profiler, in process, counting the
 * objects already collected too, over the same applies and flushes), and the heap each stored row keeps (heap used
 * after a full GC, with every create applied and flushed, less the same before the first create, per create).
 * `--alloc-profile FILE` writes that allocation profile (`node scripts/prof/summarize.mjs FILE N`). Profile CPU with
 * `node --cpu-prof dist/bench/run.js apply`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Entry } from '../raft/index.js';
import { encodeLoggedBytes } from '../src/cluster/codec.js';
import { StoreStateMachine } from '../src/cluster/state-machine.js';
import { DEFAULT_AUTH_POLICY } from '../src/model/auth-policy.js';
import { buildSchema } from '../src/model/index.js';
import type { Command } from '../src/model/rows.js';
import { shortId } from '../src/util/ids.js';
import { encodeCommand } from '../storage/command-codec.js';
import { SHARDS, ShardedMap, ShardedSet } from '../storage/sharded.js';
import { Store, WRITE_BEHIND_INTERVAL_MS } from '../storage/store.js';
import { benchOptions } from './options.js';

const args = process.argv.slice(2);
const { quick, opt } = benchOptions(args);
const profileAt = args.indexOf('--alloc-profile');
const PROFILE_FILE = profileAt >= 0 ? args[profileAt + 1] : undefined;
const N = opt('--creates', quick ? 20_000 : 100_000);
const G = opt('--group', 64);
const ROUNDS = opt('--rounds', quick ? 3 : 5);
const AT = '2026-11-26T00:00:00.000Z';

interface Round {
  /** Wall time of `snapshotView()` over the store, and of the former generator-and-lookup read. */
  captureMs?: number;
  formerCaptureMs?: number;
  cpuUs: number;
  applyUs: number;
  flushUs: number;
}

interface Memory {
  /** Bytes allocated on the V8 heap per create (collected objects included). */
  allocatedBytes: number;
  /** Heap used after a full GC per stored create. */
  retainedBytes: number;
}

/** A full garbage collection (the flag set at run time, so the benchmark needs no `--expose-gc`). */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Heap used after a full collection (twice: the first may leave garbage that finalizers release). */
function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/**
 * The heap sampler the profiling scripts use (scripts/prof/profiles.mjs, plain JavaScript outside the compiled
 * sources: loaded at run time from dist/bench, where the benchmark runs).
 */
const profiles: typeof import('../scripts/prof/profiles.mjs') = await import(
  new URL('../../scripts/prof/profiles.mjs', import.meta.url).href
);
/** On average one sample per this many bytes allocated. */
const SAMPLING_INTERVAL_BYTES = 512;

/** The log entries of `n` identity creates (from index `first`), as the Raft proposer logs them. */
function entries(first: number, n: number): Entry[] {
  const out: Entry[] = [];
  for (let i = 0; i < n; i++) {
    const cmd: Command = {
      op: 'create',
      entity: 'identities',
      // made as the API makes them: a time part, then random characters (src/util/ids.ts)
      id: shortId(),
      data: {
        name: `k0064-07-${String(i).padStart(9, '0')}`,
        isAdmin: false,
        authPolicyId: 'default',
        typeId: 'Default',
        isDefaultAdmin: false,
        roleAttributes: [],
      },
      at: AT,
    };
    const encoded = encodeCommand(cmd);
    if (!encoded.ok) throw new Error('bench command does not encode');
    out.push({ index: first + i, term: 1, type: 'normal', data: encodeLoggedBytes(`r${i}`, encoded.bytes) } as Entry);
  }
  return out;
}

/**
 * Bytes allocated (collected objects included) while `work` runs, sampled by V8's heap profiler; the profile is
 * written to PROFILE_FILE when given, and not kept (so that it is not counted as heap the rows keep).
 */
async function allocatedBytes(work: () => Promise<void>): Promise<number> {
  const sampler = profiles.heapSampler(SAMPLING_INTERVAL_BYTES);
  try {
    await sampler.start();
    await work();
    const profile = await sampler.stop();
    if (PROFILE_FILE) writeFileSync(PROFILE_FILE, JSON.stringify(profile));
    return profiles.sampledBytes(profile);
  } finally {
    sampler.close();
  }
}

async function round(): Promise<Round>;
async function round(memory: true): Promise<Memory>;
async function round(memory = false): Promise<Round | Memory> {
  const dir = mkdtempSync(join(tmpdir(), 'keel-bench-apply-'));
  try {
    const store = await Store.open(dir, buildSchema());
    const sm = new StoreStateMachine(store);
    const seed: Command[] = [
      { op: 'create', entity: 'identity-types', id: 'Default', data: { name: 'Default' }, at: AT },
      { op: 'create', entity: 'auth-policies', id: 'default', data: structuredClone(DEFAULT_AUTH_POLICY), at: AT },
    ];
    const results = await store.applyGroupBehind(seed, 1);
    if (!results.every((r) => r.ok)) throw new Error(`seed failed: ${JSON.stringify(results)}`);
    await store.flush();
    const log = entries(2, N);
    let applyNs = 0n;
    let flushNs = 0n;
    let sinceFlushNs = 0n;
    const run = async () => {
      for (let at = 0; at < log.length; at += G) {
        const t0 = process.hrtime.bigint();
        await sm.apply(log.slice(at, at + G));
        const dt = process.hrtime.bigint() - t0;
        applyNs += dt;
        sinceFlushNs += dt;
        if (sinceFlushNs >= BigInt(WRITE_BEHIND_INTERVAL_MS) * 1_000_000n) {
          const t1 = process.hrtime.bigint();
          await store.flush();
          flushNs += process.hrtime.bigint() - t1;
          sinceFlushNs = 0n;
        }
      }
      const t1 = process.hrtime.bigint();
      await store.flush();
      flushNs += process.hrtime.bigint() - t1;
    };
    if (memory) {
      const heap0 = heapAfterGc();
      const allocated = await allocatedBytes(run);
      const retained = heapAfterGc() - heap0;
      // the entries stay referenced until after the second measure: only the rows and their indexes differ
      if (store.collection('identities').size !== N || log.length !== N)
        throw new Error('not every create was applied');
      await store.close();
      return { allocatedBytes: allocated / N, retainedBytes: retained / N };
    }
    const cpu0 = process.cpuUsage();
    await run();
    const cpu = process.cpuUsage(cpu0);
    if (store.collection('identities').size !== N) throw new Error('not every create was applied');
    // A snapshot's capture of every row (synchronous: every request on the member waits for it), beside the way
    // it was read before: a generator over the ids with a lookup of each row by id.
    const identities = store.collection('identities');
    function* byLookup() {
      for (const row of identities.scan()) yield identities.get(row.id)!;
    }
    const t2 = performance.now();
    const view = store.snapshotView();
    const captureMs = performance.now() - t2;
    const t3 = performance.now();
    const former = [...byLookup()];
    const formerCaptureMs = performance.now() - t3;
    const captured = view.entities.find(([e]) => e === 'identities')?.[1];
    if (captured?.length !== N || former.length !== N || captured.some((row, i) => row !== former[i]))
      throw new Error('the capture does not hold every row in order');
    await store.close();
    return {
      captureMs,
      formerCaptureMs,
      cpuUs: (cpu.user + cpu.system) / N,
      applyUs: Number(applyNs) / 1e3 / N,
      flushUs: Number(flushNs) / 1e3 / N,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const rounds: Round[] = [];
for (let r = 0; r < ROUNDS; r++) rounds.push(await round());
const fmt = (x: Round) =>
  `CPU ${x.cpuUs.toFixed(1)} µs/create (apply ${x.applyUs.toFixed(1)} + flush ${x.flushUs.toFixed(1)} µs wall)`;
const byCpu = [...rounds].sort((a, b) => a.cpuUs - b.cpuUs);
console.log(`apply: ${N} identity creates per round, ${G} entries per apply call, ${ROUNDS} rounds`);
for (const [i, x] of rounds.entries()) console.log(`  round ${i + 1}: ${fmt(x)}`);
console.log(`  best:   ${fmt(byCpu[0]!)}`);
console.log(`  median: ${fmt(byCpu[Math.floor(byCpu.length / 2)]!)}`);
const med = (f: (x: Round) => number) => rounds.map(f).sort((a, b) => a - b)[Math.floor(rounds.length / 2)]!;
const captureMs = med((x) => x.captureMs!);
const formerMs = med((x) => x.formerCaptureMs!);
console.log(
  `  snapshot capture of ${N} rows (median): ${captureMs.toFixed(1)} ms; baseline, a generator with a lookup per ` +
    `id: ${formerMs.toFixed(1)} ms (${(captureMs / formerMs).toFixed(2)}×)`,
);
const mem = await round(true);
console.log(
  `  memory: ${mem.allocatedBytes.toFixed(0)} B allocated per create (V8 heap, sampled), ` +
    `${mem.retainedBytes.toFixed(0)} B heap kept per stored row (after GC)`,
);

/**
 * The growth stall: the longest single insert while K ids (the API's shape) go into each structure a collection keeps
 * per id, native against sharded (storage/sharded.ts), in the same run. A native Map or Set rehashes every key at
 * once when it doubles; a collection's maps and sets all double on the same write. A garbage collection can land in
 * any insert, so each is filled three times from a collected heap and the smallest of the three longest is printed.
 */
function longestInsert_ms(fill: () => (id: string) => void, ids: readonly string[]): number {
  let least = Number.POSITIVE_INFINITY;
  for (let attempt = 0; attempt < 3; attempt++) {
    gc();
    const insert = fill();
    let worst = 0;
    for (let i = 0; i < ids.length; i++) {
      const t0 = performance.now();
      insert(ids[i]!);
      const took = performance.now() - t0;
      if (took > worst) worst = took;
    }
    least = Math.min(least, worst);
  }
  return least;
}
const GROWTH_KEYS = quick ? (1 << 18) + 1 : (1 << 19) + 1;
const growthIds = Array.from({ length: GROWTH_KEYS }, () => shortId());
const growth = [
  [
    'Map',
    longestInsert_ms(() => {
      const m = new Map<string, number>();
      return (id) => m.set(id, 1);
    }, growthIds),
    longestInsert_ms(() => {
      const m = new ShardedMap<string, number>();
      return (id) => m.set(id, 1);
    }, growthIds),
  ],
  [
    'Set',
    longestInsert_ms(() => {
      const m = new Set<string>();
      return (id) => m.add(id);
    }, growthIds),
    longestInsert_ms(() => {
      const m = new ShardedSet<string>();
      return (id) => m.add(id);
    }, growthIds),
  ],
] as const;
for (const [kind, native, sharded] of growth) {
  console.log(
    `  longest single insert into ${GROWTH_KEYS} ids (least of 3 fills): Sharded${kind} ${sharded.toFixed(2)} ms; ` +
      `baseline, native ${kind} ${native.toFixed(2)} ms (${(sharded / native).toFixed(2)}×)`,
  );
}

/**
 * The doubling burst: a native Map's table doubles at each power of two, and a sharded map's shards double when their
 * own sizes do. With equal shares (the baseline: the shard layout before storage/sharded.ts spread them), all 64
 * shards cross a power of two within a few hundred inserts of SHARDS × 2^k keys, a burst of rehashes on the same
 * writes; with the shares spread over one doubling, one shard doubles at a time. Printed: the busiest window of
 * BURST_WINDOW inserts ÷ the median window while 1.25 × 2^19 ids go in (2^18 with --quick; least of 3 fills: a GC lands
 * anywhere).
 */
const BURST_WINDOW = 16_384;
function burstRatio(fill: () => (id: string) => void, ids: readonly string[]): number {
  let least = Number.POSITIVE_INFINITY;
  for (let attempt = 0; attempt < 3; attempt++) {
    gc();
    const insert = fill();
    const windows: number[] = [];
    let t0 = performance.now();
    for (let i = 0; i < ids.length; i++) {
      insert(ids[i]!);
      if ((i + 1) % BURST_WINDOW === 0) {
        const now = performance.now();
        windows.push(now - t0);
        t0 = now;
      }
    }
    const sorted = [...windows].sort((a, b) => a - b);
    least = Math.min(least, sorted[sorted.length - 1]! / sorted[sorted.length >> 1]!);
  }
  return least;
}
/** A 32-bit FNV-1a of a string: the baseline's equal shares. */
function fnv(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
const burstIds = Array.from({ length: (quick ? 1 << 18 : 1 << 19) * 1.25 }, () => shortId());
const spread = burstRatio(() => {
  const m = new ShardedMap<string, number>();
  return (id) => m.set(id, 1);
}, burstIds);
const equal = burstRatio(() => {
  const shards = Array.from({ length: SHARDS }, () => new Map<string, number>());
  return (id) => shards[fnv(id) % SHARDS]!.set(id, 1);
}, burstIds);
console.log(
  `  doubling burst over ${burstIds.length} ids (busiest ${BURST_WINDOW}-insert window ÷ median, least of 3): ` +
    `ShardedMap ${spread.toFixed(2)}×; baseline, equal shares ${equal.toFixed(2)}× (${(spread / equal).toFixed(2)}×)`,
);
