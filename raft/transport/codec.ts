/**
 * Wire framing of Raft messages. Each message is one msgpack value — a positional array rather than a map, so
 * neither side spends time on field names — and a frame (one WebSocket binary message) is several packed
 * messages back to back, bounded by the frame size limit. decodeFrame validates every field.
 *
 *   message: [type, from, to, term, logTerm, index, commit, reject, rejectHint, rejectTerm|nil,
 *             entries|nil, snapshot|nil, context|nil]
 *   entries: [index₀, term₀, type₀, data₀, term₁, type₁, data₁, …]   (contiguous indexes)
 *   snapshot: [index, term, voters, learners, votersOutgoing, learnersNext, autoLeave, offset_bytes, data, done]
 */
import { Packr } from 'msgpackr';
import type { ConfState, Entry, EntryType, Message, MessageType, SnapshotChunk } from '../types.js';

const packr = new Packr({ useRecords: false, moreTypes: false });

const MESSAGE_TYPES: MessageType[] = [
  'preVote',
  'preVoteResp',
  'vote',
  'voteResp',
  'append',
  'appendResp',
  'heartbeat',
  'heartbeatResp',
  'snapshot',
  'snapshotResp',
  'timeoutNow',
  'readIndex',
  'readIndexResp',
  'propose',
  'transferLeader',
];
const MESSAGE_CODES = new Map(MESSAGE_TYPES.map((t, i) => [t, i]));
const ENTRY_TYPES: EntryType[] = ['normal', 'conf', 'noop'];
const ENTRY_CODES: Record<EntryType, number> = { normal: 0, conf: 1, noop: 2 };
const FIELDS = 13;

/**
 * Framing allowance on top of a message's payload (the entries' sizes as the core counts them with
 * entrySizeBytes, or a snapshot chunk's data): the fixed fields, node ids, a snapshot's member lists, contexts.
 * Each entry encodes in at most 15 bytes besides its data (term ≤ 9, type 1, bin header ≤ 5), less than the
 * ENTRY_OVERHEAD_BYTES the core counts it for, so an append of at most maxMsgBytes encodes in at most
 * maxMsgBytes + this. 32 KiB covers ids of up to 128 bytes in a configuration of 16 voters and 16 learners (both
 * listed twice while joint) with, in the context of a snapshot chunk, an address of MAX_SNAPSHOT_ADDRESS_BYTES for
 * each (tested in codec.test.ts).
 */
export const MESSAGE_OVERHEAD_BYTES = 32 * 1024;
/** Longest member address a snapshot chunk may carry (node/validate.ts). */
export const MAX_SNAPSHOT_ADDRESS_BYTES = 512;

export class FrameError extends Error {
  constructor(reason: string) {
    super(`raft transport: bad frame: ${reason}`);
    this.name = 'FrameError';
  }
}

function encodeEntries(entries: Entry[]): unknown[] | null {
  if (entries.length === 0) return null;
  const out: unknown[] = [entries[0]!.index];
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    if (e.index !== entries[0]!.index + i) throw new Error(`raft transport: non-contiguous entries at ${e.index}`);
    out.push(e.term, ENTRY_CODES[e.type], e.data);
  }
  return out;
}

function encodeSnapshot(c: SnapshotChunk | undefined): unknown[] | null {
  if (c === undefined) return null;
  const { conf } = c.meta;
  return [
    c.meta.index,
    c.meta.term,
    conf.voters,
    conf.learners,
    conf.votersOutgoing,
    conf.learnersNext,
    conf.autoLeave,
    c.offset_bytes,
    c.data,
    c.done,
  ];
}

export function encodeMessage(m: Message): Buffer {
  const code = MESSAGE_CODES.get(m.type);
  if (code === undefined) throw new Error(`raft transport: unknown message type ${m.type}`);
  return packr.pack([
    code,
    m.from,
    m.to,
    m.term,
    m.logTerm,
    m.index,
    m.commit,
    m.reject,
    m.rejectHint,
    m.rejectTerm ?? null,
    encodeEntries(m.entries),
    encodeSnapshot(m.snapshot),
    m.context ?? null,
  ]);
}

