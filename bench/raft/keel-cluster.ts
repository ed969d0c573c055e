/** Parent side: forks three node processes, waits for a leader, runs load on the leader, stops them. */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ChildEvent, LoadCommand, ParentCommand } from './protocol.js';
import type { LoadResult } from './stats.js';

interface Child {
  id: string;
  proc: ChildProcess;
  events: ChildEvent[];
  waiters: Array<(ev: ChildEvent) => boolean>;
}

export class KeelCluster {
  private readonly children: Child[] = [];
  private leader: string | null = null;

  private constructor() {}

  static async start(baseDir: string, ports: number[], tick_ms: number): Promise<KeelCluster> {
    const cluster = new KeelCluster();
    const ids = ports.map((_, i) => `n${i + 1}`);
    const peers: Record<string, string> = {};
    ids.forEach((id, i) => {
      peers[id] = `127.0.0.1:${ports[i]}`;
    });
    const script = new URL('./node-process.js', import.meta.url);
    for (const [i, id] of ids.entries()) {
      const proc = fork(script, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      const child: Child = { id, proc, events: [], waiters: [] };
      proc.on('message', (raw) => {
        const ev = raw as ChildEvent;
        if (ev.type === 'leader' && ev.leader !== null) cluster.leader = ev.leader;
        if (ev.type === 'error') process.stderr.write(`[${ev.id}] ${ev.message}\n`);
        const before = child.waiters.length;
        child.waiters = child.waiters.filter((w) => !w(ev));
        // Keep an event for a later waitFor only if no current waiter took it (bounded: a few per run).
        if (child.waiters.length === before && child.events.length < 1000) child.events.push(ev);
      });
      cluster.children.push(child);
      const dir = join(baseDir, id);
      mkdirSync(dir, { recursive: true });
      cluster.send(child, {
        cmd: 'start',
        id,
        dir,
        port: ports[i]!,
        clusterId: 'keel-bench',
        peers,
        voters: ids,
        tick_ms,
      });
    }
    await Promise.all(cluster.children.map((c) => cluster.waitFor(c, (ev) => ev.type === 'ready', 20_000)));
    const deadline = Date.now() + 20_000;
    while (cluster.leader === null) {
      if (Date.now() > deadline) throw new Error('no Raft leader elected within 20 s');
      await new Promise((r) => setTimeout(r, 20));
    }
    return cluster;
  }

  async load(cmd: Omit<LoadCommand, 'cmd'>): Promise<LoadResult> {
    const leader = this.children.find((c) => c.id === this.leader);
    if (leader === undefined) throw new Error('no leader');
    this.send(leader, { cmd: 'load', ...cmd });
    const ev = await this.waitFor(leader, (e) => e.type === 'load', cmd.warmup_ms + cmd.duration_ms + 30_000);
    if (ev.type !== 'load') throw new Error('unexpected event');
    return ev.result;
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.children.map(async (c) => {
        if (c.proc.exitCode !== null) return;
        const exited = new Promise((r) => c.proc.once('exit', r));
        this.send(c, { cmd: 'stop' });
        const timer = setTimeout(() => c.proc.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }),
    );
  }

  private send(c: Child, cmd: ParentCommand): void {
    c.proc.send(cmd);
  }

  private waitFor(c: Child, match: (ev: ChildEvent) => boolean, timeout_ms: number): Promise<ChildEvent> {
    const at = c.events.findIndex(match);
    if (at >= 0) return Promise.resolve(c.events.splice(at, 1)[0]!);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${c.id}`)), timeout_ms);
      c.waiters.push((ev) => {
        if (!match(ev)) return false;
        clearTimeout(timer);
        resolve(ev);
        return true;
      });
      c.proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${c.id} exited with ${code}`));
      });
    });
  }
}
