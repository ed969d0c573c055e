/**
 * Test support (not used in production): a synchronous network of RaftCores over MemoryLogs, in the
 * spirit of etcd's raft_test.go `network`. Ready handling follows the Ready contract exactly.
 */
import { MemoryLog, withChunkData } from '../memory-log.js';
import { SeededRandom } from '../random.js';
import type { ConfState, CoreOptions, Entry, Message, NodeId, Random, ReadState } from '../types.js';
import { decodeConfChange, RaftCore } from './raft.js';

/** Random whose int() always returns 0: election timeouts are exactly electionTicks. */
export const ZERO_RANDOM: Random = { int: () => 0 };

export function confOf(voters: NodeId[], learners: NodeId[] = []): ConfState {
  return { voters, learners, votersOutgoing: [], learnersNext: [], autoLeave: false };
}

export type CoreFactory = (opts: CoreOptions) => RaftCore;

const DEFAULT_CHUNK_BYTES = 1 << 20;

/** The driver's part of sending: snapshot chunks get their bytes from the log (a stream whose snapshot is gone fails). */
function withChunksFilled(core: RaftCore, log: MemoryLog, msgs: Message[], chunk_bytes: number): Message[] {
  const out: Message[] = [];
  for (const m of msgs) {
    const filled = withChunkData(m, log, chunk_bytes);
    if (filled === null) core.reportSnapshot(m.to, false);
    else out.push(filled);
  }
  return out;
}

export function coreOptions(id: NodeId, storage: MemoryLog, over: Partial<CoreOptions> = {}): CoreOptions {
  return {
    id,
    storage,
    random: ZERO_RANDOM,
    electionTicks: 10,
    heartbeatTicks: 1,
    preVote: false,
    checkQuorum: false,
    maxMsgBytes: 1 << 20,
    maxInflightMsgs: 256,
    maxUncommittedBytes: 1 << 30,
    snapshotChunkBytes: DEFAULT_CHUNK_BYTES,
    applied: storage.snapshot()?.meta.index ?? 0,
    ...over,
  };
}

export interface TestNode {
  id: NodeId;
  core: RaftCore;
  log: MemoryLog;
  opts: Partial<CoreOptions>;
  applied: Entry[];
  readStates: ReadState[];
  conf: ConfState | null;
  snapshotsInstalled: number;
}

export class TestNet {
  readonly nodes = new Map<NodeId, TestNode>();
  /** Blocked directed links "from>to". */
  readonly blocked = new Set<string>();
  /** Messages dropped by type (e.g. to starve appends). */
  readonly dropTypes = new Set<Message['type']>();
  /** Every message delivered, in order (for assertions). */
  readonly delivered: Message[] = [];
  private pending: Message[] = [];

  /** A cluster of `voters` (and `learners`) with the given core options, all with empty logs. */
  static create(voters: NodeId[], over: Partial<CoreOptions> = {}, learners: NodeId[] = []): TestNet {
    const net = new TestNet();
    for (const id of [...voters, ...learners]) {
      net.add(id, new MemoryLog({ conf: confOf(voters, learners) }), over);
    }
    return net;
  }

  add(id: NodeId, log: MemoryLog, over: Partial<CoreOptions> = {}, factory?: CoreFactory): TestNode {
    const opts = coreOptions(id, log, over);
    const core = factory ? factory(opts) : new RaftCore(opts);
    const n: TestNode = { id, core, log, opts: over, applied: [], readStates: [], conf: null, snapshotsInstalled: 0 };
    this.nodes.set(id, n);
    return n;
  }

  node(id: NodeId): TestNode {
    const n = this.nodes.get(id);
    if (!n) throw new Error(`no node ${id}`);
    return n;
  }

  core(id: NodeId): RaftCore {
    return this.node(id).core;
  }

  /** Rebuilds a node's core from its durable log (a crash + restart). */
  restart(id: NodeId, over: Partial<CoreOptions> = {}): RaftCore {
    const n = this.node(id);
    const opts = coreOptions(id, n.log, { ...n.opts, ...over });
    n.core = new RaftCore(opts);
    return n.core;
  }

  isolate(id: NodeId): void {
    for (const other of this.nodes.keys()) {
      if (other === id) continue;
      this.blocked.add(`${id}>${other}`);
      this.blocked.add(`${other}>${id}`);
    }
  }

  heal(): void {
    this.blocked.clear();
    this.dropTypes.clear();
  }

  tick(id: NodeId, n = 1): void {
    for (let i = 0; i < n; i++) {
      this.core(id).tick();
      this.drain(id);
    }
  }

  /** Ticks `id` until it starts an election (its timeout is exactly electionTicks with ZERO_RANDOM). */
  campaign(id: NodeId): void {
    const ticks = (this.node(id).opts.electionTicks ?? 10) * 2;
    for (let i = 0; i < ticks; i++) {
      const role = this.core(id).status({ progress: false }).role;
      if (role === 'candidate' || role === 'preCandidate' || role === 'leader') break;
      this.tick(id);
    }
  }

  /** Elects `id` and delivers everything. */
  elect(id: NodeId): void {
    this.campaign(id);
    this.stabilize();
  }

