/**
 * A scripted cluster view for in-process tests: a single test server poses as member `id` of a cluster whose
 * members (and their liveness and API URLs) the test sets, without starting any other node.
 */
import type { ClusterView } from '../../src/api/services.js';
import type { MemberView } from '../../src/cluster/members.js';
import type { DialRefusal } from '../../src/cluster/peer-protocol.js';

/** A member as this node sees it, with this node's peer-link refusal of it (ClusterView.peerRefusal). */
export type FakeMember = MemberView & { refusal: DialRefusal | null };

/** A member as this node sees it: `online` when it answers the status polls, `urls` its API base URLs. */
export function fakeMember(id: string, online: boolean, urls: string[]): FakeMember {
  return {
    id,
    address: `${id}:6262`,
    voter: true,
    leader: id === 'n1',
    online,
    lastJoinedAt: null,
    listedAt: '2026-01-02T03:04:05.000Z',
    status: { apiAddresses: urls } as MemberView['status'],
    refusal: null,
  };
}

/** This node as member `id`, a follower, of the cluster `members()` describes (read on every call). */
export function fakeClusterView(id: string, members: () => FakeMember[]): ClusterView {
  return {
    id,
    raft: { isLeader: () => false, term: () => 1 },
    readBarrier: async () => {},
    appliedEverywhere: async () => [],
    peerCertPem: null,
    memberCert: () => null,
    memberView: members,
    peerRefusal: (member) => members().find((m) => m.id === member)?.refusal ?? null,
    addMemberAt: async () => 'x',
    removeMember: async () => {},
    transferLeadership: async () => {},
  };
}
