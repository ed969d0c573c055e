/**
 * Preload (`KEEL_NODE_FLAGS=--import=<abs path>`): a timeline of what can stall a node, for finding where a p99
 * comes from. Appends to `<STALLS_DIR or /tmp>/stalls-<pid>.log`, one line per event, seconds since the node
 * started first:
 *
 * - `lag <ms>`: the event loop came back that late to a 10 ms timer (the main thread was busy or blocked that long;
 *   reported from STALL_MS, 30 by default);
 * - `gc <kind> <ms>`: a garbage collection pause of at least GC_MS (10 by default), or any major one (kind 4
 *   major, 1 minor/scavenge, 8 incremental, 16 weak callbacks).
 *
 * Nothing is kept in memory; each event costs one small synchronous file append (events are rare by construction).
 */
import { appendFileSync } from 'node:fs';
import { constants, PerformanceObserver } from 'node:perf_hooks';

const file = `${process.env.STALLS_DIR ?? '/tmp'}/stalls-${process.pid}.log`;
const stallMs = Number(process.env.STALL_MS ?? 30);
const gcMs = Number(process.env.GC_MS ?? 10);
const TICK_MS = 10;
const started = performance.now();
const at = () => ((performance.now() - started) / 1000).toFixed(2);

let last = performance.now();
setInterval(() => {
  const now = performance.now();
  const lag = now - last - TICK_MS;
  if (lag >= stallMs) appendFileSync(file, `${at()} lag ${lag.toFixed(0)}\n`);
  last = now;
}, TICK_MS).unref();

new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const kind = e.detail?.kind;
    if (e.duration >= gcMs || kind === constants.NODE_PERFORMANCE_GC_MAJOR)
      appendFileSync(file, `${at()} gc ${kind} ${e.duration.toFixed(1)}\n`);
  }
}).observe({ entryTypes: ['gc'] });
