/**
 * `npm run bench -- apply [--quick] [--creates N] [--group G] [--rounds R]`: the CPU one replicated write costs a
 * cluster member in its apply path, on the real schema and store. N identity creates, each the command
 * `POST /identities` proposes (`{"name":…,"type":"User","isAdmin":false}`), are encoded as Raft log entries the way
 * the proposer logs them, then handed to the Raft state machine (`StoreStateMachine.apply`: decode, apply through
 * `Store.applyGroupBehind`, publish) G entries at a time, as Raft hands committed entries over; the write-behind
 * store's flush (one synced LevelDB batch) runs every 100 ms of work, as in a member. Printed per create: the
 * process's CPU time (user + system, every thread: LevelDB's writes included), and the main thread's wall time in
 * apply and in flush. R rounds on fresh stores; the best and the median round. Profile with
 * `node --cpu-prof dist/bench/run.js apply`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Entry } from '../raft/index.js';
import { encodeLoggedBytes } from '../src/cluster/codec.js';
import { StoreStateMachine } from '../src/cluster/state-machine.js';
import { DEFAULT_AUTH_POLICY } from '../src/model/auth-policy.js';
import { buildSchema } from '../src/model/index.js';
import type { Command } from '../src/model/rows.js';
import { encodeCommand } from '../storage/command-codec.js';
import { Store, WRITE_BEHIND_INTERVAL_MS } from '../storage/store.js';
import { benchOptions } from './options.js';

const { quick, opt } = benchOptions(process.argv.slice(2));
const N = opt('--creates', quick ? 20_000 : 100_000);
const G = opt('--group', 64);
const ROUNDS = opt('--rounds', quick ? 3 : 5);
const AT = '2026-11-26T00:00:00.000Z';

interface Round {
  cpuUs: number;
  applyUs: number;
  flushUs: number;
}

/** The log entries of `n` identity creates (from index `first`), as the Raft proposer logs them. */
function entries(first: number, n: number): Entry[] {
  const out: Entry[] = [];
  for (let i = 0; i < n; i++) {
    const cmd: Command = {
      op: 'create',
      entity: 'identities',
      id: `i${String(i).padStart(9, '0')}`,
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

async function round(): Promise<Round> {
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
    const cpu0 = process.cpuUsage();
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
    const cpu = process.cpuUsage(cpu0);
    if (store.collection('identities').size !== N) throw new Error('not every create was applied');
    await store.close();
    return {
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
