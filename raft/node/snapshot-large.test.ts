/**
 * A snapshot of 200 000 rows (about 6 MiB) through real LevelDB logs and the in-memory transport: taken from a
 * streaming state machine, compacted, streamed to a lagging member and installed there, recovered after a restart
 * — and never held as one buffer: every buffer seen where the snapshot's bytes cross an interface (the state
 * machine's stream into the log, the log's records, the transport's messages, the chunks handed to restoreStream)
 * is at most one chunk (1 MiB), a fraction of the snapshot. Also: a member killed while receiving one recovers.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RaftNode } from '../node.js';
import { CHUNK_RANGE, decodeChunkKey } from '../storage/codec.js';
import { LevelLog } from '../storage/level-log.js';
import type { LogDb, LogDbOp, LogDbRange } from '../storage/log-db.js';
import { MemoryNetwork } from '../transport/memory.js';
import type { Entry, Message, NodeId, SnapshotMeta } from '../types.js';
import type { SnapshotChunks, StateMachine } from './state-machine.js';
import { waitFor } from './wait-testkit.js';

const ROWS_PER_ENTRY = 10_000;
const ENTRIES = 20;
const ROW_BYTES = 32;
const CHUNK_BYTES = 1 << 20;
/** A stored record is its body plus a 5-byte header and msgpack's bin framing. */
const RECORD_OVERHEAD_BYTES = 16;
const FRAME_ROWS = 1000;

/** Rows key → index of the entry that wrote it; the snapshot encodes each row in ROW_BYTES bytes. */
class RowMachine implements StateMachine {
  readonly rows = new Map<number, number>();
  applied = 0;
  restores = 0;
  restoredBytes = 0;
  maxRestoreChunk_bytes = 0;
  maxStreamChunk_bytes = 0;

  apply(entries: Entry[]): void {
    for (const e of entries) {
      if (e.type === 'normal') {
        const v = new DataView(e.data.buffer, e.data.byteOffset, e.data.byteLength);
        const start = v.getUint32(0);
        const count = v.getUint32(4);
        for (let k = start; k < start + count; k++) this.rows.set(k, e.index);
      }
      this.applied = e.index;
    }
  }

  snapshot(): Promise<{ index: number; data: Uint8Array }> {
    throw new Error('the whole-buffer snapshot() must not be used');
  }

  restore(): Promise<void> {
    throw new Error('the whole-buffer restore() must not be used');
  }

  async snapshotStream(): Promise<SnapshotChunks> {
    const keys = [...this.rows.keys()].sort((a, b) => a - b);
    const rows = this.rows;
    const self = this;
    async function* frames(): AsyncGenerator<Uint8Array> {
      for (let i = 0; i < keys.length; i += FRAME_ROWS) {
        const n = Math.min(FRAME_ROWS, keys.length - i);
        const frame = new Uint8Array(n * ROW_BYTES);
        const v = new DataView(frame.buffer);
        for (let j = 0; j < n; j++) {
          const k = keys[i + j]!;
          v.setUint32(j * ROW_BYTES, k);
          v.setUint32(j * ROW_BYTES + 4, rows.get(k)!);
          frame.fill((k * 7) & 0xff, j * ROW_BYTES + 8, (j + 1) * ROW_BYTES);
        }
        self.maxStreamChunk_bytes = Math.max(self.maxStreamChunk_bytes, frame.byteLength);
        yield frame;
      }
    }
    return { index: this.applied, size_bytes: keys.length * ROW_BYTES, chunks: frames() };
  }

  async restoreStream(meta: SnapshotMeta, chunks: AsyncIterable<Uint8Array>): Promise<void> {
    this.rows.clear();
    this.restores++;
    let carry = new Uint8Array(0);
    for await (const chunk of chunks) {
      this.maxRestoreChunk_bytes = Math.max(this.maxRestoreChunk_bytes, chunk.byteLength);
      this.restoredBytes += chunk.byteLength;
      const buf = carry.byteLength === 0 ? chunk : Buffer.concat([carry, chunk]);
      const whole = buf.byteLength - (buf.byteLength % ROW_BYTES);
      const v = new DataView(buf.buffer, buf.byteOffset, whole);
      for (let at = 0; at < whole; at += ROW_BYTES) {
        const k = v.getUint32(at);
        if (buf[at + ROW_BYTES - 1] !== ((k * 7) & 0xff)) throw new Error(`row ${k} damaged`);
        this.rows.set(k, v.getUint32(at + 4));
      }
      carry = buf.slice(whole);
    }
    if (carry.byteLength !== 0) throw new Error('snapshot ends inside a row');
    this.applied = meta.index;
  }
}