const isNat = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isBytes = (v: unknown): v is Uint8Array => v instanceof Uint8Array;
const isIds = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

function decodeEntries(v: unknown): Entry[] {
  if (v === null) return [];
  if (!Array.isArray(v) || v.length < 4 || (v.length - 1) % 3 !== 0 || !isNat(v[0])) {
    throw new FrameError('malformed entries');
  }
  const first = v[0];
  const out: Entry[] = [];
  for (let i = 1; i < v.length; i += 3) {
    const term = v[i];
    const type = ENTRY_TYPES[v[i + 1] as number];
    const data = v[i + 2];
    if (!isNat(term) || type === undefined || !isBytes(data)) throw new FrameError('malformed entry');
    out.push({ index: first + (i - 1) / 3, term, type, data });
  }
  return out;
}

function decodeSnapshot(v: unknown): SnapshotChunk | undefined {
  if (v === null) return undefined;
  if (!Array.isArray(v) || v.length !== 10) throw new FrameError('malformed snapshot chunk');
  const [index, term, voters, learners, votersOutgoing, learnersNext, autoLeave, offset, data, done] = v;
  if (
    !isNat(index) ||
    !isNat(term) ||
    !isIds(voters) ||
    !isIds(learners) ||
    !isIds(votersOutgoing) ||
    !isIds(learnersNext) ||
    typeof autoLeave !== 'boolean' ||
    !isNat(offset) ||
    !isBytes(data) ||
    typeof done !== 'boolean'
  ) {
    throw new FrameError('malformed snapshot chunk');
  }
  const conf: ConfState = { voters, learners, votersOutgoing, learnersNext, autoLeave };
  return { meta: { index, term, conf }, offset_bytes: offset, data, done };
}

function decodeMessage(v: unknown): Message {
  if (!Array.isArray(v) || v.length !== FIELDS) throw new FrameError('not a raft message');
  const [code, from, to, term, logTerm, index, commit, reject, rejectHint, rejectTerm, entries, snapshot, context] = v;
  const type = MESSAGE_TYPES[code as number];
  if (
    type === undefined ||
    typeof from !== 'string' ||
    typeof to !== 'string' ||
    !isNat(term) ||
    !isNat(logTerm) ||
    !isNat(index) ||
    !isNat(commit) ||
    typeof reject !== 'boolean' ||
    !isNat(rejectHint) ||
    !(rejectTerm === null || isNat(rejectTerm)) ||
    !(context === null || isBytes(context))
  ) {
    throw new FrameError('malformed raft message');
  }
  const m: Message = {
    type,
    from,
    to,
    term,
    logTerm,
    index,
    entries: decodeEntries(entries),
    commit,
    reject,
    rejectHint,
  };
  if (rejectTerm !== null) m.rejectTerm = rejectTerm;
  const chunk = decodeSnapshot(snapshot);
  if (chunk !== undefined) m.snapshot = chunk;
  if (context !== null) m.context = context;
  return m;
}

/** Decodes one frame; throws FrameError on anything that is not a list of well-formed messages. */
export function decodeFrame(frame: Uint8Array, maxMessages: number): Message[] {
  let values: unknown[];
  try {
    values = packr.unpackMultiple(frame) as unknown[];
  } catch (err) {
    throw new FrameError((err as Error).message);
  }
  if (values.length > maxMessages) throw new FrameError(`${values.length} messages exceed the limit ${maxMessages}`);
  return values.map(decodeMessage);
}

/** A deep copy through the wire codec (what the in-memory transport delivers). */
export function roundTrip(m: Message): Message {
  const frame = encodeMessage(m);
  return decodeFrame(frame, 1)[0]!;
}
