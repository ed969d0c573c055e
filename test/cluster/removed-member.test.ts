/**
 * A member removed while its process runs on keeps its certificate but no longer receives the log: its state goes
 * stale (a session revoked since still passes its checks there). The members refuse what it forwards and the
 * membership changes it asks for; it may still ask about the cluster. In-process, three controllers over mutual-TLS
 * peer links.
 */
import { readdirSync, rmSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ForwardClient } from '../../src/cluster/forward-channel.js';
import { LOCAL_HOSTS } from '../../src/cluster/local.js';
import { peerClient, removedAtOf } from '../../src/cluster/peer-api.js';
import { RemovedFromClusterError } from '../../src/cluster/removal.js';
import { issueNodeBundle, loadPeerTlsOptions } from '../../src/pki/index.js';
import { call, login } from '../support/server.js';
import { inProcessCluster, inProcessMember } from './in-process.js';
import { until } from './support.js';

const setup = inProcessCluster('keel-removed-member-', ['n1', 'n2', 'n3', 'n4']);
const nodes = setup.nodes;
const cluster = setup.member;

beforeAll(() => setup.start(), 60_000);
afterAll(() => setup.stop());

describe('a member removed while its process runs on', () => {
  it('cannot write through the cluster, nor change its membership; it can still ask about it', async () => {
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
      () => [0, 1, 3].every((i) => !cluster(i).raft.status().conf.voters.includes('n3')),
      10_000,
      'n3 out of the applied configuration of n1, n2 and n4',
    );

    // what it forwards, sent straight to the leader in the leader's own term (whatever n3 itself still believes
    // about the leader): refused as "no leader here", nothing proposed
    const n3Tls = await loadPeerTlsOptions(join(setup.dir, 'n3', 'pki'));
    const leader = await until(
      () => [0, 1, 3].map(cluster).find((c) => c.raft.status().role === 'leader'),
      10_000,
      'a leader among n1, n2, n4',
    );
    const forward = new ForwardClient(leader.peerAddress, n3Tls);
    try {
      const term = leader.raft.status().term;
      const answered = await forward.send(term, [new Uint8Array([1, 2, 3])], 5_000, 5_000);
      expect(answered).toEqual([{ ok: false, code: 'not-leader', leader: null }]);
    } finally {
      forward.close();
    }

    // its writes: refused by the leader, never applied on the members
    const after = await call('POST', `${nodes[2]!.mgmt}/identities`, {
      token,
      body: { name: 'after-removal', type: 'User', isAdmin: false },
    });
    expect(after.status).not.toBe(201);
    expect([429, 503]).toContain(after.status);
    for (const i of [0, 1, 3]) {
      expect(nodes[i]!.ctl.svc.store.lookup('identities', 'name', 'after-removal')).toEqual([]);
      expect(nodes[i]!.ctl.svc.store.lookup('identities', 'name', 'before-removal')).toHaveLength(1);
    }

    // its id is recorded as removed, on every member, from the membership change itself
    await until(() => [0, 1, 3].every((i) => cluster(i).removalOf('n3') !== null), 10_000, 'n3 recorded as removed');
    const removedAt = cluster(0).removalOf('n3')!;
    for (const i of [1, 3]) expect(cluster(i).removalOf('n3')).toBe(removedAt);

    // its certificate still verifies, but a member answers it nothing but its status: no membership change, no
    // join of itself (FORBIDDEN, the removal's index in the error's data), no members list, no read index
    const n3 = peerClient(cluster(0).peerAddress, n3Tls);
    try {
      const removed = /n3 was removed from this cluster \(the membership change at index \d+\)/;
      await expect(n3.api.removeMember.mutate({ id: 'n2' })).rejects.toThrow(removed);
      await expect(n3.api.transferLeadership.mutate({ to: 'n2' })).rejects.toThrow(removed);
      await expect(n3.api.addMember.mutate({ id: 'n9', address: '127.0.0.1:1', voter: true })).rejects.toThrow(removed);
      const join = await n3.api.addMember.mutate({ id: 'n3', address: cluster(2).peerAddress, voter: true }).then(
        () => null,
        (err: unknown) => err,
      );
      expect(removedAtOf(join)).toBe(removedAt);
      await expect(n3.api.members.query()).rejects.toThrow(removed);
      await expect(n3.api.readIndex.query()).rejects.toThrow(removed);
      // its status question is answered: that is how it learns its removal
      const status = await n3.api.status.query();
      expect(status.conf?.members.slice().sort()).toEqual(['n1', 'n2', 'n4']);
    } finally {
      n3.close();
    }
    expect(cluster(0).raft.status().conf.voters.slice().sort()).toEqual(['n1', 'n2', 'n4']);

    // a join of n3 passed on by a member (its own record may lag behind the leader's): the leader refuses it too,
    // and the member passing it on answers the refusal as its own, through the leader and through a follower
    const n2 = peerClient(leader.peerAddress, await loadPeerTlsOptions(join(setup.dir, 'n2', 'pki')));
    const follower = [0, 1, 3].map(cluster).find((c) => c !== leader && c.id !== 'n2')!;
    const viaFollower = peerClient(follower.peerAddress, await loadPeerTlsOptions(join(setup.dir, 'n2', 'pki')));
    try {
      for (const c of [n2, viaFollower]) {
        const passedOn = await c.api.addMember
          .mutate({ id: 'n3', address: cluster(2).peerAddress, voter: true, join: true })
          .then(
            () => null,
            (err: unknown) => err,
          );
        expect(removedAtOf(passedOn)).toBe(removedAt);
        expect(String(passedOn)).toMatch(/n3 was removed from this cluster/);
      }
    } finally {
      n2.close();
      viaFollower.close();
    }
    expect(cluster(0).raft.status().conf.learners).toEqual([]);

    // a node that never was a member (a peer certificate from the cluster's CA): it may ask about the cluster and
    // join by itself, but not change the membership of others
    const n9Pki = join(setup.dir, 'n9', 'pki');
    await issueNodeBundle(join(setup.dir, 'n1', 'pki'), n9Pki, { nodeId: 'n9', hosts: LOCAL_HOSTS });
    const n9 = peerClient(cluster(0).peerAddress, await loadPeerTlsOptions(n9Pki));
    try {
      await expect(n9.api.removeMember.mutate({ id: 'n2' })).rejects.toThrow(/n9 is not a member of this cluster/);
      await expect(n9.api.transferLeadership.mutate({ to: 'n2' })).rejects.toThrow(/not a member/);
      await expect(n9.api.addMember.mutate({ id: 'n8', address: '127.0.0.1:1', voter: true })).rejects.toThrow(
        /not a member/,
      );
      const members = await n9.api.members.query();
      expect(members.members.map((m) => m.id).sort()).toEqual(['n1', 'n2', 'n4']);
    } finally {
      n9.close();
    }

    // and it learns it was removed (its own apply, or a member's newer configuration in a status poll), so that
    // `keel run` stops it instead of serving its stale state
    const removal = await until(() => cluster(2).removed, 10_000, 'n3 learns it was removed');
    expect(removal.message).toMatch(
      /^node n3 was removed from the cluster \(.*: the configuration at index \d+ leaves/,
    );
    expect(removal.confIndex).toBe(cluster(0).status().conf!.index);
    for (const i of [0, 1, 3]) expect(cluster(i).removed).toBeNull();

    // stopped and started again on its data, it refuses at once: it recorded its removal
    await cluster(2).stop({ transferLeadership: false });
    await nodes[2]!.stop({ keepData: true });
    const restarted = inProcessMember(setup.dir, 'n3', { join: cluster(0).peerAddress }, { readyTimeout_ms: 5_000 });
    await expect(restarted).rejects.toThrow(RemovedFromClusterError);
    await expect(restarted).rejects.toThrow(
      /^node n3 was removed from the cluster \(.*, learnt \d{4}-.*: the configuration at/,
    );
  }, 60_000);

  it('a member removed while it was down learns it from a member once restarted, and does not start', async () => {
    // n4 stopped first, so it never has the removal in its log
    await nodes[3]!.ctl.cluster!.stop({ transferLeadership: true });
    await nodes[3]!.stop({ keepData: true });
    await cluster(0).removeMember('n4');
    await until(() => !cluster(1).raft.status().conf.voters.includes('n4'), 10_000, 'n4 out of the configuration');
    // (a start that waited for a leader would fail after 5 s: a removed node never gets one)
    const restarted = inProcessMember(setup.dir, 'n4', { join: cluster(0).peerAddress }, { readyTimeout_ms: 5_000 });
    await expect(restarted).rejects.toThrow(RemovedFromClusterError);
    await expect(restarted).rejects.toThrow(
      /^node n4 was removed from the cluster \(member n[12] applied a newer configuration: the configuration at index \d+ leaves it out\)/,
    );
    // it recorded what it learnt: the next start refuses at once, without asking anyone
    const again = inProcessMember(setup.dir, 'n4', { join: cluster(0).peerAddress }, { readyTimeout_ms: 5_000 });
    await expect(again).rejects.toThrow(
      /^node n4 was removed from the cluster \(member n[12] applied a newer configuration, learnt /,
    );
    nodes.splice(2, 2); // n3 and n4 stopped: the suite's stop() skips them
  }, 60_000);

  it('its id stays out: a fresh start under it is refused until an operator adds it again, then it joins', async () => {
    // n3's data directory emptied (its certificate kept): what an operator does to reuse the machine
    const n3Dir = join(setup.dir, 'n3');
    for (const f of readdirSync(n3Dir)) if (f !== 'pki') rmSync(join(n3Dir, f), { recursive: true, force: true });
    const port = await freePort();
    const start = () =>
      inProcessMember(
        setup.dir,
        'n3',
        { join: cluster(0).peerAddress },
        { peerListen: { host: '127.0.0.1', port }, readyTimeout_ms: 10_000 },
      );
    // its old certificate is still from the cluster's CA: refused all the same, as removed (keel run: exit 78)
    const refused = start();
    await expect(refused).rejects.toThrow(RemovedFromClusterError);
    await expect(refused).rejects.toThrow(/^node n3 was removed from the cluster \(member .* refuses it as removed/);
    expect(cluster(0).raft.status().conf.learners).toEqual([]);

    // an operator adds it again (keel cluster add --learner): the record goes, on every member
    await cluster(1).addMember('n3', `127.0.0.1:${port}`, false);
    await until(() => [0, 1].every((i) => cluster(i).removalOf('n3') === null), 10_000, 'the record of n3 gone');
    expect(cluster(0).sm.store.collection('cluster-removals').get('n3')).toBeUndefined();

    // then it joins as that learner with fresh data, is promoted, and serves the cluster's state
    nodes.push(await start());
    await until(() => cluster(0).raft.status().conf.voters.includes('n3'), 10_000, 'n3 a voter again');
    await until(
      () => nodes[2]!.ctl.svc.store.lookup('identities', 'name', 'before-removal').length === 1,
      10_000,
      'n3 holds the state',
    );
    // catching up from the leader's log, it may have replayed its earlier removal (index below its new addition):
    // history, not its own removal, so it runs on as a member, once any judging of it is over
    await until(() => !cluster(2).judgingRemoval, 10_000, 'no removal of n3 being judged');
    expect(cluster(2).removed).toBeNull();
    expect(cluster(0).raft.status().conf.voters.slice().sort()).toEqual(['n1', 'n2', 'n3']);
  }, 60_000);
});

/** A TCP port nothing listens on now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
