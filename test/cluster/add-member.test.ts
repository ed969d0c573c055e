/**
 * addMember asked again for a member already added (a join retried after its outcome was unknown) finishes what
 * the first request started instead of changing the member: in-process, two controllers over mutual-TLS peer links.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RaftError } from '../../raft/index.js';
import { type ClusterNode, MemberConflictError } from '../../src/cluster/node.js';
import { inProcessCluster } from './in-process.js';

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
    // three changes at once: the leader takes the first and refuses the others while it is pending
    const outcomes = await Promise.allSettled(['ghost1', 'ghost2', 'ghost3'].map((id) => follower.removeMember(id)));
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    expect(refused.length).toBeGreaterThan(0);
    const err = refused[0]!.reason;
    expect(err).toBeInstanceOf(RaftError);
    expect((err as RaftError).code).toBe('conf-change-refused');
  });
});
