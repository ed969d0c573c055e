import { encodeCommand } from './command-codec.js';
import type { Proposer } from './proposer.js';
import { MAX_GROUP_COMMANDS, type Store } from './store.js';
import { assert, type Command, type CommandResult } from './types.js';

export type { Proposer };

export class OverloadedError extends Error {
  constructor(readonly queued: number) {
    super(`write queue full (${queued} commands waiting)`);
    this.name = 'OverloadedError';
  }
}

interface Pending {
  cmd: Command;
  resolve: (r: CommandResult) => void;
  reject: (e: unknown) => void;
}

/**
 * Single-node proposer: commands queue up while a batch is being written; the next batch takes all of them
 * (up to MAX_GROUP_COMMANDS) and makes them durable with one synced write (group commit). The queue is bounded:
 * past `maxQueued` a proposal is refused at once, so a flood cannot exhaust memory.
 *
 * Every command takes the round trip a cluster gives it (encodeCommand: msgpackr encode, decode, compare) and the
 * decoded copy is applied; a command that does not survive it fails alone. If a batch fails as a whole (the store
 * failed: a disk write, or a broken invariant after the batch is on disk), no proposal is acknowledged any more:
 * the batch and everything queued or proposed later is rejected with that error (fail-stop; the owner exits).
 */
export class LocalProposer implements Proposer {
  private queue: Pending[] = [];
  private running = false;
  private closed = false;
  /** The error that failed a whole batch: from then on every proposal is refused with it. */
  private failure: unknown = null;
  private idle: Promise<void> = Promise.resolve();
  private nextIndex: number;

  constructor(
    private readonly store: Store,
    private readonly opts: { maxQueued: number; sync: boolean } = { maxQueued: 10_000, sync: true },
  ) {
    this.nextIndex = store.appliedIndex + 1;
  }

  /** Whether batches are fsync'd before proposals resolve. */
  get syncWrites(): boolean {
    return this.opts.sync;
  }

  propose(cmd: Command): Promise<CommandResult> {
    if (this.closed) return Promise.reject(new Error('proposer closed'));
    const failure = this.failure ?? this.store.failed;
    if (failure !== null) return Promise.reject(failure);
    if (this.queue.length >= this.opts.maxQueued) return Promise.reject(new OverloadedError(this.queue.length));
    const encoded = encodeCommand(cmd);
    if (!encoded.ok) return Promise.resolve(encoded.result);
    return new Promise((resolve, reject) => {
      this.queue.push({ cmd: encoded.cmd, resolve, reject });
      if (!this.running) this.idle = this.drain();
    });
  }

  private async drain(): Promise<void> {
    assert(!this.running, 'drain re-entered');
    this.running = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_GROUP_COMMANDS);
        const last = this.nextIndex + batch.length - 1;
        try {
          const results = await this.store.applyGroup(
            batch.map((p) => p.cmd),
            { index: last, sync: this.opts.sync },
          );
          this.nextIndex = last + 1;
          for (let i = 0; i < batch.length; i++) batch[i]!.resolve(results[i]!);
        } catch (err) {
          // not one command's failure: never acknowledge anything again (the store is failed or an invariant broke)
          this.failure ??= err;
          for (const p of batch) p.reject(err);
          for (const p of this.queue.splice(0)) p.reject(this.failure);
        }
      }
    } finally {
      this.running = false;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.idle;
  }
}
