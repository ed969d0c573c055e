/**
 * Failover trials: under a light steady write load spread over the live nodes, kill -9 the leader and measure
 * the time from the kill to the completion of the first successful write sent after it (through a surviving
 * node). The killed node is then restarted on its data directory before the next trial.
 *
 * Trial k kills member k mod 3 (n1, n2, n3, n1, …): before the trial, leadership is handed to that member with
 * the fabric API's transfer-leadership. Without that, the lowest-ranked survivor wins each election first, and
 * leadership would alternate between n1 and n2. n3 would never be killed.
 */
import type { NodeProcess } from '../../src/cluster/processes.js';
import { alive, type KeelBenchCluster } from './keel.js';

/** The light load: one write every PACE_MS (100 writes/s), round robin over the live nodes. */
const PACE_MS = 10;
/** Bound on writes in flight (a write may wait up to 8 s for an unknown outcome during the election). */
const MAX_IN_FLIGHT = 64;
/** Bound on one write. */
const WRITE_TIMEOUT_MS = 15_000;
/** Load before the kill, so that the kill lands on a leader busy replicating. */
const LOAD_BEFORE_KILL_MS = 500;
/** A trial with no successful write this long after the kill is reported as failed. */
const TRIAL_TIMEOUT_MS = 30_000;

export interface Trial {
  killed: string;
  /** Whether leadership was transferred to the killed member before the trial (it did not lead already). */
  transferred: boolean;
  /** Kill → first successful write after it; null when none within TRIAL_TIMEOUT_MS. */
  recovery_ms: number | null;
  /** Writes sent after the kill that failed, by HTTP status (`error` when no answer: refused, reset, timeout). */
  failedAfterKill: Map<string, number>;
}

class Pacer {
  private inFlight = 0;
  private seq = 0;
  private rr = 0;
  private readonly timer: NodeJS.Timeout;
  private readonly pending = new Set<Promise<void>>();
  killedAt = Number.POSITIVE_INFINITY;
  /** The killed node: no write is sent to it after the kill (its exit may not be noticed yet). */
  killed: NodeProcess | null = null;
  firstSuccessAfterKill: number | null = null;
  readonly failedAfterKill = new Map<string, number>();

  constructor(
    private readonly nodes: () => NodeProcess[],
    private readonly token: string,
    private readonly prefix: string,
  ) {
    this.timer = setInterval(() => this.tick(), PACE_MS);
  }

  private tick(): void {
    if (this.inFlight >= MAX_IN_FLIGHT) return;
    const live = this.nodes().filter((n) => n !== this.killed && alive(n));
    if (live.length === 0) return;
    const n = live[this.rr++ % live.length]!;
    const p = this.write(n).finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  private async write(n: NodeProcess): Promise<void> {
    this.inFlight++;
    const sent = performance.now();
    let outcome = 'error';
    try {
      const r = await fetch(`${n.base}/edge/management/v1/identities`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'zt-session': this.token },
        body: JSON.stringify({ name: `${this.prefix}-${this.seq++}`, type: 'User', isAdmin: false }),
        signal: AbortSignal.timeout(WRITE_TIMEOUT_MS),
      });
      await r.arrayBuffer();
      outcome = String(r.status);
    } catch {
      outcome = 'error';
    } finally {
      this.inFlight--;
    }
    const done = performance.now();
    if (sent < this.killedAt) return;
    if (outcome !== '201') this.failedAfterKill.set(outcome, (this.failedAfterKill.get(outcome) ?? 0) + 1);
    else if (this.firstSuccessAfterKill === null || done < this.firstSuccessAfterKill)
      this.firstSuccessAfterKill = done;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.pending]);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function failoverTrial(
  cluster: KeelBenchCluster,
  token: string,
  trial: number,
  onStarted: (n: NodeProcess) => void,
): Promise<Trial> {
  const leader = trial % cluster.nodes.length;
  const transferred = await cluster.leadBy(leader, token);
  const victim = cluster.nodes[leader]!;
  const pacer = new Pacer(() => cluster.nodes, token, `failover${trial}`);
  let result: Trial;
  try {
    await sleep(LOAD_BEFORE_KILL_MS);
    pacer.killed = victim;
    pacer.killedAt = performance.now();
    victim.child.kill('SIGKILL');
    const deadline = pacer.killedAt + TRIAL_TIMEOUT_MS;
    while (pacer.firstSuccessAfterKill === null && performance.now() < deadline) await sleep(5);
    const first = pacer.firstSuccessAfterKill as number | null;
    result = {
      killed: victim.spec.id,
      transferred,
      recovery_ms: first === null ? null : first - pacer.killedAt,
      failedAfterKill: pacer.failedAfterKill,
    };
  } finally {
    await pacer.stop();
  }
  await victim.exited;
  await cluster.restart(leader, onStarted);
  return result;
}
