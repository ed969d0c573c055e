/**
 * Preload (`KEEL_NODE_FLAGS=--import=<abs path>`): like alloc-sampling.mjs, but the window is set from outside: the
 * first SIGUSR2 starts sampling every allocation (including what the GC has already collected), the next one
 * writes `<ALLOC_DIR or /tmp>/<pid>.heapprofile`. scripts/prof/alloc-level.mjs sends them around one load level, so
 * the profile holds exactly the writes wrk counted.
 */
import { allocationSampler } from './profiles.mjs';

const sampler = allocationSampler();
let sampling = false;
process.on('SIGUSR2', () => {
  sampling = !sampling;
  if (sampling) sampler.start();
  else sampler.stop();
});
