/**
 * Joining a cluster (src/cluster/join.ts): a join that meets a change of leader or a pending membership change is
 * asked again, the Raft code travelling over the peer API; any other error ends it at once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RaftError } from '../../raft/index.js';
import { askToJoin, JOIN_ATTEMPTS } from '../../src/cluster/join.js';
import { type PeerHandlers, peerClient, raftCodeOf } from '../../src/cluster/peer-api.js';
import { servePeerApi } from '../support/peer-api-server.js';

const cleanup: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A member's peer API whose addMember is `add`; returns its address. */
async function member(add: PeerHandlers['addMember']): Promise<string> {
  const unused = () => Promise.reject(new Error('not served here'));
  const handlers = {
    addMember: add,
    forward: unused,
    readIndex: unused,
    removeMember: unused,
    transferLeadership: unused,
  } as unknown as PeerHandlers;
  return servePeerApi(handlers, null, cleanup);
}

async function join(address: string, retries: string[] = []): Promise<void> {
  const c = peerClient(address);
  try {
    await askToJoin(
      c,
      address,
      { id: 'n9', address: '127.0.0.1:9' },
      {
        timeout_ms: 5_000,
        stopped: () => false,
        firstWait_ms: 1,
        onRetry: (_, code) => retries.push(code),
      },
    );
  } finally {
    c.close();
  }
}

describe('joining a cluster', () => {
  it('asks again after a lost leadership or a pending change, and is done once the member adds it', async () => {
    const refusals = [
      new RaftError('leadership-lost', 'n1 lost leadership'),
      new RaftError('conf-change-refused', 'another change is pending'),
    ];
    const asked: Array<[string, string, boolean]> = [];
    const address = await member(async (id, addr, voter) => {
      asked.push([id, addr, voter]);
      const refusal = refusals.shift();
      if (refusal) throw refusal;
    });
    const retries: string[] = [];
    await join(address, retries);
    expect(retries).toEqual(['leadership-lost', 'conf-change-refused']);
    expect(asked).toEqual(Array(3).fill(['n9', '127.0.0.1:9', true]));
  });

  it('carries the Raft code of a refusal the member passed on from the leader', async () => {
    // a member that is not the leader asks the leader, and answers with what the leader answered
    const leader = await member(async () => {
      throw new RaftError('leadership-lost', 'lost it');
    });
    const upstream = peerClient(leader);
    cleanup.push(() => upstream.close());
    const follower = await member((id, address, voter) => upstream.api.addMember.mutate({ id, address, voter }));
    const c = peerClient(follower);
    cleanup.push(() => c.close());
    const err = await c.api.addMember.mutate({ id: 'n9', address: 'x:1', voter: true }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(raftCodeOf(err)).toBe('leadership-lost');
  });

  it('stops at once on any other error, and after JOIN_ATTEMPTS refusals', async () => {
    let asked = 0;
    const refusing = await member(async () => {
      asked++;
      throw new RaftError('stopped', 'the member is stopping');
    });
    await expect(join(refusing)).rejects.toThrow(/the member is stopping/);
    expect(asked).toBe(1);

    asked = 0;
    const plain = await member(async () => {
      asked++;
      throw new Error('not a Raft refusal');
    });
    await expect(join(plain)).rejects.toThrow(/not a Raft refusal/);
    expect(asked).toBe(1);

    asked = 0;
    const busy = await member(async () => {
      asked++;
      throw new RaftError('conf-change-refused', 'always pending');
    });
    await expect(join(busy)).rejects.toThrow(/always pending/);
    expect(asked).toBe(JOIN_ATTEMPTS);
  });
});
