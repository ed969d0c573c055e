/**
 * Allocation per write over exactly one load level: `node scripts/prof/alloc-level.mjs <concurrency> [seconds]`
 * (after `npm run build`). Starts the benchmark's 3-node cluster (bench/cluster/keel.ts) with alloc-signal.mjs
 * preloaded, warms it up (3 s at c = 16), then signals every member to sample while one wrk level runs, and prints
 * each member's bytes allocated per write (wrk's count of writes): in all, under the apply (applyCommitted,
 * applyGroupBehind and the state machine's flush: the store's part) and the rest (HTTP, handler, proposer, Raft,
 * transport, log), with the rest's biggest allocators (`TOP=n`). Also the CPU each member used per write.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { add, label, largest, readProfile, walkAllocations } from './profiles.mjs';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const concurrency = Number(process.argv[2] ?? 256);
const seconds = Number(process.argv[3] ?? 5);
const top = Number(process.env.TOP ?? 0);

/** Applying committed entries, and the state machine's flush: the store's part of a write. */
const APPLY = new Set(['applyCommitted', 'applyGroupBehind']);
const isApply = (f) => APPLY.has(f.functionName) || (f.functionName === 'flush' && f.url.includes('state-machine'));
const { KeelBenchCluster } = await import(`${repo}/dist/bench/cluster/keel.js`);
const { runWrk } = await import(`${repo}/dist/bench/cluster/wrk.js`);
const { startAccounting } = await import(`${repo}/dist/bench/cluster/cpu.js`);

const base = mkdtempSync(join(tmpdir(), 'keel-alloc-level-'));
const profiles = join(base, 'profiles');
mkdirSync(profiles);
process.env.ALLOC_DIR = profiles;
process.env.KEEL_NODE_FLAGS = `--import=${repo}/scripts/prof/alloc-signal.mjs`;
let cluster;
try {
  cluster = await KeelBenchCluster.start(join(base, 'keel'), () => {});
  const token = await cluster.login();
  const leader = await cluster.agreedLeader(token);
  const target = { kind: 'keel', ports: cluster.ports, token };
  await runWrk(target, 16, 3, 'k0000', base);
  const members = cluster.nodes.map((n, i) => ({ name: `${n.spec.id}${i === leader ? '*' : ''}`, pid: n.child.pid }));
  for (const n of cluster.nodes) n.child.kill('SIGUSR2');
  const cpu = startAccounting(members);
  const r = await runWrk(target, concurrency, seconds, `k${String(concurrency).padStart(4, '0')}`, base);
  for (const n of cluster.nodes) n.child.kill('SIGUSR2');
  console.log(
    `c=${concurrency}: ${r.requests} writes in ${seconds} s (${r.writesPerSec.toFixed(0)}/s), ` +
      `${r.httpErrors + r.socketErrors} errors, p50 ${r.p50_ms} ms, p99 ${r.p99_ms} ms`,
  );
  console.log(cpu.per(r.requests));
  await new Promise((done) => setTimeout(done, 3000)); // the profiles are written
  for (const m of members) report(m.name, join(profiles, `${m.pid}.heapprofile`), r.requests);
} finally {
  await cluster?.stop();
  rmSync(base, { recursive: true, force: true });
}

function report(name, file, writes) {
  let apply = 0;
  const rest = new Map();
  // a node's state: whether it is under the apply, and its nearest caller with a url (the label of a builtin's)
  const total = walkAllocations(readProfile(file).head, { inApply: false, caller: '' }, (node, { inApply, caller }) => {
    const f = node.callFrame;
    const here = label(f);
    const under = inApply || isApply(f);
    if (under) apply += node.selfSize;
    // a builtin (no url) is named with the function that called it
    else add(rest, f.url === '' ? `${here} <- ${caller}` : here, node.selfSize);
    return { inApply: under, caller: f.url === '' ? caller : here };
  });
  const per = (bytes) => Math.round(bytes / writes);
  console.log(`${name}: ${per(total)} B per write: apply ${per(apply)}, rest ${per(total - apply)}`);
  for (const [k, v] of largest(rest, top)) console.log(`  ${String(per(v)).padStart(6)} ${k}`);
}
