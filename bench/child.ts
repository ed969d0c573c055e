/** Benchmark children: a script forked with its stdout read line by line until it prints `READY <port>`. */
import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';

export interface Child {
  proc: ChildProcess;
  port: number;
  lines: string[];
}

export function spawnChild(script: string, args: string[], dir: string): Promise<Child> {
  const proc = fork(join(dir, script), args, { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const lines: string[] = [];
  return new Promise((resolve, reject) => {
    let buf = '';
    proc.stdout!.on('data', (d) => {
      buf += d;
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        lines.push(line);
        const m = /^READY (\d+)/.exec(line);
        if (m) resolve({ proc, port: Number(m[1]), lines });
      }
    });
    proc.on('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

export async function stopChild(c: Child): Promise<void> {
  const done = new Promise((r) => c.proc.once('exit', r));
  c.proc.kill('SIGTERM');
  await done;
}
