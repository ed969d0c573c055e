/**
 * In-process transport for tests: a MemoryNetwork connects MemoryTransports by id. Messages go through the wire
 * codec (so they are copied exactly as over a socket) and are delivered asynchronously. Hooks let a test drop,
 * delay or partition traffic.
 */
import type { Message, NodeId } from '../types.js';
import { roundTrip } from './codec.js';
import {
  MAX_HANDLERS,
  type MessageHandler,
  type PeerStats,
  type Transport,
  type UnreachableHandler,
} from './transport.js';

/** Decides the fate of one message: 'drop', 'deliver', or a delay in ms. */
export type NetworkFilter = (m: Message) => 'drop' | 'deliver' | number;

export interface MemoryNetworkOptions {
  filter?: NetworkFilter;
  /** Max messages in flight per destination; beyond it messages are dropped and reported. Default 10 000. */
  maxInflightPerNode?: number;
}

export class MemoryNetwork {
  private readonly nodes = new Map<NodeId, MemoryTransport>();
  private readonly cut = new Set<string>();
  private readonly inflight = new Map<NodeId, number>();
  filter: NetworkFilter | null;
  readonly maxInflightPerNode: number;

  constructor(opts: MemoryNetworkOptions = {}) {
    this.filter = opts.filter ?? null;
    this.maxInflightPerNode = opts.maxInflightPerNode ?? 10_000;
  }

  /** Creates (or replaces, after a simulated restart) the transport of node `id`. */
  join(id: NodeId): MemoryTransport {
    const t = new MemoryTransport(id, this);
    this.nodes.set(id, t);
    return t;
  }

  /** Cuts both directions between a and b. */
  partition(a: NodeId, b: NodeId): void {
    this.cut.add(`${a}\u0000${b}`);
    this.cut.add(`${b}\u0000${a}`);
  }

  /** Cuts `id` off from every other node. */
  isolate(id: NodeId, others: Iterable<NodeId>): void {
    for (const o of others) if (o !== id) this.partition(id, o);
  }

  heal(): void {
    this.cut.clear();
  }

  /** @internal */
  detach(t: MemoryTransport): void {
    if (this.nodes.get(t.id) === t) this.nodes.delete(t.id);
  }

  /** @internal Returns false when the message was dropped for a reason the sender should learn of. */
  deliver(m: Message): boolean {
    if (this.cut.has(`${m.from}\u0000${m.to}`)) return true; // a partition drops silently, like a black hole
    const fate = this.filter === null ? 'deliver' : this.filter(m);
    if (fate === 'drop') return true;
    const dest = this.nodes.get(m.to);
    if (dest === undefined) return false;
    const inflight = this.inflight.get(m.to) ?? 0;
    if (inflight >= this.maxInflightPerNode) return false;
    this.inflight.set(m.to, inflight + 1);
    const copy = roundTrip(m);
    const sender = this.nodes.get(m.from);
    const run = (): void => {
      this.inflight.set(m.to, (this.inflight.get(m.to) ?? 1) - 1);
      // Re-check at delivery: either end may have crashed (been replaced or closed) or been cut off meanwhile.
      if (this.nodes.get(m.to) !== dest || this.nodes.get(m.from) !== sender) return;
      if (this.cut.has(`${m.from}\u0000${m.to}`)) return;
      dest.receive(copy);
    };
    if (typeof fate === 'number' && fate > 0) setTimeout(run, fate);
    else setImmediate(run);
    return true;
  }
}

interface MemoryPeer {
  address: string;
  sent: number;
  received: number;
  dropped: number;
}

export class MemoryTransport implements Transport {
  /** In-process delivery has no frame limit. */
  readonly maxPayload_bytes = Number.POSITIVE_INFINITY;
  private readonly messageHandlers: MessageHandler[] = [];
  private readonly unreachableHandlers: UnreachableHandler[] = [];
  private readonly peerMap = new Map<NodeId, MemoryPeer>();
  private closed = false;

  constructor(
    readonly id: NodeId,
    private readonly network: MemoryNetwork,
  ) {}

  send(msgs: Message[]): void {
    if (this.closed) return;
    for (const m of msgs) {
      if (m.from !== this.id) throw new Error(`raft transport: message from ${m.from} sent by ${this.id}`);
      const peer = this.peerMap.get(m.to);
      if (peer === undefined || !this.network.deliver(m)) {
        if (peer !== undefined) peer.dropped++;
        for (const h of this.unreachableHandlers) h(m.to, [m]);
        continue;
      }
      peer.sent++;
    }
  }

  /** @internal */
  receive(m: Message): void {
    if (this.closed) return;
    const peer = this.peerMap.get(m.from);
    if (peer === undefined) return; // unknown peers are not listened to, as over a real connection
    peer.received++;
    for (const h of this.messageHandlers) h(m);
  }

  onMessage(handler: MessageHandler): void {
    if (this.messageHandlers.length >= MAX_HANDLERS) throw new Error('raft transport: too many message handlers');
    this.messageHandlers.push(handler);
  }

  onUnreachable(handler: UnreachableHandler): void {
    if (this.unreachableHandlers.length >= MAX_HANDLERS) throw new Error('raft transport: too many handlers');
    this.unreachableHandlers.push(handler);
  }

  addPeer(id: NodeId, address: string): void {
    if (id === this.id) return;
    const existing = this.peerMap.get(id);
    if (existing !== undefined) existing.address = address;
    else this.peerMap.set(id, { address, sent: 0, received: 0, dropped: 0 });
  }

  removePeer(id: NodeId): void {
    this.peerMap.delete(id);
  }

  peers(): PeerStats[] {
    return [...this.peerMap].map(([id, p]) => ({
      id,
      address: p.address,
      state: 'connected',
      dialer: this.id < id,
      queued_msgs: 0,
      queued_bytes: 0,
      sent_msgs: p.sent,
      received_msgs: p.received,
      dropped_msgs: p.dropped,
      connects: 1,
    }));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.network.detach(this);
  }
}
