/**
 * remove-member keeps the cluster's quorum: a voter the leader reaches is not removed while too few of the voters
 * left are reachable (etcd's strict reconfiguration check); a voter that is gone may always be removed. In-process,
 * three controllers over mutual-TLS peer links.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterNode } from '../../src/cluster/node.js';
import { RemovalQuorumError, removalQuorumRisk } from '../../src/cluster/removal.js';
import { inProcessCluster } from './in-process.js';
import { until } from './support.js';

describe('removalQuorumRisk', () => {
  const up =
    (...ids: string[]) =>
    (peer: string) =>
      ids.includes(peer);

  it('refuses removing a reachable voter when the voters left could not form a quorum', () => {
    const risk = removalQuorumRisk('b', 'a', ['a', 'b', 'c'], up('b'));
    expect(risk).toBeInstanceOf(RemovalQuorumError);
    expect([risk!.reachable, risk!.remaining]).toEqual([1, 2]);
    // the leader removing itself, one of the others down
    expect(removalQuorumRisk('a', 'a', ['a', 'b', 'c'], up('b'))).toBeInstanceOf(RemovalQuorumError);
    // five voters, two down: removing a third reachable one leaves 2 of 4
    expect(removalQuorumRisk('c', 'a', ['a', 'b', 'c', 'd', 'e'], up('b', 'c'))).toBeInstanceOf(RemovalQuorumError);
  });

  it('allows it when enough stay reachable, for a voter that is gone, and for a learner', () => {
    expect(removalQuorumRisk('b', 'a', ['a', 'b', 'c'], up('b', 'c'))).toBeNull();
    expect(removalQuorumRisk('c', 'a', ['a', 'b', 'c'], up('b'))).toBeNull(); // c is down: removing it is the cure
    expect(removalQuorumRisk('a', 'a', ['a', 'b', 'c'], up('b', 'c'))).toBeNull();
    expect(removalQuorumRisk('l', 'a', ['a', 'b', 'c'], up('b', 'l'))).toBeNull(); // not a voter
    expect(removalQuorumRisk('b', 'a', ['a', 'b'], up('b'))).toBeNull(); // 1 of 1 left
    expect(removalQuorumRisk('d', 'a', ['a', 'b', 'c', 'd', 'e'], up('b', 'c', 'd'))).toBeNull(); // 3 of 4
  });
});

const setup = inProcessCluster('keel-remove-member-', ['n1', 'n2', 'n3']);
const nodes = setup.nodes;

beforeAll(() => setup.start(), 60_000);
afterAll(() => setup.stop());

describe('remove-member with a voter connected but silent', () => {
  it('counts a voter the leader has not heard from within an election timeout as unreachable', async () => {
    const members = nodes.map((n) => n.ctl.cluster!) as ClusterNode[];
    const leader = members.find((m) => m.id === members[0]!.raft.leaderId())!;
    const [live, mute] = members.filter((m) => m !== leader) as [ClusterNode, ClusterNode];
    // mute's Raft node neither hears nor speaks, while its connections stay open (a hung process looks like this)
    const raft = mute.raft as unknown as { receive: unknown; transport: { send: unknown } };
    raft.receive = () => {};
    raft.transport.send = () => {};
    const connected = (id: string) => leader.raft.status().peers.some((p) => p.id === id && p.state === 'connected');
    try {
      await until(() => !leader.raft.heardRecently(mute.id), 10_000, `the leader to stop hearing ${mute.id}`);
      expect(connected(mute.id)).toBe(true);
      const before = leader.raft.status();
      await expect(leader.removeMember(live.id)).rejects.toBeInstanceOf(RemovalQuorumError);
      expect(leader.raft.status().conf.voters.slice().sort()).toEqual(['n1', 'n2', 'n3']);
      expect(leader.raft.status().lastIndex).toBe(before.lastIndex);
    } finally {
      delete (raft as { receive?: unknown }).receive;
      delete (raft.transport as { send?: unknown }).send;
    }
    await until(() => leader.raft.heardRecently(mute.id), 10_000, `the leader to hear ${mute.id} again`);
  }, 30_000);
});

describe('remove-member with a voter down', () => {
  it('refuses removing a live voter (on the leader and through a follower), then removes the one that is down', async () => {
    const members = nodes.map((n) => n.ctl.cluster!) as ClusterNode[];
    const leaderId = members[0]!.raft.leaderId();
    const leader = members.find((m) => m.id === leaderId)!;
    const [live, gone] = members.filter((m) => m !== leader) as [ClusterNode, ClusterNode];
    const goneServer = nodes.find((n) => n.ctl.cluster === gone)!;
    // live's member poll (once a second) has reached gone: the certificate gone showed on that peer link
    await until(() => live.memberCert(gone.id) !== null, 5_000, `live to reach ${gone.id}`);
    expect(live.memberCert(gone.id)?.pem).toContain('BEGIN CERTIFICATE');
    await gone.stop({ transferLeadership: false });
    await goneServer.stop({ keepData: true });
    nodes.splice(nodes.indexOf(goneServer), 1);
    const connected = (id: string) => leader.raft.status().peers.some((p) => p.id === id && p.state === 'connected');
    await until(() => !connected(gone.id), 10_000, `the leader to see ${gone.id} gone`);

    const before = leader.raft.status();
    await expect(leader.removeMember(live.id)).rejects.toBeInstanceOf(RemovalQuorumError);
    await expect(live.removeMember(live.id)).rejects.toThrow(`removing ${live.id} would leave 1 of 2 voters reachable`);
    await expect(leader.removeMember(leader.id)).rejects.toBeInstanceOf(RemovalQuorumError);
    const after = leader.raft.status();
    expect(after.conf.voters.slice().sort()).toEqual(['n1', 'n2', 'n3']);
    expect(after.lastIndex).toBe(before.lastIndex); // nothing proposed

    await live.removeMember(gone.id);
    await until(() => leader.raft.status().conf.voters.length === 2, 10_000, 'the removal applied');
    // the next member poll closes the peer client of the member removed (keepOnly)
    await until(() => live.memberCert(gone.id) === null, 5_000, `live to drop its client of ${gone.id}`);
    expect(leader.raft.status().conf.voters.slice().sort()).toEqual([leader.id, live.id].sort());
  }, 40_000);
});