/** A LevelDB handle that records the largest value written through it and the snapshot chunk keys it holds. */
class ObservedDb implements LogDb {
  readonly db: ClassicLevel<Buffer, Buffer>;
  maxValue_bytes = 0;
  chunkPuts = 0;

  constructor(path: string) {
    this.db = new ClassicLevel<Buffer, Buffer>(path, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  }
  open(): Promise<void> {
    return this.db.open();
  }
  close(): Promise<void> {
    return this.db.close();
  }
  getMany(keys: Buffer[]): Promise<Array<Buffer | undefined>> {
    return this.db.getMany(keys);
  }
  keys(range: LogDbRange): { all(): Promise<Buffer[]> } {
    return this.db.keys(range);
  }
  iterator(range: LogDbRange) {
    return this.db.iterator(range);
  }
  private note(ops: LogDbOp[]): void {
    for (const op of ops) {
      if (op.type !== 'put') continue;
      this.maxValue_bytes = Math.max(this.maxValue_bytes, op.value.byteLength);
      if (decodeChunkKey(op.key) !== null) this.chunkPuts++;
    }
  }
  batch(ops: LogDbOp[], opts: { sync: boolean }): Promise<void> {
    this.note(ops);
    return this.db.batch(ops, opts);
  }
  put(key: Buffer, value: Buffer, opts: { sync: boolean }): Promise<void> {
    this.note([{ type: 'put', key, value }]);
    return this.db.put(key, value, opts);
  }
}

interface Member {
  node: RaftNode;
  log: LevelLog;
  db: ObservedDb;
  sm: RowMachine;
}

function command(start: number, count: number): Uint8Array {
  const b = new Uint8Array(8);
  const v = new DataView(b.buffer);
  v.setUint32(0, start);
  v.setUint32(4, count);
  return b;
}

const IDS: NodeId[] = ['a', 'b', 'c'];

describe('a snapshot of 200 000 rows', () => {
  let dir: string;
  let net: MemoryNetwork;
  /** Largest snapshot chunk and number of chunks the transport carried, per receiver. */
  let chunkMax_bytes: number;
  let chunksSent: number;
  /** Messages to and from c are dropped while true; after `cAllowChunks` snapshot chunks to c, all to c are. */
  let cutOffC: boolean;
  let cAllowChunks: number;
  const members = new Map<NodeId, Member>();

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keel-raft-big-snapshot-'));
    chunkMax_bytes = 0;
    chunksSent = 0;
    cutOffC = true;
    cAllowChunks = Number.POSITIVE_INFINITY;
    net = new MemoryNetwork({
      filter: (m: Message) => {
        if (m.type === 'snapshot') {
          chunkMax_bytes = Math.max(chunkMax_bytes, m.snapshot!.data.byteLength);
          chunksSent++;
          if (m.to === 'c' && cAllowChunks-- <= 0) return 'drop';
        }
        if (cutOffC && (m.to === 'c' || m.from === 'c')) return 'drop';
        return 'deliver';
      },
    });
  });

  afterEach(async () => {
    for (const m of members.values()) await m.node.stop().catch(() => undefined);
    members.clear();
    rmSync(dir, { recursive: true, force: true });
  });

  async function start(id: NodeId): Promise<Member> {
    const db = new ObservedDb(join(dir, id));
    const log = await LevelLog.open(join(dir, id), { db });
    const sm = new RowMachine();
    const node = await RaftNode.start({
      id,
      log,
      transport: net.join(id),
      stateMachine: sm,
      applied: 0,
      peers: Object.fromEntries(IDS.map((x) => [x, `mem:${x}`])),
      bootstrap: { voters: IDS },
      tick_ms: 20,
      electionTicks: 10,
      snapshotEvery_entries: 10,
      snapshotKeep_entries: 2,
    });
    const m = { node, log, db, sm };
    members.set(id, m);
    return m;
  }

