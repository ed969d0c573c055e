/**
 * Preload (`node --import=./scripts/prof/alloc-sampling.mjs …`, or for the benchmark's nodes
 * `KEEL_NODE_FLAGS=--import=<abs path>`): samples every allocation, including objects the GC has since collected,
 * from ALLOC_START_MS to ALLOC_STOP_MS after start (default 8 000 to 14 000), and writes
 * `<ALLOC_DIR or /tmp>/<pid>.heapprofile`. Summarise with `node scripts/prof/summarize.mjs <file> [writes]`.
 */
import { allocationSampler } from './profiles.mjs';

const start_ms = Number(process.env.ALLOC_START_MS ?? 8000);
const stop_ms = Number(process.env.ALLOC_STOP_MS ?? 14000);
const sampler = allocationSampler();
setTimeout(() => {
  sampler.start();
  setTimeout(() => sampler.stop(), stop_ms - start_ms).unref();
}, start_ms).unref();
