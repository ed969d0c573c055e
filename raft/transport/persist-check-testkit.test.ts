import { describe, expect, it } from 'vitest';
import { MemoryDurableLog } from '../storage/memory-durable-log.js';
import type { Entry, Message } from '../types.js';
import { PersistCheckingTransport } from './persist-check-testkit.js';
import type { Transport } from './transport.js';

const entry = (index: number, term: number): Entry => ({ index, term, type: 'normal', data: new Uint8Array([index]) });

function message(m: Partial<Message> & Pick<Message, 'type' | 'term'>): Message {
  return { from: 'a', to: 'b', logTerm: 0, index: 0, entries: [], commit: 0, reject: false, rejectHint: 0, ...m };
}

/** A checking transport for node `a` over a log holding entries 1..2 of term 1, hard state term 2, vote a. */
async function setup(leaderAppendsBeforePersist = false) {
  const log = new MemoryDurableLog();
  await log.persist({
    snapshot: null,
    entries: [entry(1, 1), entry(2, 1)],
    hardState: { term: 2, vote: 'a', commit: 1 },
  });
  const sent: Message[] = [];
  let deliver: (m: Message) => void = () => undefined;
  const inner = {
    id: 'a',
    maxPayload_bytes: Number.POSITIVE_INFINITY,
    send: (msgs: Message[]) => sent.push(...msgs),
    onMessage: (h: (m: Message) => void) => {
      deliver = h;
    },
  } as unknown as Transport;
  const violations: string[] = [];
  const t = new PersistCheckingTransport(inner, log, violations, { leaderAppendsBeforePersist });
  t.onMessage(() => undefined);
  return { log, t, sent, violations, receive: (m: Message) => deliver(m) };
}

describe('PersistCheckingTransport', () => {
  it('passes what is durable and forwards every message', async () => {
    const { t, sent, violations } = await setup();
    const ok = [
      message({ type: 'vote', term: 2, index: 2, logTerm: 1 }),
      message({ type: 'preVote', term: 3 }),
      message({ type: 'appendResp', term: 2, index: 2 }),
      message({ type: 'append', term: 2, index: 0, entries: [entry(1, 1), entry(2, 1)] }),
      message({ type: 'appendResp', term: 2, index: 9, reject: true }),
    ];
    t.send(ok);
    expect(violations).toEqual([]);
    expect(sent).toHaveLength(ok.length);
  });

  it('flags a term, a vote or a grant that is not on disk yet', async () => {
    const { t, violations } = await setup();
    t.send([message({ type: 'heartbeat', term: 3 })]);
    t.send([message({ type: 'voteResp', term: 2, to: 'c' })]); // the durable vote in term 2 is for a
    t.send([message({ type: 'vote', term: 2, from: 'a' }), message({ type: 'voteResp', term: 2, to: 'a' })]);
    expect(violations).toEqual([
      'a→b heartbeat term 3: durable term is 2',
      'a→c voteResp term 2: durable vote in term 2 is a',
    ]);
  });

  it('flags an acknowledgement beyond the durable log or of another term than the leader sent', async () => {
    const { t, violations, receive } = await setup();
    t.send([message({ type: 'appendResp', term: 2, index: 3 })]);
    // The leader of term 2 sent index 2 with term 2; the durable entry at 2 has term 1 (not yet overwritten).
    receive(message({ type: 'append', term: 2, from: 'b', to: 'a', index: 1, logTerm: 1, entries: [entry(2, 2)] }));
    t.send([message({ type: 'appendResp', term: 2, to: 'b', index: 2 })]);
    expect(violations).toEqual([
      'a→b appendResp term 2: index 3 is beyond the durable last index 2',
      'a→b appendResp term 2: durable term at 2 is 1, the leader sent 2',
    ]);
  });

  it("checks a leader's own entries unless it may send them while writing them", async () => {
    const strict = await setup(false);
    strict.t.send([message({ type: 'append', term: 2, index: 2, logTerm: 1, entries: [entry(3, 2)] })]);
    expect(strict.violations).toEqual(['a→b append term 2: index 3 is beyond the durable last index 2']);
    const early = await setup(true);
    early.t.send([message({ type: 'append', term: 2, index: 2, logTerm: 1, entries: [entry(3, 2)] })]);
    expect(early.violations).toEqual([]);
  });
});
