/** A bounded FIFO of encoded messages waiting for a peer connection. Full → the caller drops the message. */
import type { Message } from '../types.js';

interface Item {
  msg: Message;
  bytes: Buffer;
}

export class SendQueue {
  private items: Item[] = [];
  private head = 0;
  private size_bytes = 0;

  constructor(
    readonly maxMessages: number,
    readonly max_bytes: number,
  ) {
    if (!(maxMessages > 0 && max_bytes > 0)) throw new RangeError('raft transport: queue bounds must be positive');
  }

  get length(): number {
    return this.items.length - this.head;
  }

  get bytes(): number {
    return this.size_bytes;
  }

  /** False (and nothing queued) when the queue is full. */
  push(msg: Message, bytes: Buffer): boolean {
    if (this.length >= this.maxMessages || this.size_bytes + bytes.length > this.max_bytes) return false;
    this.items.push({ msg, bytes });
    this.size_bytes += bytes.length;
    return true;
  }

  /** Removes messages from the front while their total stays ≤ frame_bytes (always at least one). */
  takeFrame(frame_bytes: number): Buffer[] {
    const out: Buffer[] = [];
    let total = 0;
    while (this.head < this.items.length) {
      const item = this.items[this.head]!;
      if (out.length > 0 && total + item.bytes.length > frame_bytes) break;
      out.push(item.bytes);
      total += item.bytes.length;
      this.size_bytes -= item.bytes.length;
      this.items[this.head] = undefined as unknown as Item;
      this.head++;
    }
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return out;
  }

  /** Empties the queue, returning the dropped messages. */
  clear(): Message[] {
    const dropped = this.items.slice(this.head).map((i) => i.msg);
    this.items = [];
    this.head = 0;
    this.size_bytes = 0;
    return dropped;
  }
}
