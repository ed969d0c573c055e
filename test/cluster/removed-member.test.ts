/**
 * A member removed while its process runs on keeps its certificate but no longer receives the log: its state goes
 * stale (a session revoked since still passes its checks there). The members refuse what it forwards and the
 * membership changes it asks for; it may still ask about the cluster. In-process, three controllers over mutual-TLS
 * peer links.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterNode } from '../../src/cluster/node.js';
import { peerClient } from '../../src/cluster/peer-api.js';
import { loadPeerTlsOptions } from '../../src/pki/index.js';
import { call, login } from '../support/server.js';
import { inProcessCluster } from './in-process.js';
import { until } from './support.js';

const setup = inProcessCluster('keel-removed-member-', ['n1', 'n2', 'n3']);
const nodes = setup.nodes;
const cluster = (i: number) => nodes[i]!.ctl.cluster! as ClusterNode;

beforeAll(() => setup.start(), 60_000);
afterAll(() => setup.stop());

describe('a member removed while its process runs on', () => {
  it('cannot write through the cluster, nor change its membership; it can still ask about it', async () => {
    await until(() => cluster(0).raft.status().conf.voters.length === 3, 10_000, 'three voters');
    // a session made before the removal, valid on every member
    const token = await login(nodes[2]!.base);
    const before = await call('POST', `${nodes[2]!.mgmt}/identities`, {
      token,
      body: { name: 'before-removal', type: 'User', isAdmin: false },
    });
    expect(before.status).toBe(201);

    // through n1, whichever member leads (a leader removed hands leadership over first)
    await cluster(0).removeMember('n3');
    await until(
      () => [0, 1].every((i) => !cluster(i).raft.status().conf.voters.includes('n3')),
      10_000,
      'n3 out of the applied configuration of n1 and n2',
    );

    // its writes: refused by the leader, never applied on the members
    const after = await call('POST', `${nodes[2]!.mgmt}/identities`, {
      token,
      body: { name: 'after-removal', type: 'User', isAdmin: false },
    });
    expect(after.status).not.toBe(201);
    expect([429, 503]).toContain(after.status);
    for (const i of [0, 1]) {
      expect(nodes[i]!.ctl.svc.store.lookup('identities', 'name', 'after-removal')).toEqual([]);
      expect(nodes[i]!.ctl.svc.store.lookup('identities', 'name', 'before-removal')).toHaveLength(1);
    }

    // its membership changes: refused (FORBIDDEN) by a member, the configuration unchanged
    const n3 = peerClient(cluster(0).peerAddress, await loadPeerTlsOptions(join(setup.dir, 'n3', 'pki')));
    try {
      await expect(n3.api.removeMember.mutate({ id: 'n2' })).rejects.toThrow(/n3 is not a member of this cluster/);
      await expect(n3.api.transferLeadership.mutate({ to: 'n2' })).rejects.toThrow(/not a member/);
      await expect(n3.api.addMember.mutate({ id: 'n9', address: '127.0.0.1:1', voter: true })).rejects.toThrow(
        /not a member/,
      );
      // asking about the cluster is still answered
      const members = await n3.api.members.query();
      expect(members.members.map((m) => m.id).sort()).toEqual(['n1', 'n2']);
    } finally {
      n3.close();
    }
    expect(cluster(0).raft.status().conf.voters.slice().sort()).toEqual(['n1', 'n2']);
  }, 60_000);
});
