/**
 * Structural checks on a message received from a peer, before it reaches the core. A message failing them is
 * dropped (reported through onError): it is malformed, and no peer's bug or malice may stop this node. Anything
 * the core throws on a message that passes them is a violated invariant (or a storage failure) and is fatal.
 */
import { confMembers } from '../storage/durable-log.js';
import { MAX_SNAPSHOT_ADDRESS_BYTES } from '../transport/codec.js';
import type { Message, NodeId, SnapshotMeta } from '../types.js';
import { decodeAddresses } from './conf-context.js';

const isNat = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/** Why `m` cannot be handed to the core of node `self`, or null when it can. */
export function malformedReason(m: Message, self: NodeId): string | null {
  if (m.to !== self) return `addressed to ${m.to}`;
  if (typeof m.from !== 'string' || m.from.length === 0 || m.from === self) return `bad sender ${String(m.from)}`;
  if (!isNat(m.term) || !isNat(m.logTerm) || !isNat(m.index) || !isNat(m.commit) || !isNat(m.rejectHint)) {
    return 'a numeric field is not a non-negative integer';
  }
  if (m.rejectTerm !== undefined && !isNat(m.rejectTerm)) return 'rejectTerm is not a non-negative integer';
  if (!Array.isArray(m.entries)) return 'entries is not a list';
  if (m.entries.length > 0) {
    if (m.type !== 'append') return `${m.type} carries entries`;
    let prevTerm = m.logTerm;
    for (let i = 0; i < m.entries.length; i++) {
      const e = m.entries[i]!;
      if (e.index !== m.index + 1 + i) return `entry ${e.index} does not follow index ${m.index + i}`;
      if (!isNat(e.term) || e.term < prevTerm || e.term > m.term) {
        return `entry ${e.index} has term ${e.term} (previous ${prevTerm}, message term ${m.term})`;
      }
      if (!(e.data instanceof Uint8Array)) return `entry ${e.index} has no data bytes`;
      prevTerm = e.term;
    }
  }
  if (m.type === 'snapshot') {
    const c = m.snapshot;
    if (c === undefined) return 'snapshot message without a chunk';
    if (!isNat(c.offset_bytes) || !isNat(c.meta.index) || !isNat(c.meta.term) || c.meta.term > m.term) {
      return 'malformed snapshot chunk';
    }
    if (!(c.data instanceof Uint8Array)) return 'snapshot chunk without data bytes';
    if (m.context !== undefined) {
      const bad = badAddresses(c.meta, decodeAddresses(m.context));
      if (bad !== null) return bad;
    }
  }
  return null;
}

/**
 * Why the member addresses a snapshot chunk carries in its context (SnapshotMeta.addresses, RaftNode.withAddresses)
 * are not acceptable: one per member of its configuration at most, each a bounded non-empty string. Null if fine.
 */
function badAddresses(meta: SnapshotMeta, addresses: Record<string, string>): string | null {
  const members = confMembers(meta.conf);
  for (const [id, address] of Object.entries(addresses)) {
    if (!members.has(id)) return `snapshot address for ${id}, not a member of its configuration`;
    if (typeof address !== 'string' || address.length === 0) return `snapshot address for ${id} is empty`;
    if (Buffer.byteLength(address) > MAX_SNAPSHOT_ADDRESS_BYTES) return `snapshot address for ${id} is too long`;
  }
  return null;
}
