/**
 * Encoding of ConfChange in `conf` entries (msgpackr). An empty change (leave joint, no context) encodes
 * to zero bytes, so the leader's automatic leave-joint entry never counts against maxUncommittedBytes.
 */
import { pack, unpack } from 'msgpackr';
import type { ConfChange, ConfChangeSingle, ConfChangeType } from '../types.js';

const FORMAT_VERSION = 1;
const TYPE_CODES: Record<ConfChangeType, number> = { addVoter: 1, addLearner: 2, removeNode: 3 };
const CODE_TYPES: Record<number, ConfChangeType> = { 1: 'addVoter', 2: 'addLearner', 3: 'removeNode' };

export function encodeConfChange(cc: ConfChange): Uint8Array {
  if (cc.changes.length === 0 && cc.transition === undefined && cc.context === undefined) return new Uint8Array(0);
  const flat: (number | string)[] = [];
  for (const c of cc.changes) {
    const code = TYPE_CODES[c.type];
    if (code === undefined) throw new Error(`raft: unknown conf change type ${String(c.type)}`);
    if (typeof c.node !== 'string' || c.node.length === 0) throw new Error('raft: conf change with an empty node id');
    flat.push(code, c.node);
  }
  const transition = cc.transition === 'joint' ? 2 : cc.transition === 'auto' ? 1 : 0;
  // Copy out of msgpackr's shared buffer so the entry does not pin it.
  return new Uint8Array(pack([FORMAT_VERSION, flat, transition, cc.context ?? null]));
}

export function decodeConfChange(b: Uint8Array): ConfChange {
  if (b.byteLength === 0) return { changes: [] };
  const v: unknown = unpack(b);
  if (!Array.isArray(v) || v.length !== 4 || v[0] !== FORMAT_VERSION || !Array.isArray(v[1])) {
    throw new Error('raft: malformed conf change encoding');
  }
  const flat = v[1] as unknown[];
  if (flat.length % 2 !== 0) throw new Error('raft: malformed conf change list');
  const changes: ConfChangeSingle[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    const type = CODE_TYPES[flat[i] as number];
    const node = flat[i + 1];
    if (type === undefined || typeof node !== 'string' || node.length === 0) {
      throw new Error('raft: malformed conf change item');
    }
    changes.push({ type, node });
  }
  const cc: ConfChange = { changes };
  if (v[2] === 1) cc.transition = 'auto';
  else if (v[2] === 2) cc.transition = 'joint';
  else if (v[2] !== 0) throw new Error('raft: malformed conf change transition');
  if (v[3] !== null) {
    if (!(v[3] instanceof Uint8Array)) throw new Error('raft: malformed conf change context');
    cc.context = new Uint8Array(v[3]);
  }
  return cc;
}
