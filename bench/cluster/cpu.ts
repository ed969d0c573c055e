/**
 * CPU time of the processes under load, per write: user + system time from /proc/<pid>/stat (Linux) before and
 * after a load level. On a shared machine the writes/s move with the neighbours' load; the CPU a write costs each
 * member moves much less, so it is the figure to compare between versions.
 */
import { readFileSync } from 'node:fs';

/** A process to account for: its name in the report (e.g. `n1*` for the leader) and its pid. */
export interface Accounted {
  name: string;
  pid: number;
}

/** utime + stime of `pid` in ms, or null where /proc is not available (or the process is gone). */
export function cpuTime_ms(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the fields after the command name (which may hold spaces) start after its closing parenthesis
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    // USER_HZ is 100 on every Linux this runs on
    return Number.isFinite(ticks) ? ticks * 10 : null;
  } catch {
    return null;
  }
}

/** Starts accounting; `per(writes)` then describes each process's CPU time per write, or null without /proc. */
export function startAccounting(procs: Accounted[]): { per(writes: number): string | null } {
  const before = procs.map((p) => cpuTime_ms(p.pid));
  return {
    per(writes: number): string | null {
      if (writes <= 0) return null;
      const parts: string[] = [];
      let total = 0;
      for (const [i, p] of procs.entries()) {
        const a = before[i];
        const b = cpuTime_ms(p.pid);
        if (a === null || a === undefined || b === null) return null;
        const us = ((b - a) * 1000) / writes;
        total += us;
        parts.push(`${p.name} ${us.toFixed(0)}`);
      }
      return `CPU per write (µs, user+system): ${parts.join(', ')}; all ${total.toFixed(0)}`;
    },
  };
}