  /** Handles the Ready of node `id`: persist, queue messages, apply, advance. Returns the messages. */
  drain(id: NodeId): Message[] {
    const n = this.node(id);
    const out: Message[] = [];
    for (let guard = 0; guard < 100 && n.core.hasReady(); guard++) {
      const rd = n.core.ready();
      n.log.receiveSnapshot(rd.snapshotChunks);
      if (rd.snapshot) n.log.applySnapshot(rd.snapshot);
      if (rd.entries.length > 0) n.log.append(rd.entries);
      if (rd.hardState) n.log.setHardState(rd.hardState);
      out.push(...withChunksFilled(n.core, n.log, rd.messages, n.opts.snapshotChunkBytes ?? DEFAULT_CHUNK_BYTES));
      if (rd.snapshot) {
        n.snapshotsInstalled++;
        n.conf = rd.snapshot.meta.conf;
      }
      for (const e of rd.committed) {
        n.applied.push(e);
        if (e.type === 'conf') n.conf = n.core.applyConfChange(decodeConfChange(e.data));
      }
      n.readStates.push(...rd.readStates);
      n.core.advance(rd);
    }
    this.pending.push(...out);
    return out;
  }

  /** Drains every node (in id order), returning all messages produced. */
  drainAll(): Message[] {
    const out: Message[] = [];
    for (const id of this.nodes.keys()) out.push(...this.drain(id));
    return out;
  }

  /** Removes and returns the queued (not yet delivered) messages. */
  takePending(): Message[] {
    this.drainAll();
    const p = this.pending;
    this.pending = [];
    return p;
  }

  /** Delivers `m` now (unless blocked), then drains the receiver. */
  deliver(m: Message): void {
    if (this.blocked.has(`${m.from}>${m.to}`) || this.dropTypes.has(m.type)) return;
    const to = this.nodes.get(m.to);
    if (!to) return;
    this.delivered.push(m);
    to.core.step(m);
    this.drain(m.to);
  }

  /** Delivers messages until none are left (bounded). */
  stabilize(maxMessages = 100_000): void {
    this.drainAll();
    for (let i = 0; i < maxMessages; i++) {
      const m = this.pending.shift();
      if (!m) return;
      this.deliver(m);
    }
    throw new Error('network did not stabilize');
  }

  /** Proposes `data` on `id` and stabilizes; returns the assigned index. */
  propose(id: NodeId, data: string | Uint8Array): number {
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    const { index } = this.core(id).propose(bytes);
    this.stabilize();
    return index;
  }

  /** Ticks every node (heartbeats, elections) then stabilizes. */
  tickAll(n = 1): void {
    for (let i = 0; i < n; i++) {
      for (const id of this.nodes.keys()) this.tick(id);
      this.stabilize();
    }
  }

  leader(): NodeId | null {
    for (const [id, n] of this.nodes) if (n.core.status({ progress: false }).role === 'leader') return id;
    return null;
  }
}

export function text(e: Entry): string {
  return new TextDecoder().decode(e.data);
}

export function seeded(seed: number): Random {
  return new SeededRandom(seed);
}

/** A bare message with defaults, for stepping a core directly. */
export function msg(m: Partial<Message> & Pick<Message, 'type' | 'from' | 'to'>): Message {
  return { term: 0, logTerm: 0, index: 0, entries: [], commit: 0, reject: false, rejectHint: 0, ...m };
}

/** Entries of given terms starting at index `from` (normal, payload = "i@t"). */
export function entries(from: number, terms: number[]): Entry[] {
  return terms.map((term, k) => ({
    term,
    index: from + k,
    type: 'normal' as const,
    data: new TextEncoder().encode(`${from + k}@${term}`),
  }));
}

/** One core driven by hand: step messages and collect what it sends (its Readies are handled fully). */
export class Solo {
  readonly log: MemoryLog;
  core: RaftCore;
  readonly applied: Entry[] = [];
  readonly readStates: ReadState[] = [];

  constructor(
    readonly id: NodeId,
    conf: ConfState,
    over: Partial<CoreOptions> = {},
    setup?: (log: MemoryLog) => void,
    factory?: CoreFactory,
  ) {
    this.log = new MemoryLog({ conf });
    setup?.(this.log);
    const opts = coreOptions(id, this.log, over);
    this.chunk_bytes = opts.snapshotChunkBytes;
    this.core = factory ? factory(opts) : new RaftCore(opts);
  }

  private readonly chunk_bytes: number;

  /** Steps `m` (filled with defaults) and returns the messages it produced. */
  step(m: Partial<Message> & Pick<Message, 'type' | 'from'>): Message[] {
    this.core.step(msg({ to: this.id, ...m }));
    return this.flush();
  }

  tick(n = 1): Message[] {
    const out: Message[] = [];
    for (let i = 0; i < n; i++) {
      this.core.tick();
      out.push(...this.flush());
    }
    return out;
  }

  flush(): Message[] {
    const out: Message[] = [];
    for (let guard = 0; guard < 100 && this.core.hasReady(); guard++) {
      const rd = this.core.ready();
      this.log.receiveSnapshot(rd.snapshotChunks);
      if (rd.snapshot) this.log.applySnapshot(rd.snapshot);
      if (rd.entries.length > 0) this.log.append(rd.entries);
      if (rd.hardState) this.log.setHardState(rd.hardState);
      out.push(...withChunksFilled(this.core, this.log, rd.messages, this.chunk_bytes));
      for (const e of rd.committed) {
        this.applied.push(e);
        if (e.type === 'conf') this.core.applyConfChange(decodeConfChange(e.data));
      }
      this.readStates.push(...rd.readStates);
      this.core.advance(rd);
    }
    return out;
  }
}

/** Writes `ents` and a hard state into a fresh MemoryLog (for building divergent logs). */
export function seedLog(log: MemoryLog, ents: Entry[], term: number, commit = 0, vote: NodeId | null = null): void {
  log.append(ents);
  log.setHardState({ term, vote, commit });
}
