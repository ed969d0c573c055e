/**
 * Preload (`KEEL_NODE_FLAGS=--import=<abs path>`): like alloc-sampling.mjs, but the window is set from outside: the
 * first SIGUSR2 starts sampling every allocation (including what the GC has already collected), the next one
 * writes `<ALLOC_DIR or /tmp>/<pid>.heapprofile`. scripts/prof/alloc-level.mjs sends them around one load level, so
 * the profile holds exactly the writes wrk counted.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

const dir = process.env.ALLOC_DIR ?? '/tmp';
const session = new Session();
session.connect();
let sampling = false;
process.on('SIGUSR2', () => {
  if (!sampling) {
    sampling = true;
    const options = {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    };
    session.post('HeapProfiler.startSampling', options, () => {});
    return;
  }
  sampling = false;
  session.post('HeapProfiler.stopSampling', (err, r) => {
    if (!err) writeFileSync(`${dir}/${process.pid}.heapprofile`, JSON.stringify(r.profile));
  });
});
