/**
 * What the profiling scripts share: taking an allocation profile in a preload (V8's sampling heap profiler, over
 * the inspector), and reading V8 profiles (frame labels, the allocation tree's walk, totals by key).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

/** Every allocation is sampled, including what the GC has since collected (major and minor). */
const SAMPLING = {
  samplingInterval: 1024,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
};

/**
 * V8's sampling heap profiler on this process, connected now: `start()` begins sampling, `stop()` ends it and
 * writes `<ALLOC_DIR or /tmp>/<pid>.heapprofile`.
 */
export function allocationSampler() {
  const dir = process.env.ALLOC_DIR ?? '/tmp';
  const session = new Session();
  session.connect();
  return {
    start() {
      session.post('HeapProfiler.startSampling', SAMPLING, () => {});
    },
    stop() {
      session.post('HeapProfiler.stopSampling', (err, r) => {
        if (!err) writeFileSync(`${dir}/${process.pid}.heapprofile`, JSON.stringify(r.profile));
      });
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
