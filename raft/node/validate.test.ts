import { describe, expect, it } from 'vitest';
import { MAX_SNAPSHOT_ADDRESS_BYTES } from '../transport/codec.js';
import type { Message } from '../types.js';
import { encodeAddresses } from './conf-context.js';
import { malformedReason } from './validate.js';

const chunk = (addresses?: Record<string, string>): Message => ({
  type: 'snapshot',
  from: 'a',
  to: 'b',
  term: 3,
  logTerm: 0,
  index: 0,
  commit: 0,
  reject: false,
  rejectHint: 0,
  entries: [],
  snapshot: {
    meta: {
      index: 10,
      term: 2,
      conf: { voters: ['a', 'b'], learners: ['c'], votersOutgoing: [], learnersNext: [], autoLeave: false },
    },
    offset_bytes: 0,
    data: new Uint8Array([1]),
    done: true,
  },
  ...(addresses === undefined ? {} : { context: encodeAddresses(addresses) }),
});

describe('the member addresses a snapshot chunk carries in its context', () => {
  it('are accepted for members of its configuration, or absent', () => {
    expect(malformedReason(chunk(), 'b')).toBeNull();
    expect(malformedReason(chunk({ a: 'a:1', b: 'b:1', c: 'c:1' }), 'b')).toBeNull();
    expect(malformedReason(chunk({ a: 'x'.repeat(MAX_SNAPSHOT_ADDRESS_BYTES) }), 'b')).toBeNull();
  });

  it('are refused for a non-member, empty or too long', () => {
    expect(malformedReason(chunk({ r: 'r:1' }), 'b')).toMatch(/not a member/);
    expect(malformedReason(chunk({ a: '' }), 'b')).toMatch(/empty/);
    expect(malformedReason(chunk({ a: 'é'.repeat(MAX_SNAPSHOT_ADDRESS_BYTES / 2 + 1) }), 'b')).toMatch(/too long/);
  });
});
