/**
 * What the profiling scripts and the apply benchmark (bench/apply.ts, which loads this file from dist/bench at run
 * time; its types are profiles.d.mts) share: V8's sampling heap profiler over the inspector, and reading V8 profiles
 * (frame labels, the allocation tree's walk, totals by key).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

/** The preloads' sampling interval: on average one sample per this many bytes allocated. */
const PRELOAD_SAMPLING_INTERVAL_BYTES = 1024;

/**
 * V8's sampling heap profiler on this process, over an inspector session connected now. Every allocation is
 * sampled, including what the GC has since collected (major and minor), on average one sample per
 * `samplingInterval_bytes`. `start()` begins sampling, `stop()` ends it and resolves to the profile (`{ head }`);
 * they may alternate any number of times. `close()` disconnects the session.
 */
export function heapSampler(samplingInterval_bytes) {
  const session = new Session();
  session.connect();
  const post = (method, params) =>
    new Promise((resolve, reject) => session.post(method, params, (err, r) => (err ? reject(err) : resolve(r))));
  return {
    start: () =>
      post('HeapProfiler.startSampling', {
        samplingInterval: samplingInterval_bytes,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      }).then(() => undefined),
    stop: () => post('HeapProfiler.stopSampling').then((r) => r.profile),
    close: () => session.disconnect(),
  };
}

/**
 * The preloads' sampler (`heapSampler` at PRELOAD_SAMPLING_INTERVAL_BYTES), connected now: `start()` begins
 * sampling, `stop()` ends it and writes `<ALLOC_DIR or /tmp>/<pid>.heapprofile`. Failures are ignored (the
 * profiled process goes on).
 */
export function allocationSampler() {
  const dir = process.env.ALLOC_DIR ?? '/tmp';
  const sampler = heapSampler(PRELOAD_SAMPLING_INTERVAL_BYTES);
  return {
    start() {
      sampler.start().catch(() => {});
    },
    stop() {
      sampler.stop().then(
        (profile) => writeFileSync(`${dir}/${process.pid}.heapprofile`, JSON.stringify(profile)),
        () => {},
      );
    },
  };
}

export function readProfile(file) {
  return JSON.parse(readFileSync(file, 'utf8'));
}

/** A script's URL without the path up to node_modules (`nm:`) or dist/. */
export const short = (url) => url.replace(/^.*\/node_modules\//, 'nm:').replace(/^.*\/dist\//, '');

/** A call frame as `function file:line`. */
export const label = (cf) => `${cf.functionName || '(anon)'} ${short(cf.url)}:${cf.lineNumber}`;

/** Adds `v` to `key`'s total in `map`. */
export const add = (map, key, v) => map.set(key, (map.get(key) ?? 0) + v);

/** The `n` largest totals of `map`, largest first, as [key, total]. */
export const largest = (map, n) => [...map].sort((a, b) => b[1] - a[1]).slice(0, n);

/**
 * Walks an allocation profile's tree (`profile.head`) depth first, parents before children: `visit(node, state)`
 * returns the state the node's children get (`state` is the root's). Returns the bytes sampled in all (the sum of
 * every node's `selfSize`). Recursive: the depth is the deepest sampled stack's.
 */
export function walkAllocations(head, state, visit) {
  let total = 0;
  const walk = (node, s) => {
    total += node.selfSize;
    const next = visit(node, s);
    for (const child of node.children) walk(child, next);
  };
  walk(head, state);
  return total;
}

/** The bytes an allocation profile sampled in all (`walkAllocations` of its tree, visiting nothing). */
export const sampledBytes = (profile) => walkAllocations(profile.head, undefined, () => undefined);
