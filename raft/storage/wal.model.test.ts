/**
 * LevelLog with a small write-ahead file against a model of the log: a seeded random sequence of appends, a new
 * leader's overwrites, term and vote changes, commit moves, snapshots with compactions (often up to the commit
 * index, right after an overwrite), installed snapshots and reopens. After every reopen the log must equal the
 * model exactly. The file is 2–4 KiB, so halves fill and generations are dropped (with folds) all the time.
 * `WAL_MODEL_SEEDS=N` runs more seeds.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { SeededRandom } from '../random.js';
import type { Entry, HardState, SnapshotInfo } from '../types.js';
import { LevelLog } from './level-log.js';
import { conf3, memoryWal } from './log-testkit.js';

const SEEDS = Number(process.env.WAL_MODEL_SEEDS ?? 60);
const STEPS = 300;

interface Model {
  marker: number;
  markerTerm: number;
  /** Entries marker+1 … as "term:data". */
  ents: string[];
  hs: HardState;
  snap: number;
}

const shown = (e: Entry): string => `${e.term}:${Buffer.from(e.data).toString()}`;

function view(log: LevelLog): {
  marker: number;
  markerTerm: number;
  ents: string[];
  term: number;
  vote: string | null;
} {
  const first = log.firstIndex();
  const { hardState } = log.initialState();
  return {
    marker: first - 1,
    markerTerm: log.term(first - 1),
    ents: log.lastIndex() >= first ? log.entries(first, log.lastIndex() + 1, Infinity).map(shown) : [],
    term: hardState.term,
    vote: hardState.vote,
  };
}

for (let seed = 1; seed <= SEEDS; seed++) {
  it(`matches the model after every reopen (seed ${seed})`, async () => {
    const rnd = new SeededRandom(seed);
    const dir = mkdtempSync(join(tmpdir(), 'keel-wal-model-'));
    const file = memoryWal(2048 + rnd.int(3) * 1024);
    const open = (): Promise<LevelLog> => LevelLog.open(join(dir, 'log'), { maxSegment_bytes: 256, wal: { file } });
    let log = await open();
    const m: Model = { marker: 0, markerTerm: 0, ents: [], hs: { term: 0, vote: null, commit: 0 }, snap: 0 };
    const last = (): number => m.marker + m.ents.length;
    const termAt = (i: number): number =>
      i === m.marker ? m.markerTerm : Number(m.ents[i - m.marker - 1]!.split(':')[0]);
    const trace: string[] = [];
    let seq = 0;
    try {
      for (let step = 0; step < STEPS; step++) {
        const r = rnd.int(100);
        seq++;
        const mk = (i: number, term: number): Entry => ({
          index: i,
          term,
          type: 'normal',
          data: Buffer.from(`w${seq}.${i}${'x'.repeat(rnd.int(60))}`),
        });
        if (m.hs.term === 0 || r < 35) {
          if (m.hs.term === 0) m.hs = { ...m.hs, term: 1 };
          const n = 1 + rnd.int(4);
          const es = Array.from({ length: n }, (_, k) => mk(last() + 1 + k, m.hs.term));
          const commit = rnd.int(2) ? m.hs.commit : last() + n - rnd.int(2);
          m.hs = { ...m.hs, commit: Math.max(m.hs.commit, commit) };
          m.ents.push(...es.map(shown));
          trace.push(`append ${es[0]!.index}..${es[n - 1]!.index}@${m.hs.term} c${m.hs.commit}`);
          await log.persist({ snapshot: null, entries: es, hardState: { ...m.hs } });
        } else if (r < 50 && last() > Math.max(m.hs.commit, m.marker)) {
          // a new leader overwrites the uncommitted tail
          const lo = Math.max(m.hs.commit, m.marker) + 1;
          const from = lo + rnd.int(last() - lo + 1);
          const term = m.hs.term + 1;
          const es = Array.from({ length: 1 + rnd.int(2) }, (_, k) => mk(from + k, term));
          m.hs = { term, vote: null, commit: m.hs.commit };
          if (rnd.int(2)) m.hs.commit = es[es.length - 1]!.index;
          m.ents.splice(from - m.marker - 1, Infinity, ...es.map(shown));
          trace.push(`overwrite ${from}..${es[es.length - 1]!.index}@${term} c${m.hs.commit}`);
          await log.persist({ snapshot: null, entries: es, hardState: { ...m.hs } });
        } else if (r < 55) {
          m.hs = { term: m.hs.term + 1, vote: rnd.int(2) ? 'b' : null, commit: m.hs.commit };
          trace.push(`hard state ${JSON.stringify(m.hs)}`);
          await log.setHardState({ ...m.hs });
        } else if (r < 60 && m.hs.vote === null) {
          m.hs = { ...m.hs, vote: 'c' };
          trace.push('vote c');
          await log.setHardState({ ...m.hs });
        } else if (r < 65 && last() > m.hs.commit) {
          m.hs = { ...m.hs, commit: last() };
          trace.push(`commit ${last()}`);
          await log.setHardState({ ...m.hs });
        } else if (r < 78 && m.hs.commit > Math.max(m.snap, m.marker)) {
          const floor = Math.max(m.snap, m.marker);
          const index = rnd.int(2) ? m.hs.commit : floor + 1 + rnd.int(m.hs.commit - floor);
          await log.createSnapshot(index, conf3, Buffer.from(`s${seq}`));
          m.snap = index;
          const to = rnd.int(2) ? index : m.marker + 1 + rnd.int(index - m.marker);
          if (to > m.marker) {
            trace.push(`snapshot ${index}, compact ${to}`);
            m.markerTerm = termAt(to);
            m.ents.splice(0, to - m.marker);
            m.marker = to;
            await log.compact(to);
          }
        } else if (r < 82) {
          // a snapshot received from the leader, with a few entries after it
          const index = Math.max(last(), m.snap) + 1 + rnd.int(3);
          const term = m.hs.term;
          const data = Buffer.from(`installed${seq}`);
          const snap: SnapshotInfo = { meta: { index, term, conf: conf3 }, size_bytes: data.length };
          const es = Array.from({ length: rnd.int(3) }, (_, k) => mk(index + 1 + k, term));
          await log.receiveSnapshot([{ meta: snap.meta, offset_bytes: 0, data, done: true }]);
          m.hs = { ...m.hs, commit: index };
          trace.push(`install ${index} +${es.length}`);
          await log.persist({ snapshot: snap, entries: es, hardState: { ...m.hs } });
          m.marker = index;
          m.markerTerm = term;
          m.snap = index;
          m.ents = es.map(shown);
        } else if (r < 92) {
          trace.push('reopen');
          await log.close();
          log = await open();
          expect(view(log), trace.slice(-25).join('\n')).toEqual({
            marker: m.marker,
            markerTerm: m.markerTerm,
            ents: m.ents,
            term: m.hs.term,
            vote: m.hs.vote,
          });
        }
      }
      await log.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
