import {
  decodeConfChange,
  type Entry,
  type Snapshot,
  type SnapshotChunks,
  type SnapshotMeta,
  type StateMachine,
} from '../../raft/index.js';
import { MAX_GROUP_COMMANDS, type Store } from '../../storage/store.js';
import type { Command, CommandResult } from '../../storage/types.js';
import { removalCommands } from '../model/cluster-removal.js';
import { releaseTooOld } from '../model/cluster-state.js';
import { STATE_MACHINE_VERSION } from '../version.js';
import { decodeLogged } from './codec.js';

/** Bound on proposals of this node waiting for their entry to be applied here. */
export const MAX_WAITING_PROPOSALS = 10_000;

export interface Waiter {
  promise: Promise<CommandResult>;
  cancel(): void;
}

/**
 * The store as Raft's state machine. Committed entries are applied in log order through `Store.applyGroupBehind`,
 * in groups of at most MAX_GROUP_COMMANDS, published at once and written behind: the store writes what was applied
 * as one synced LevelDB batch together with the index of its last entry every 100 ms (noop entries only advance
 * the index; a membership entry records or forgets the removed members' ids, src/model/cluster-removal.ts). The
 * Raft log already holds every applied entry durably, so nothing acknowledged depends on the store's write; after a
 * crash the store reopens at its durable index and Raft replays the entries above it. Entries at or below the
 * store's applied index are skipped, so replay is idempotent. Raft's periodic snapshots are deferred (checkpoint):
 * the store on disk is the snapshot, so Raft records only the index it is durable at and compacts its log behind
 * it; a snapshot with bytes (snapshotStream) is encoded only for a follower that needs one, and only once the store
 * on disk has caught up with it. A proposal made on this node waits here, by request id, for the result recorded
 * when its entry is applied on this node. Any exception escaping apply stops the Raft node (fail-stop).
 */
export class StoreStateMachine implements StateMachine {
  private readonly waiters = new Map<string, (r: CommandResult) => void>();

  constructor(
    readonly store: Store,
    private readonly onSkipped: (index: number) => void = () => {},
    /** The state-machine version this member applies: a snapshot of a cluster beyond it is refused (restore). */
    private readonly stateMachineVersion = STATE_MACHINE_VERSION,
  ) {}

  get waiting(): number {
    return this.waiters.size;
  }

  /** Registers interest in the result of the entry carrying `rid`; null when too many wait already. */
  wait(rid: string): Waiter | null {
    if (this.waiters.size >= MAX_WAITING_PROPOSALS) return null;
    let resolve!: (r: CommandResult) => void;
    const promise = new Promise<CommandResult>((r) => (resolve = r));
    this.waiters.set(rid, resolve);
    return { promise, cancel: () => this.waiters.delete(rid) };
  }

  async apply(entries: Entry[]): Promise<void> {
    let cmds: Command[] = [];
    let rids: string[] = [];
    let last = -1;
    const flush = async () => {
      if (last < 0) return;
      const results = await this.store.applyGroupBehind(cmds, last);
      for (let i = 0; i < rids.length; i++) {
        const resolve = this.waiters.get(rids[i]!);
        if (resolve === undefined) continue;
        this.waiters.delete(rids[i]!);
        resolve(results[i]!);
      }
      cmds = [];
      rids = [];
      last = -1;
    };
    // an index loop: for…of in an async function makes an iterator result per entry
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      if (e.index <= this.store.appliedIndex) continue;
      if (e.type === 'normal') {
        const logged = decodeLogged(e.data);
        if (logged === null) {
          // Deterministic on every node (same bytes): the entry is skipped, its index still advances.
          this.onSkipped(e.index);
        } else {
          cmds.push(logged.cmd);
          rids.push(logged.rid);
        }
      } else if (e.type === 'conf') {
        // the removed members' ids follow the membership changes, in log order (src/model/cluster-removal.ts)
        const recorded = removalCommands(decodeConfChange(e.data), e.index);
        if (cmds.length + recorded.length > MAX_GROUP_COMMANDS) await flush();
        for (const cmd of recorded) {
          cmds.push(cmd);
          rids.push('');
        }
      }
      last = e.index;
      if (cmds.length >= MAX_GROUP_COMMANDS) await flush();
    }
    await flush();
  }

  async snapshot(): Promise<{ index: number; data: Uint8Array }> {
    const snap = await this.store.snapshot();
    // the log is compacted up to the snapshot: the store on disk must not be behind it
    await this.store.flush();
    return snap;
  }

  /**
   * The store's write-behind flushed: everything applied when called is on disk. Returns the index applied when
   * called (durable now), not the durable index read after the flush: a flush may also write part of a group
   * applied meanwhile, past the index Raft knows as applied.
   */
  async checkpoint(): Promise<number> {
    const at = this.store.appliedIndex;
    await this.store.flush();
    return at;
  }

  async restore(snap: Snapshot): Promise<void> {
    checkIndex(await this.store.restore(snap.data), snap.meta);
    this.checkVersion();
  }

  /**
   * After a snapshot is installed: a cluster whose state-machine version is beyond this member's release holds
   * commands this member cannot apply as the others do, so the member stops here (fail-stop, as at a raise entry it
   * cannot follow: src/model/cluster-state.ts) rather than serve a state that drifts.
   */
  private checkVersion(): void {
    const tooOld = releaseTooOld(this.store, this.stateMachineVersion);
    if (tooOld !== null) throw new Error(tooOld);
  }

  /**
   * The snapshot frame by frame (at most SNAPSHOT_CHUNK_ROWS rows each), read as the log stores it. The state is
   * captured at once (by reference) and encoded a frame at a time, giving the event loop a turn after each, so
   * Raft can take snapshots in the background while requests and applies go on (StateMachine's contract).
   */
  async snapshotStream(): Promise<SnapshotChunks> {
    const store = this.store;
    const view = store.snapshotView();
    // the log is compacted up to the snapshot: the store on disk must not be behind it
    await store.flush();
    async function* chunks(): AsyncGenerator<Uint8Array> {
      for (const f of store.snapshotFrames(view)) {
        yield f;
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    return { index: view.index, chunks: chunks() };
  }

  /** Restores from chunks of any size, writing rows batch by batch as they arrive. */
  async restoreStream(meta: SnapshotMeta, chunks: AsyncIterable<Uint8Array>): Promise<void> {
    checkIndex(await this.store.restoreStream(chunks), meta);
    this.checkVersion();
  }
}

function checkIndex(index: number, meta: SnapshotMeta): void {
  if (index !== meta.index) throw new Error(`snapshot data is at index ${index}, its Raft metadata says ${meta.index}`);
}
