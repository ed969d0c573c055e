/**
 * Linearizable read-index requests waiting on the leader for a heartbeat round that confirms it is still
 * the leader (etcd's readOnly, ReadOnlySafe). Each request gets a leader-local sequence number that the
 * heartbeats carry as their context; a quorum of acks for sequence s releases every request <= s.
 */
import type { NodeId } from '../types.js';

export interface ReadRequest {
  /** Requesting node (the leader itself for local requests). */
  from: NodeId;
  context: Uint8Array;
}

export interface PendingRead {
  seq: number;
  /** Commit index when the request was received: the read index once leadership is confirmed. */
  index: number;
  req: ReadRequest;
  acks: Set<NodeId>;
}

export class ReadOnly {
  private queue: PendingRead[] = [];
  /** Monotonic across clear() so a late ack can never match a newer request. */
  private nextSeq = 1;

  constructor(readonly maxPending: number) {}

  get size(): number {
    return this.queue.length;
  }

  full(): boolean {
    return this.queue.length >= this.maxPending;
  }

  /** Queues a request; returns its sequence number. The caller checks full() first. */
  add(index: number, req: ReadRequest): number {
    if (this.full()) throw new Error('read-only: queue is full');
    const seq = this.nextSeq++;
    this.queue.push({ seq, index, req, acks: new Set() });
    return seq;
  }

  /** Records an ack of `seq` by `id`; returns the acks for that request or null if it is unknown. */
  recvAck(id: NodeId, seq: number): Set<NodeId> | null {
    const rs = this.find(seq);
    if (!rs) return null;
    rs.acks.add(id);
    return rs.acks;
  }

  /** Removes and returns every request up to and including `seq` (empty if `seq` is not pending). */
  advance(seq: number): PendingRead[] {
    if (!this.find(seq)) return [];
    const out: PendingRead[] = [];
    while (this.queue.length > 0 && (this.queue[0] as PendingRead).seq <= seq)
      out.push(this.queue.shift() as PendingRead);
    return out;
  }

  /** Sequence number of the newest pending request, or 0. */
  lastSeq(): number {
    const last = this.queue[this.queue.length - 1];
    return last ? last.seq : 0;
  }

  clear(): void {
    this.queue = [];
  }

  private find(seq: number): PendingRead | undefined {
    // The queue is sorted by seq; a linear scan is fine for the bounded queue (maxPending).
    for (const rs of this.queue) {
      if (rs.seq === seq) return rs;
      if (rs.seq > seq) return undefined;
    }
    return undefined;
  }
}
