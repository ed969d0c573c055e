/**
 * Quorum lost for good (`keel run --force-new-cluster`, etcd's flag of the same name): the survivor restarts as the
 * only voter with all its data and serves writes again; a member of the old majority brought back on its old data
 * learns it was removed and does not start. In-process members over mutual-TLS peer links.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RemovedFromClusterError } from '../../src/cluster/removal.js';
import { call, login } from '../support/server.js';
import { inProcessCluster, inProcessMember } from './in-process.js';
import { until } from './support.js';

const setup = inProcessCluster('keel-force-new-', ['n1', 'n2', 'n3']);
const nodes = setup.nodes;
const cluster = setup.member;

beforeAll(() => setup.start(), 60_000);
afterAll(() => setup.stop());

describe('--force-new-cluster', () => {
  it('restarts the survivor of a lost majority as the only voter, with its data; the others are removed', async () => {
    const token = await login(nodes[0]!.base);
    const create = (name: string) =>
      call('POST', `${nodes[0]!.mgmt}/identities`, { token, body: { name, type: 'User', isAdmin: false } });
    expect((await create('before-the-loss')).status).toBe(201);

    const n1Port = Number(cluster(0).peerAddress.split(':').at(-1)); // where the others know n1
    const forcedN1 = () =>
      inProcessMember(
        setup.dir,
        'n1',
        { join: '127.0.0.1:1' },
        { forceNewCluster: true, peerListen: { host: '127.0.0.1', port: n1Port }, readyTimeout_ms: 10_000 },
      );
    const stop = async (n: (typeof nodes)[number]) => {
      await n.ctl.cluster!.stop({ transferLeadership: false });
      await n.stop({ keepData: true });
    };

    // n1 stopped while n2 and n3 still make a quorum: the interlock refuses to force it
    const [n1, n2, n3] = nodes.splice(0, 3) as [(typeof nodes)[number], (typeof nodes)[number], (typeof nodes)[number]];
    await stop(n1);
    await until(() => n2.ctl.cluster!.raft.leaderId(), 10_000, 'a leader among n2 and n3');
    await expect(forcedN1()).rejects.toThrow(
      /^--force-new-cluster refused: member n[23] answers and follows leader n[23]: the cluster still has a quorum/,
    );

    // the majority goes for good (n2 and n3, their data kept for the end); n1 is restarted, forced
    await stop(n2);
    await stop(n3);
    nodes.push(await forcedN1());
    const conf = cluster(0).raft.status().conf;
    expect(conf.voters).toEqual(['n1']);
    expect(conf.learners).toEqual([]);
    expect(cluster(0).raft.leaderId()).toBe('n1');
    expect(nodes[0]!.ctl.svc.store.lookup('identities', 'name', 'before-the-loss')).toHaveLength(1);
    // the same admin session, and writes again
    expect((await create('after-the-loss')).status).toBe(201);
    expect(
      cluster(0)
        .members()
        .members.map((m) => m.id),
    ).toEqual(['n1']);

    // n2 back on its old data: a member's newer configuration leaves it out, so it does not start
    const back = inProcessMember(setup.dir, 'n2', { join: cluster(0).peerAddress }, { readyTimeout_ms: 5_000 });
    await expect(back).rejects.toThrow(RemovedFromClusterError);
    await expect(back).rejects.toThrow(
      /^node n2 was removed from the cluster \(member n1 applied a newer configuration/,
    );
    expect((await create('after-n2-came-back')).status).toBe(201);
  }, 90_000);
});
