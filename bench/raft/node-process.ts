/**
 * One benchmark Raft node in its own OS process (forked by run.ts): LevelDB log, WebSocket transport on
 * loopback, a counting state machine. Proposals are generated inside the leader's process.
 */
import { RaftNode } from '../../raft/node.js';
import { LevelLog } from '../../raft/storage/level-log.js';
import { WebSocketTransport } from '../../raft/transport/websocket.js';
import type { Entry, Snapshot } from '../../raft/types.js';
import type { ChildEvent, LoadCommand, ParentCommand, StartCommand } from './protocol.js';
import { closedLoop } from './stats.js';

let node: RaftNode | null = null;
let id = '?';

function emit(ev: ChildEvent): void {
  process.send?.(ev);
}

class CountingMachine {
  applied = 0;
  normal = 0;
  apply(entries: Entry[]): void {
    for (const e of entries) if (e.type === 'normal') this.normal++;
    this.applied = entries[entries.length - 1]?.index ?? this.applied;
  }
  async snapshot(): Promise<{ index: number; data: Uint8Array }> {
    return { index: this.applied, data: new TextEncoder().encode(JSON.stringify({ normal: this.normal })) };
  }
  async restore(snap: Snapshot): Promise<void> {
    this.normal = (JSON.parse(new TextDecoder().decode(snap.data)) as { normal: number }).normal;
    this.applied = snap.meta.index;
  }
}

async function start(cmd: StartCommand): Promise<void> {
  id = cmd.id;
  const log = await LevelLog.open(cmd.dir);
  const transport = new WebSocketTransport({ id: cmd.id, clusterId: cmd.clusterId });
  await transport.listen(cmd.port);
  node = await RaftNode.start({
    id: cmd.id,
    log,
    transport,
    stateMachine: new CountingMachine(),
    applied: 0,
    peers: cmd.peers,
    bootstrap: { voters: cmd.voters },
    tick_ms: cmd.tick_ms,
    snapshotEvery_entries: 50_000,
    maxPendingProposals: 100_000,
  });
  node.onLeaderChange((leader, term) => emit({ type: 'leader', id, leader, term }));
  node.onFatal((err) => emit({ type: 'error', id, message: err.message }));
  emit({ type: 'ready', id });
}

async function load(cmd: LoadCommand): Promise<void> {
  const n = node;
  if (n === null) throw new Error('not started');
  const payload = new Uint8Array(cmd.payload_bytes).fill(42);
  const result = await closedLoop(cmd.concurrency, cmd.warmup_ms, cmd.duration_ms, async () => {
    await n.propose(payload);
  });
  emit({ type: 'load', id, result, applied: n.appliedIndex() });
}

process.on('message', (raw) => {
  const cmd = raw as ParentCommand;
  const run = async (): Promise<void> => {
    if (cmd.cmd === 'start') await start(cmd);
    else if (cmd.cmd === 'load') await load(cmd);
    else {
      await node?.stop();
      emit({ type: 'stopped', id });
      process.disconnect?.();
    }
  };
  run().catch((err: Error) => emit({ type: 'error', id, message: err.stack ?? err.message }));
});