  /** a and b elect a leader and write ENTRIES × ROWS_PER_ENTRY rows while c is cut off; returns the leader. */
  async function loadWithoutC(): Promise<Member> {
    for (const id of IDS) await start(id);
    await waitFor(() => ['a', 'b'].some((id) => members.get(id)!.node.isLeader()), 20_000, 'a leader among a, b');
    const leader = [...members.values()].find((m) => m.node.isLeader())!;
    for (let i = 0; i < ENTRIES; i++) await leader.node.propose(command(i * ROWS_PER_ENTRY, ROWS_PER_ENTRY));
    await waitFor(() => leader.log.firstIndex() > 4, 20_000, 'the leader compacting past what c holds');
    return leader;
  }

  function sameRows(a: RowMachine, b: RowMachine): boolean {
    if (a.rows.size !== b.rows.size) return false;
    for (const [k, v] of a.rows) if (b.rows.get(k) !== v) return false;
    return true;
  }

  it('is taken, compacted, installed on a lagging member and recovered after a restart, chunk by chunk', async () => {
    const leader = await loadWithoutC();
    const snap = leader.log.snapshot()!;
    expect(leader.sm.rows.size).toBe(ENTRIES * ROWS_PER_ENTRY);
    expect(snap.size_bytes).toBeGreaterThan(4 * CHUNK_BYTES);

    cutOffC = false;
    const c = members.get('c')!;
    await waitFor(() => c.sm.applied >= leader.sm.applied, 60_000, 'c catching up');
    expect(c.sm.restores).toBe(1);
    expect(sameRows(c.sm, leader.sm)).toBe(true);
    expect(c.log.snapshot()?.meta.index).toBeGreaterThanOrEqual(snap.meta.index);

    // No buffer of the snapshot's size anywhere its bytes crossed an interface.
    expect(chunksSent).toBeGreaterThanOrEqual(Math.ceil(snap.size_bytes / CHUNK_BYTES));
    expect(chunkMax_bytes).toBeLessThanOrEqual(CHUNK_BYTES);
    for (const m of members.values()) {
      expect(m.db.maxValue_bytes).toBeLessThanOrEqual(CHUNK_BYTES + RECORD_OVERHEAD_BYTES);
      expect(m.db.chunkPuts).toBeGreaterThanOrEqual(Math.ceil(snap.size_bytes / CHUNK_BYTES));
    }
    expect(leader.sm.maxStreamChunk_bytes).toBeLessThanOrEqual(FRAME_ROWS * ROW_BYTES);
    expect(c.sm.maxRestoreChunk_bytes).toBeLessThanOrEqual(CHUNK_BYTES);
    expect(c.sm.restoredBytes).toBeGreaterThan(4 * CHUNK_BYTES);

    // c restarts with an empty state machine: restored from its log's snapshot (chunk by chunk), then its log.
    await c.node.stop();
    members.delete('c');
    const again = await start('c');
    expect(again.sm.restores).toBe(1);
    expect(again.sm.maxRestoreChunk_bytes).toBeLessThanOrEqual(CHUNK_BYTES);
    await waitFor(() => again.sm.applied >= leader.sm.applied, 30_000, 'c after its restart');
    expect(sameRows(again.sm, leader.sm)).toBe(true);
  }, 120_000);

  it('a member killed while receiving one recovers: the partial snapshot is discarded, the stream starts over', async () => {
    const leader = await loadWithoutC();
    cAllowChunks = 2;
    cutOffC = false;
    const c = members.get('c')!;
    // The two chunks that get through are stored before c acknowledges them.
    await waitFor(() => c.db.chunkPuts >= 1, 30_000, 'c storing received chunks');
    await c.node.kill();
    await c.node.idle();
    await c.log.close();
    members.delete('c');

    // Reopened: the partial snapshot's records are gone, the log has no snapshot.
    const reopened = await LevelLog.open(join(dir, 'c'));
    expect(reopened.snapshot()).toBeNull();
    await reopened.close();
    const raw = new ClassicLevel<Buffer, Buffer>(join(dir, 'c'), { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    await raw.open();
    expect(await raw.keys(CHUNK_RANGE).all()).toEqual([]);
    await raw.close();

    cAllowChunks = Number.POSITIVE_INFINITY;
    const again = await start('c');
    await waitFor(() => again.sm.applied >= leader.sm.applied, 60_000, 'c catching up after its crash');
    expect(again.sm.restores).toBe(1);
    expect(sameRows(again.sm, leader.sm)).toBe(true);
  }, 120_000);
});
