/**
 * The Raft log's write-ahead file (wal.ts) and LevelLog's use of it: records read back in order; a record cut short
 * ends the scan, damage in the middle is reported; records of another salt never read; and LevelLog's writes through
 * the file survive a reopen, a compaction, a full file, a conflicting overwrite, and a reopen without the file.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Entry, HardState } from '../types.js';
import { decodeMeta, KEY_FORMAT, KEY_STATE } from './codec.js';
import { LogCorruptError } from './errors.js';
import { LevelLog } from './level-log.js';
import { conf3, memoryWal } from './log-testkit.js';
import { encodeWalRecord, MIN_WAL_BYTES, newWalSalt, openWalFile, scanWal, type WalFile } from './wal.js';

const text = new TextDecoder();

function ents(from: number, to: number, term: number, tag = 'e'): Entry[] {
  const out: Entry[] = [];
  for (let i = from; i <= to; i++) out.push({ index: i, term, type: 'normal', data: Buffer.from(`${tag}${i}`) });
  return out;
}

function shown(log: LevelLog): string[] {
  const first = log.firstIndex();
  return log.entries(first, log.lastIndex() + 1, Infinity).map((e) => `${e.term}:${text.decode(e.data)}`);
}

async function writeAll(file: WalFile, salt: Buffer, records: Array<[HardState, Entry[]]>): Promise<number[]> {
  const offsets: number[] = [];
  let at = 0;
  for (const [hs, es] of records) {
    const parts = encodeWalRecord(salt, hs, es);
    offsets.push(at);
    await file.write(parts, at);
    at += Buffer.concat(parts).length;
  }
  offsets.push(at);
  return offsets;
}

const hs = (term: number, commit: number, vote: string | null = 'a'): HardState => ({ term, vote, commit });

describe('write-ahead records', () => {
  it('reads back every record of its salt in order, with hard state, vote and entries', async () => {
    const file = memoryWal();
    const salt = newWalSalt();
    const offsets = await writeAll(file, salt, [
      [hs(1, 0), ents(1, 3, 1)],
      [hs(2, 3, null), []],
      [hs(2, 4, 'ü-node'), ents(4, 4, 2)],
    ]);
    const { records, end_bytes } = await scanWal(file, salt);
    expect(end_bytes).toBe(offsets[3]);
    expect(records.map((r) => r.hs)).toEqual([hs(1, 0), hs(2, 3, null), hs(2, 4, 'ü-node')]);
    expect(records.map((r) => r.entries.map((e) => `${e.index}/${e.term}/${text.decode(e.data)}`))).toEqual([
      ['1/1/e1', '2/1/e2', '3/1/e3'],
      [],
      ['4/2/e4'],
    ]);
    // another salt reads nothing: an older generation of the file
    expect((await scanWal(file, newWalSalt())).records).toEqual([]);
  });

  it('ends at a record cut short at any byte, and keeps the ones before it', async () => {
    const salt = newWalSalt();
    const whole = memoryWal();
    const offsets = await writeAll(whole, salt, [
      [hs(1, 0), ents(1, 2, 1)],
      [hs(1, 2), ents(3, 5, 1)],
    ]);
    for (let cut = offsets[1]!; cut < offsets[2]!; cut++) {
      const file = memoryWal();
      whole.bytes.copy(file.bytes, 0, 0, cut);
      const { records, end_bytes } = await scanWal(file, salt);
      expect(records.length, `cut at byte ${cut}`).toBe(1);
      expect(end_bytes).toBe(offsets[1]);
    }
  });

  it('ends at a last record torn by sectors (any of its 512-byte sectors lost), keeping the ones before it', async () => {
    const salt = newWalSalt();
    const big: Entry[] = [{ index: 3, term: 1, type: 'normal', data: Buffer.alloc(2000, 7) }];
    for (const lost of [[0], [1], [2, 3], [0, 2]]) {
      const file = memoryWal();
      const offsets = await writeAll(file, salt, [
        [hs(1, 0), ents(1, 2, 1)],
        [hs(1, 2), big],
      ]);
      for (const sector of lost) file.bytes.fill(0, offsets[1]! + sector * 512, offsets[1]! + (sector + 1) * 512);
      const { records, end_bytes } = await scanWal(file, salt);
      expect(records.length, `sectors ${lost.join(', ')} lost`).toBe(1);
      expect(end_bytes).toBe(offsets[1]);
    }
  });

  it('reports a damaged record followed by a good one instead of dropping the rest', async () => {
    const salt = newWalSalt();
    const file = memoryWal();
    const offsets = await writeAll(file, salt, [
      [hs(1, 0), ents(1, 2, 1)],
      [hs(1, 2), ents(3, 5, 1)],
      [hs(1, 5), ents(6, 6, 1)],
    ]);
    file.bytes[offsets[1]! + 30]! ^= 0x40; // inside the second record's body
    await expect(scanWal(file, salt)).rejects.toThrow(LogCorruptError);
    // the same damage in the last record is a write cut short: the records before it are the log
    const last = memoryWal();
    await writeAll(last, salt, [
      [hs(1, 0), ents(1, 2, 1)],
      [hs(1, 2), ents(3, 5, 1)],
    ]);
    last.bytes[offsets[1]! + 30]! ^= 0x40;
    expect((await scanWal(last, salt)).records.length).toBe(1);
  });

  it('creates the file pre-allocated with zeros, keeps an existing one, and never invents a missing one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-wal-'));
    try {
      const path = join(dir, 'log.wal');
      await expect(openWalFile(path, MIN_WAL_BYTES, false)).rejects.toThrow(LogCorruptError);
      await expect(openWalFile(path, MIN_WAL_BYTES - 1, true)).rejects.toThrow(RangeError);
      const file = await openWalFile(path, 2 * MIN_WAL_BYTES, true);
      expect(file.size_bytes).toBe(2 * MIN_WAL_BYTES);
      expect(statSync(path).size).toBe(2 * MIN_WAL_BYTES);
      expect(readFileSync(path).every((b) => b === 0)).toBe(true);
      const salt = newWalSalt();
      await writeAll(file, salt, [[hs(3, 1), ents(1, 1, 3)]]);
      await expect(file.write([Buffer.alloc(16)], file.size_bytes - 8)).rejects.toThrow(RangeError);
      await file.close();
      const again = await openWalFile(path, MIN_WAL_BYTES, false); // its size, not the one asked for
      expect(again.size_bytes).toBe(2 * MIN_WAL_BYTES);
      expect((await scanWal(again, salt)).records.map((r) => r.hs)).toEqual([hs(3, 1)]);
      await again.close();
      writeFileSync(path, Buffer.alloc(100));
      await expect(openWalFile(path, MIN_WAL_BYTES, false)).rejects.toThrow(/holds 100 bytes/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('write-ahead records written inline', () => {
  it('writes on the calling thread: done before the event loop polls again, and scanned back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-wal-inline-'));
    try {
      const path = join(dir, 'log.wal');
      const file = await openWalFile(path, MIN_WAL_BYTES, true);
      const salt = newWalSalt();
      const parts = encodeWalRecord(salt, hs(4, 2), ents(1, 3, 4));
      const bytes = Buffer.concat(parts);
      let settled = false;
      const written = file.write(parts, 0, true).then(() => {
        settled = true;
      });
      // written before the call returned: settled in this turn's microtasks, before the event loop polls once (a
      // worker thread's synced write would be reported by a later poll)
      await new Promise<void>((r) => setImmediate(r));
      expect(settled).toBe(true);
      expect(readFileSync(path).subarray(0, bytes.length).equals(bytes)).toBe(true);
      await written;
      await expect(file.write([Buffer.alloc(16)], file.size_bytes - 8, true)).rejects.toThrow(RangeError);
      expect((await scanWal(file, salt)).records.map((r) => r.hs)).toEqual([hs(4, 2)]);
      await file.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('LevelLog with a write-ahead file', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keel-level-wal-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const open = (size_bytes = MIN_WAL_BYTES): Promise<LevelLog> =>
    LevelLog.open(join(dir, 'log'), { wal: { size_bytes } });

  it('writes entries to the file, not LevelDB, and recovers them on reopen (folded once their half is reused)', async () => {
    const log = await open();
    const segments = log.segmentCount();
    await log.persist({ snapshot: null, entries: ents(1, 5, 1), hardState: hs(1, 0) });
    await log.persist({ snapshot: null, entries: ents(6, 7, 1), hardState: hs(1, 5) });
    await log.setHardState(hs(2, 5, null)); // a new term: a record without entries
    expect(log.segmentCount()).toBe(segments);
    await log.close();
    const again = await open(); // a new generation in the other half: the records stay where they are
    expect(shown(again)).toEqual(ents(1, 7, 1).map((e) => `1:e${e.index}`));
    expect(again.initialState().hardState).toEqual(hs(2, 5, null));
    expect(again.segmentCount()).toBe(segments);
    await again.close();
    const third = await open(); // takes the first half back: its entries go into LevelDB first
    expect(shown(third)).toEqual(ents(1, 7, 1).map((e) => `1:e${e.index}`));
    expect(third.segmentCount()).toBeGreaterThan(segments);
    expect(third.walStats().folds).toBe(1);
    await third.close();
  });

  it('writes a persist marked inline on the calling thread, recovered like the others', async () => {
    const log = await open();
    await log.persist({ snapshot: null, entries: ents(1, 3, 1), hardState: hs(1, 0), inline: true });
    await log.persist({ snapshot: null, entries: ents(4, 5, 1), hardState: hs(1, 3) });
    await log.persist({ snapshot: null, entries: ents(6, 6, 1), hardState: hs(1, 5), inline: true });
    expect(log.walStats().inline).toBe(2);
    await log.close();
    const again = await open();
    expect(shown(again)).toEqual(ents(1, 6, 1).map((e) => `1:e${e.index}`));
    expect(again.initialState().hardState).toEqual(hs(1, 5));
    expect(again.walStats().inline).toBe(0);
    await again.close();
  });

  it('replays records over a compaction recorded after them, also past what LevelDB held', async () => {
    const log = await open();
    await log.persist({ snapshot: null, entries: ents(1, 10, 1), hardState: hs(1, 9) });
    await log.createSnapshot(8, conf3, Buffer.from('s8'));
    await log.compact(8); // LevelDB held no entry: its last index becomes the marker
    await log.persist({ snapshot: null, entries: ents(11, 12, 2), hardState: hs(2, 10) });
    await log.close();
    const again = await open();
    expect(again.firstIndex()).toBe(9);
    expect(shown(again)).toEqual(['1:e9', '1:e10', '2:e11', '2:e12']);
    expect(again.initialState().hardState).toEqual(hs(2, 10));
    await again.close();
  });

  it('replays a conflicting tail overwritten inside the file, with the newer term', async () => {
    const log = await open();
    await log.persist({ snapshot: null, entries: ents(1, 6, 1), hardState: hs(1, 3) });
    await log.persist({ snapshot: null, entries: ents(5, 5, 2, 'x'), hardState: hs(2, 3, 'b') });
    await log.close();
    const again = await open();
    expect(shown(again)).toEqual(['1:e1', '1:e2', '1:e3', '1:e4', '2:x5']);
    expect(again.initialState().hardState).toEqual(hs(2, 3, 'b'));
    await again.close();
  });

  it('overwrites entries LevelDB holds through LevelDB, and starts the file over', async () => {
    let log = await open();
    await log.persist({ snapshot: null, entries: ents(1, 6, 1), hardState: hs(1, 3) });
    await log.close();
    await (await open()).close(); // a second generation
    log = await open(); // a third takes the first one's half back: entries 1..6 folded into LevelDB
    expect(log.walStats().folds).toBe(1);
    await log.persist({ snapshot: null, entries: ents(7, 8, 1), hardState: hs(1, 3) });
    await log.persist({ snapshot: null, entries: ents(5, 5, 2, 'x'), hardState: hs(2, 3, 'b') });
    await log.persist({ snapshot: null, entries: ents(6, 6, 2, 'x'), hardState: hs(2, 4, 'b') });
    // larger than the file: through LevelDB, which then holds everything and starts the file over
    const huge: Entry = { index: 7, term: 2, type: 'normal', data: Buffer.alloc(MIN_WAL_BYTES, 7) };
    await log.persist({ snapshot: null, entries: [huge], hardState: hs(2, 4, 'b') });
    expect(log.walStats().full).toBe(1);
    await log.close();
    const again = await open();
    expect(shown(again).slice(0, 6)).toEqual(['1:e1', '1:e2', '1:e3', '1:e4', '2:x5', '2:x6']);
    expect(again.lastIndex()).toBe(7);
    await again.close();
  });

  it('starts a generation in the other half when one is full, folding the entries of the one it drops', async () => {
    const log = await open();
    const big = (i: number, term: number): Entry => ({ index: i, term, type: 'normal', data: Buffer.alloc(3000, i) });
    for (let i = 1; i <= 60; i++) await log.persist({ snapshot: null, entries: [big(i, 1)], hardState: hs(1, i - 1) });
    expect(log.walStats().switches).toBeGreaterThan(2); // 32 KiB halves: about 10 records each
    expect(log.walStats().folds).toBeGreaterThan(0);
    expect(log.walStats().full).toBe(0);
    await log.close();
    const again = await open();
    expect(again.lastIndex()).toBe(60);
    expect(
      again.entries(1, 61, Infinity).every((e, i) => e.data.length === 3000 && e.data[0] === ((i + 1) & 0xff)),
    ).toBe(true);
    await again.close();
  });

  it("sends a new leader's overwrite to LevelDB when starting a generation folded the entries it overwrites", async () => {
    const file = memoryWal(4096); // halves of 2 KiB: 7 records of one 200-byte entry each
    const log = await LevelLog.open(join(dir, 'log'), { wal: { file } });
    const one = (i: number, term: number): Entry[] => [{ index: i, term, type: 'normal', data: Buffer.alloc(200, i) }];
    for (let i = 1; i <= 14; i++)
      await log.persist({ snapshot: null, entries: one(i, 1), hardState: hs(1, Math.min(i, 2)) });
    expect(log.walStats().switches).toBe(1); // entries 1-7 in the first half, 8-14 in the second
    // Overwriting 5-9: the second half is full, and the generation taking the first back folds entries 1-7
    const overwrite = [5, 6, 7, 8, 9].flatMap((i) => one(i, 2));
    await log.persist({ snapshot: null, entries: overwrite, hardState: hs(2, 2, 'b') });
    expect(log.walStats().switches).toBe(2);
    expect(log.walStats().folds).toBe(1);
    // more generations come and go: LevelDB must never keep entries 5-7 of term 1
    for (let i = 10; i <= 40; i++) await log.persist({ snapshot: null, entries: one(i, 2), hardState: hs(2, 2, 'b') });
    expect(log.walStats().switches).toBeGreaterThan(5);
    await log.close();
    const again = await LevelLog.open(join(dir, 'log'), { wal: { file } });
    expect(again.entries(1, 41, Infinity).map((e) => `${e.index}:${e.term}`)).toEqual(
      Array.from({ length: 40 }, (_, k) => `${k + 1}:${k + 1 < 5 ? 1 : 2}`),
    );
    await again.close();
  });

  it('takes over a log written without the file (format 2, with a deferred snapshot) and keeps it whole', async () => {
    const plain = await LevelLog.open(join(dir, 'log'));
    await plain.persist({ snapshot: null, entries: ents(1, 10, 1), hardState: hs(1, 10) });
    await plain.createSnapshot(8, conf3, null); // a deferred snapshot: format 2
    await plain.compact(6);
    await plain.close();
    const log = await open();
    expect(log.firstIndex()).toBe(7);
    expect(shown(log)).toEqual(['1:e7', '1:e8', '1:e9', '1:e10']);
    expect(log.snapshot()?.deferred).toBe(true);
    await log.persist({ snapshot: null, entries: ents(11, 12, 2), hardState: hs(2, 11, 'b') });
    await log.close();
    const again = await open();
    expect(shown(again)).toEqual(['1:e7', '1:e8', '1:e9', '1:e10', '2:e11', '2:e12']);
    expect(again.initialState().hardState).toEqual(hs(2, 11, 'b'));
    expect(again.snapshot()?.meta.index).toBe(8);
    await again.close();
    const { ClassicLevel } = await import('classic-level');
    const db = new ClassicLevel<Buffer, Buffer>(join(dir, 'log'), { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    await db.open();
    const format = decodeMeta((await db.get(KEY_FORMAT))!, 'format') as { version: number };
    await db.close();
    expect(format.version).toBe(3);
  });

  it('marks the log as needing the file (format 3), and folds it back into LevelDB when opened without it', async () => {
    const log = await open();
    await log.persist({ snapshot: null, entries: ents(1, 3, 1), hardState: hs(1, 2) });
    await log.close();
    const plain = await LevelLog.open(join(dir, 'log')); // no option: the records are folded into LevelDB
    expect(shown(plain)).toEqual(['1:e1', '1:e2', '1:e3']);
    await plain.persist({ snapshot: null, entries: ents(4, 4, 1), hardState: hs(1, 3) });
    await plain.close();
    rmSync(join(dir, 'log.wal')); // no longer needed
    const again = await LevelLog.open(join(dir, 'log'));
    expect(shown(again)).toEqual(['1:e1', '1:e2', '1:e3', '1:e4']);
    await again.close();
    // the format record says 3: a release that does not know the file refuses the log instead of losing entries
    const { ClassicLevel } = await import('classic-level');
    const db = new ClassicLevel<Buffer, Buffer>(join(dir, 'log'), { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    await db.open();
    const format = decodeMeta((await db.get(KEY_FORMAT))!, 'format') as { version: number };
    const state = decodeMeta((await db.get(KEY_STATE))!, 'state') as { wal?: string | null };
    await db.close();
    expect(format.version).toBe(3);
    expect(state.wal ?? null).toBeNull();
  });

  it('refuses a log whose records leave an entry missing, or damaged in the middle of a generation', async () => {
    const log = await open();
    await log.persist({ snapshot: null, entries: ents(1, 3, 1), hardState: hs(1, 2) });
    await log.persist({ snapshot: null, entries: ents(4, 4, 1), hardState: hs(1, 3) });
    await log.close();
    // the generation the state record names, and where its records end
    const { ClassicLevel } = await import('classic-level');
    const db = new ClassicLevel<Buffer, Buffer>(join(dir, 'log'), { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    await db.open();
    const state = decodeMeta((await db.get(KEY_STATE))!, 'state') as { wal: Array<{ salt: string; at: number }> };
    await db.close();
    expect(state.wal.length).toBe(1);
    const gen = state.wal[0]!;
    const salt = Buffer.from(gen.salt, 'hex');
    const path = join(dir, 'log.wal');
    const file = await openWalFile(path, MIN_WAL_BYTES, false);
    const { records, end_bytes } = await scanWal(file, salt, gen.at, gen.at + MIN_WAL_BYTES / 2);
    expect(records.length).toBe(2);
    // a record past the end of the log, as if the ones between were lost: entry 5 is missing
    await file.write(encodeWalRecord(salt, hs(1, 3), ents(6, 6, 1)), end_bytes);
    await file.close();
    await expect(open()).rejects.toThrow(/entry 5 .*entry missing/);
    // a flipped byte in the first record, with a good one after it
    const bytes = readFileSync(path);
    bytes[gen.at + 30]! ^= 1;
    writeFileSync(path, bytes);
    await expect(open()).rejects.toThrow(/damaged record at offset/);
  });

  for (const [part, offset] of [
    ['magic', 0],
    ['body length', 4],
    ['checksum', 8],
    ['salt', 12],
    ['body', 30],
  ] as const) {
    it(`refuses a log whose first record's ${part} is damaged, with good records after it`, async () => {
      const file = memoryWal();
      const log = await LevelLog.open(join(dir, 'log'), { wal: { file } });
      for (let i = 1; i <= 5; i++) {
        await log.persist({ snapshot: null, entries: ents(i, i, 1), hardState: hs(1, i - 1) });
      }
      await log.close();
      file.bytes[offset]! ^= 0x40; // the generation of that open starts at offset 0
      await expect(LevelLog.open(join(dir, 'log'), { wal: { file } })).rejects.toThrow(/damaged record at offset 0/);
    });
  }

  it('keeps the log when the last record alone is damaged: a write cut short', async () => {
    const file = memoryWal();
    const log = await LevelLog.open(join(dir, 'log'), { wal: { file } });
    for (let i = 1; i <= 3; i++) {
      await log.persist({ snapshot: null, entries: ents(i, i, 1), hardState: hs(1, i - 1) });
    }
    await log.close();
    const { records, end_bytes } = await scanWal(file, file.bytes.subarray(12, 20), 0, file.size_bytes / 2);
    expect(records.length).toBe(3);
    // the last record's second half zeroed, as a write cut short leaves it
    const lastStart = end_bytes - Buffer.concat(encodeWalRecord(newWalSalt(), hs(1, 2), ents(3, 3, 1))).length;
    file.bytes.fill(0, lastStart + 25, end_bytes);
    const again = await LevelLog.open(join(dir, 'log'), { wal: { file } });
    expect(shown(again)).toEqual(['1:e1', '1:e2']);
    await again.close();
  });

  it("replays a record's cut of the log even when compaction dropped all its entries", async () => {
    const log = await open();
    await log.persist({ snapshot: null, entries: ents(1, 4, 1), hardState: hs(1, 0) });
    await log.persist({ snapshot: null, entries: [...ents(5, 5, 1), ...ents(6, 10, 3)], hardState: hs(3, 4) });
    // a leader of term 4 overwrites from 5: the log ends at 5 now
    await log.persist({ snapshot: null, entries: ents(5, 5, 4, 'x'), hardState: hs(4, 5, null) });
    await log.createSnapshot(5, conf3, Buffer.from('s5'));
    await log.compact(5);
    await log.close();
    const again = await open();
    expect(again.firstIndex()).toBe(6);
    expect(again.lastIndex()).toBe(5); // not 6-10 of term 3 back from the second record
    await again.close();
  });

  it('refuses to open a log whose write-ahead file is missing', async () => {
    const log = await open();
    await log.persist({ snapshot: null, entries: ents(1, 3, 1), hardState: hs(1, 2) });
    await log.close();
    rmSync(join(dir, 'log.wal'));
    await expect(open()).rejects.toThrow(/log\.wal is missing/);
  });
});
