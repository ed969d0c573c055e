/** The cluster benchmark's CPU accounting (bench/cluster/cpu.ts): /proc figures per write. */
import { closeSync, existsSync, openSync, writeSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cpuTime_ms, ioCounts, startAccounting } from '../../bench/cluster/cpu.js';

const PROC = existsSync(`/proc/${process.pid}/stat`);

describe.runIf(PROC)('benchmark CPU accounting', () => {
  it('reads a process CPU time that grows with work, and null for a process that does not exist', () => {
    // the accounting's baseline first, so the CPU it counts includes all that `used` counts below
    const acct = startAccounting([{ name: 'me', pid: process.pid }]);
    const before = cpuTime_ms(process.pid)!;
    expect(before).toBeGreaterThanOrEqual(0);
    // at least 100 ms of CPU (however long a loaded machine takes to give it), bounded
    const deadline = Date.now() + 10_000;
    let x = 0;
    while (cpuTime_ms(process.pid)! - before < 100 && Date.now() < deadline) {
      for (let i = 0; i < 100_000; i++) x += Math.sqrt(x + i);
    }
    expect(x).toBeGreaterThan(0);
    const used = cpuTime_ms(process.pid)! - before;
    expect(used).toBeGreaterThanOrEqual(100);
    // that CPU time over 1 000 writes
    const line = acct.per(1000)!;
    const us = Number(/me (\d+)/.exec(line)![1]);
    expect(us).toBeGreaterThanOrEqual(100);
    expect(us).toBeLessThanOrEqual(used + 50);
    expect(acct.per(0)).toBeNull();
    expect(cpuTime_ms(2 ** 22 + 7)).toBeNull();
  });

  it('counts read/write system calls and context switches, which grow with writes', () => {
    const acct = startAccounting([{ name: 'me', pid: process.pid }]);
    const before = ioCounts(process.pid)!;
    // 200 write(2) calls of nothing to stdout's descriptor's twin: /dev/null
    const fd = openSync('/dev/null', 'w');
    for (let i = 0; i < 200; i++) writeSync(fd, 'x');
    closeSync(fd);
    const after = ioCounts(process.pid)!;
    expect(after.syscalls - before.syscalls).toBeGreaterThanOrEqual(200);
    expect(after.switches).toBeGreaterThanOrEqual(before.switches);
    const line = acct.per(100)!;
    const perWrite = Number(/syscalls\/context switches per write: me ([\d.]+)\//.exec(line)![1]);
    expect(perWrite).toBeGreaterThanOrEqual(2);
    expect(ioCounts(2 ** 22 + 7)).toBeNull();
  });
});
