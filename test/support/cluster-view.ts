/**
 * A scripted cluster view for in-process tests: a single test server poses as member `id` of a cluster whose
 * members (and their liveness and API URLs) the test sets, without starting any other node.
 */
import type { ClusterView } from '../../src/api/services.js';
import type { MemberView } from '../../src/cluster/members.js';

/** A member as this node sees it: `online` when it answers the status polls, `urls` its API base URLs. */
export function fakeMember(id: string, online: boolean, urls: string[]): MemberView {
  return {
    id,
    address: `${id}:6262`,
    voter: true,
    leader: id === 'n1',
    online,
    lastJoinedAt: null,
    status: { apiAddresses: urls } as MemberView['status'],
    refusal: null,
  };
}

/** This node as member `id`, a follower, of the cluster `members()` describes (read on every call). */
export function fakeClusterView(id: string, members: () => MemberView[]): ClusterView {
  return {
    id,
    raft: { isLeader: () => false },
    readBarrier: async () => {},
    peerCertPem: null,
    memberView: members,
    addMemberAt: async () => 'x',
    removeMember: async () => {},
    transferLeadership: async () => {},
  };
}
