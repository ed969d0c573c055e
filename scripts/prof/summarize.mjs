/**
 * Summarises a V8 profile: `node scripts/prof/summarize.mjs <file.cpuprofile|file.heapprofile> [writes] [top]`.
 * A CPU profile (`--cpu-prof`): busy and idle time, self time by file and by function, inclusive time.
 * An allocation profile (alloc-sampling.mjs): bytes allocated (per write when `writes` is given), self and
 * inclusive by function. CPU profiles are wall-clock sampled: on a loaded machine a frame that makes a system
 * call is charged for the time a neighbour ran.
 */
import { add, label, largest, readProfile, short, walkAllocations } from './profiles.mjs';

const [file, writesArg, topArg] = process.argv.slice(2);
if (!file) throw new Error('usage: summarize.mjs <profile> [writes] [top]');
const profile = readProfile(file);
const top = Number(topArg ?? 40);
const print = (title, map, total) => {
  console.log(`--- ${title}`);
  for (const [k, v] of largest(map, top)) {
    console.log(`${((100 * v) / total).toFixed(1).padStart(5)} ${k}`);
  }
};

const self = new Map();
const incl = new Map();
const files = new Map();
if (profile.head) {
  // allocation profile: a tree with selfSize per node; a node's state is the distinct labels of its stack
  const total = walkAllocations(profile.head, [], (n, stack) => {
    const k = label(n.callFrame);
    add(self, k, n.selfSize);
    const st = stack.includes(k) ? stack : [...stack, k];
    for (const s of st) add(incl, s, n.selfSize);
    return st;
  });
  const per = writesArg ? `, ${(total / Number(writesArg)).toFixed(0)} B per write` : '';
  console.log(`sampled allocation ${(total / 1e6).toFixed(1)} MB${per}`);
  print('self', self, total);
  print('inclusive', incl, total);
} else {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  let busy = 0;
  let idle = 0;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    const n = byId.get(id);
    if (n.callFrame.functionName === '(idle)') {
      idle += dt;
      return;
    }
    busy += dt;
    add(self, label(n.callFrame), dt);
    add(files, short(n.callFrame.url) || n.callFrame.functionName, dt);
    const seen = new Set();
    for (let p = n.id; p !== undefined; p = parent.get(p)) {
      const k = label(byId.get(p).callFrame);
      if (!seen.has(k)) add(incl, k, dt);
      seen.add(k);
    }
  });
  console.log(`busy ${(busy / 1e6).toFixed(2)} s, idle ${(idle / 1e6).toFixed(2)} s`);
  print('self by file', files, busy);
  print('self by function', self, busy);
  print('inclusive', incl, busy);
}
