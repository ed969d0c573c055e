/**
 * addMember asked again for a member already added (a join retried after its outcome was unknown) finishes what
 * the first request started instead of changing the member: in-process, two controllers over mutual-TLS peer links.
 */

import { TRPCClientError } from '@trpc/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RaftError } from '../../raft/index.js';
import { type ClusterNode, MemberConflictError } from '../../src/cluster/node.js';
import { MembershipRefusal } from '../../src/cluster/peer-api.js';
import { inProcessCluster } from './in-process.js';
import { until } from './support.js';

const setup = inProcessCluster('keel-add-member-', ['n1', 'n2']);
const nodes = setup.nodes;

beforeAll(() => setup.start(), 60_000);
afterAll(() => setup.stop());

describe('addMember asked again', () => {
  it('leaves a voter already there at that address as it is, on the leader and through a follower', async () => {
    const [a, b] = nodes.map((n) => n.ctl.cluster!) as [ClusterNode, ClusterNode];
    const leader = a.raft.leaderId() === 'n1' ? a : b;
    const follower = leader === a ? b : a;
    const n2 = b.peerAddress;
    const before = leader.raft.status();
    expect(before.conf.voters.slice().sort()).toEqual(['n1', 'n2']);

    await leader.addMember('n2', n2, true);
    await follower.addMember('n2', n2, true);

    const after = leader.raft.status();
    expect(after.conf.voters.slice().sort()).toEqual(['n1', 'n2']);
    expect(after.conf.learners).toEqual([]);
    // no membership change proposed: the log did not grow
    expect(after.lastIndex).toBe(before.lastIndex);
  });

  it('never demotes: a voter asked for as a non-voter stays a voter, the leader included', async () => {
    const [a, b] = nodes.map((n) => n.ctl.cluster!) as [ClusterNode, ClusterNode];
    const leader = a.raft.leaderId() === 'n1' ? a : b;
    const follower = leader === a ? b : a;
    const before = leader.raft.status();

    await leader.addMember(follower.id, follower.peerAddress, false);
    await follower.addMember(follower.id, follower.peerAddress, false);
    await follower.addMember(leader.id, leader.peerAddress, false);

    const after = leader.raft.status();
    expect(after.conf.voters.slice().sort()).toEqual(['n1', 'n2']);
    expect(after.conf.learners).toEqual([]);
    expect(after.lastIndex).toBe(before.lastIndex);
    expect(leader.raft.leaderId()).toBe(leader.id);
  });

  it('refuses a voter at another address (MemberConflictError on the leader, its message through a follower)', async () => {
    const [a, b] = nodes.map((n) => n.ctl.cluster!) as [ClusterNode, ClusterNode];
    const leader = a.raft.leaderId() === 'n1' ? a : b;
    const follower = leader === a ? b : a;
    const before = leader.raft.status();

    await expect(leader.addMember(follower.id, '127.0.0.1:1', true)).rejects.toBeInstanceOf(MemberConflictError);
    await expect(follower.addMember(follower.id, '127.0.0.1:1', false)).rejects.toThrow(
      `member ${follower.id} is a voter at ${follower.peerAddress}: remove it before adding it at 127.0.0.1:1`,
    );

    const after = leader.raft.status();
    expect(after.conf.voters.slice().sort()).toEqual(['n1', 'n2']);
    expect(after.conf.learners).toEqual([]);
    expect(after.lastIndex).toBe(before.lastIndex);
  });
});

describe('a membership call made on the leader for a follower', () => {
  it("throws the leader's Raft refusal as the RaftError it was, with its code", async () => {
    const [a, b] = nodes.map((n) => n.ctl.cluster!) as [ClusterNode, ClusterNode];
    const follower = a.raft.leaderId() === 'n1' ? b : a;
    // three changes at once (learners at an address nobody serves): the leader takes the first and refuses the
    // others while it is pending
    const ghosts = ['ghost1', 'ghost2', 'ghost3'];
    const outcomes = await Promise.allSettled(ghosts.map((id) => follower.addMember(id, '127.0.0.1:1', false)));
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    expect(refused.length).toBeGreaterThan(0);
    const err = refused[0]!.reason;
    expect(err).toBeInstanceOf(RaftError);
    expect((err as RaftError).code).toBe('conf-change-refused');
    // the learners added are removed again
    for (const id of ghosts) {
      await until(
        async () => {
          if (!follower.raft.status().conf.learners.includes(id)) return true;
          await follower.removeMember(id).catch(() => {});
          return false;
        },
        10_000,
        `${id} removed`,
      );
    }
    expect(follower.raft.status().conf.learners).toEqual([]);
  });
});

describe('membership calls with ids no member can have, or members that are not there', () => {
  it('refuses them at once, as the caller’s error: on the node and over the peer API (400, not 500)', async () => {
    const [a, b] = nodes.map((n) => n.ctl.cluster!) as [ClusterNode, ClusterNode];
    const leader = a.raft.leaderId() === 'n1' ? a : b;
    const follower = leader === a ? b : a;
    const before = leader.raft.status();
    for (const id of ['__proto__', 'a b', 'n/../x', '$(id)', 'Ω', 'x'.repeat(65), '-lead']) {
      await expect(leader.addMember(id, '127.0.0.1:1', false)).rejects.toBeInstanceOf(MembershipRefusal);
    }
    const started = performance.now();
    await expect(follower.transferLeadership('nope')).rejects.toBeInstanceOf(MembershipRefusal);
    // refused at once, not after the transfer's 3 s bound
    expect(performance.now() - started).toBeLessThan(1_000);

    // the peer API (a member's certificate): 400 BAD_REQUEST for each, never 500
    const api = follower.peer(leader.id).api;
    const calls: Array<() => Promise<unknown>> = [
      () => api.addMember.mutate({ id: '__proto__', address: '127.0.0.1:1', voter: false }),
      () => api.addMember.mutate({ id: 'fine', address: '127.0.0.1:1', voter: 'yes' as unknown as boolean }),
      () => api.addMember.mutate({ id: follower.id, address: '127.0.0.1:1', voter: true }),
      () => api.removeMember.mutate({ id: 'zzz' }),
      () => api.transferLeadership.mutate({ to: 'nope' }),
    ];
    for (const call of calls) {
      const err = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(TRPCClientError);
      expect((err as TRPCClientError<any>).data?.httpStatus, String(err)).toBe(400);
    }
    const after = leader.raft.status();
    expect(after.conf.voters.slice().sort()).toEqual(['n1', 'n2']);
    expect(after.conf.learners).toEqual([]);
    expect(after.lastIndex).toBe(before.lastIndex);
  });
});
