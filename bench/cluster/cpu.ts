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

/**
 * Read and write system calls (`syscr` + `syscw` of /proc/<pid>/io: every socket and file read or write) and
 * context switches (voluntary + involuntary, /proc/<pid>/status) of `pid` so far, or null where /proc does not
 * tell. Per write, they count the messages and wake-ups a write costs, which the CPU time hides on a busy machine.
 */
export function ioCounts(pid: number): { syscalls: number; switches: number } | null {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (text: string, name: string) => Number(new RegExp(`^${name}:\\s*(\\d+)`, 'm').exec(text)?.[1]);
    const syscalls = field(io, 'syscr') + field(io, 'syscw');
    const switches = field(status, 'voluntary_ctxt_switches') + field(status, 'nonvoluntary_ctxt_switches');
    return Number.isFinite(syscalls) && Number.isFinite(switches) ? { syscalls, switches } : null;
  } catch {
    return null;
  }
}

/**
 * Starts accounting; `per(writes)` then describes each process's CPU time per write (and, where /proc tells, its
 * read/write system calls and context switches per write on a second line), or null without /proc.
 */
export function startAccounting(procs: Accounted[]): { per(writes: number): string | null } {
  const before = procs.map((p) => cpuTime_ms(p.pid));
  const ioBefore = procs.map((p) => ioCounts(p.pid));
  return {
    per(writes: number): string | null {
      if (writes <= 0) return null;
      const parts: string[] = [];
      const ioParts: string[] = [];
      let total = 0;
      let syscalls = 0;
      let switches = 0;
      for (const [i, p] of procs.entries()) {
        const a = before[i];
        const b = cpuTime_ms(p.pid);
        if (a === null || a === undefined || b === null) return null;
        const us = ((b - a) * 1000) / writes;
        total += us;
        parts.push(`${p.name} ${us.toFixed(0)}`);
        const ia = ioBefore[i];
        const ib = ioCounts(p.pid);
        if (ia && ib) {
          const s = (ib.syscalls - ia.syscalls) / writes;
          const w = (ib.switches - ia.switches) / writes;
          syscalls += s;
          switches += w;
          ioParts.push(`${p.name} ${s.toFixed(1)}/${w.toFixed(1)}`);
        }
      }
      const cpu = `CPU per write (µs, user+system): ${parts.join(', ')}; all ${total.toFixed(0)}`;
      if (ioParts.length !== procs.length) return cpu;
      return `${cpu}\n    syscalls/context switches per write: ${ioParts.join(', ')}; all ${syscalls.toFixed(1)}/${switches.toFixed(1)}`;
    },
  };
}
