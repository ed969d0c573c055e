/**
 * The cluster's state-machine version during a rolling upgrade (docs/cluster.md, "Rolling upgrades"): in-process
 * members playing two releases, where version 2 introduced writes of services. A cluster of version 1 is upgraded
 * one member at a time: until n3 runs the newer release, such a write is refused before it reaches the log; once
 * every member states version 2, the leader raises the cluster's version and the write goes through. A node of the older
 * release cannot join a cluster past it, nor start on its data.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { preparePeerPki } from '../../src/cluster/local.js';
import type { ClusterNode } from '../../src/cluster/node.js';
import { INTRODUCED_IN, versionNeeded } from '../../src/cluster/state-machine-version.js';
import { CLUSTER_STATE_ID, clusterStateMachineVersion } from '../../src/model/cluster-state.js';
import { buildSchema } from '../../src/model/index.js';
import type { Command as ModelCommand } from '../../src/model/rows.js';
import { Store } from '../../storage/store.js';
import { type Command, StoreFailedError } from '../../storage/types.js';
import { call, login, type TestServer } from '../support/server.js';
import { inProcessMember } from './in-process.js';
import { until } from './support.js';

const AT = '2026-11-28T00:00:00.000Z';

describe('versionNeeded', () => {
  const table = new Map([
    ['custom:newCommand', 3],
    ['entity:services', 2],
    ['field:identities.newField', 4],
  ]);
  const create = (entity: string, data: Record<string, unknown>): Command => ({
    op: 'create',
    entity,
    id: 'x',
    data,
    at: AT,
  });

  it('is 1 for every command of this build (nothing introduced after version 1)', () => {
    expect(INTRODUCED_IN.size).toBe(0);
    expect(versionNeeded(create('services', { name: 's' }))).toBe(1);
    expect(versionNeeded({ op: 'custom', name: 'touchSessions', args: {}, at: AT })).toBe(1);
  });

  it('is the newest version among the kinds a command uses, batches walked', () => {
    expect(versionNeeded(create('identities', { name: 'a' }), table)).toBe(1);
    expect(versionNeeded(create('services', { name: 'a' }), table)).toBe(2);
    expect(versionNeeded({ op: 'delete', entity: 'services', id: 'x', at: AT }, table)).toBe(2);
    expect(versionNeeded(create('identities', { name: 'a', newField: 1 }), table)).toBe(4);
    expect(versionNeeded({ op: 'update', entity: 'identities', id: 'x', set: { newField: 2 }, at: AT }, table)).toBe(4);
    expect(versionNeeded({ op: 'custom', name: 'newCommand', args: {}, at: AT }, table)).toBe(3);
    const nested: Command = {
      op: 'batch',
      ops: [create('identities', { name: 'a' }), { op: 'batch', ops: [create('services', { name: 's' })] }],
    };
    expect(versionNeeded(nested, table)).toBe(2);
  });
});

describe('raiseStateMachineVersion, applied', () => {
  let dir = '';
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('raises, never lowers, refuses a non-version, and fails the store of a member that cannot follow', async () => {
    dir = mkdtempSync(join(tmpdir(), 'keel-smv-'));
    const store = await Store.open(join(dir, 'state'), buildSchema(2));
    const raise = (version: unknown): ModelCommand => ({
      op: 'custom',
      name: 'raiseStateMachineVersion',
      args: { version },
      at: AT,
    });
    expect(clusterStateMachineVersion(store)).toBe(1);
    const [up, same, down, bad] = await store.applyGroup([raise(2), raise(2), raise(1), raise(1.5)], { sync: false });
    expect(up).toEqual({ ok: true, value: 2 });
    expect(same).toEqual({ ok: true, value: 2 });
    expect(down).toEqual({ ok: true, value: 2 });
    expect(bad!.ok).toBe(false);
    expect(!bad!.ok && bad!.error.code).toBe('INVALID');
    expect(clusterStateMachineVersion(store)).toBe(2);
    expect(store.get('cluster-state', CLUSTER_STATE_ID)?.stateMachineVersion).toBe(2);

    // version 3 is beyond what this member's release applies: its store fails (it stops at that entry)
    await expect(store.applyGroup([raise(3)], { sync: false })).rejects.toBeInstanceOf(StoreFailedError);
    expect(clusterStateMachineVersion(store)).toBe(2);
    await store.close();
  });
});

describe('a rolling upgrade from state-machine version 1 to 2', () => {
  const dir = mkdtempSync(join(tmpdir(), 'keel-smv-cluster-'));
  const introducedIn = new Map([['entity:services', 2]]);
  const nodes = new Map<string, TestServer>();
  const member = (id: string): ClusterNode => nodes.get(id)!.ctl.cluster!;
  const start = (id: string, version: number, how: { init: true } | { join: string }, port = 0) =>
    inProcessMember(dir, id, how, {
      stateMachineVersion: version,
      introducedIn,
      peerListen: { host: '127.0.0.1', port },
      readyTimeout_ms: 10_000,
    });
  /** A member's peer port: a restarted member listens where the others know it. */
  const portOf = (id: string) => Number(member(id).peerAddress.split(':').pop());
  let peer = '';

  beforeAll(async () => {
    // a cluster of the older release: every member applies version 1
    await preparePeerPki(['n1', 'n2', 'n3', 'n4'], (id) => join(dir, id));
    nodes.set('n1', await start('n1', 1, { init: true }));
    peer = member('n1').peerAddress;
    nodes.set('n2', await start('n2', 1, { join: peer }));
    nodes.set('n3', await start('n3', 1, { join: peer }));
    await until(() => member('n1').raft.status().conf.voters.length === 3, 10_000, '3 voters');
  }, 60_000);

  afterAll(async () => {
    for (const n of nodes.values()) await n.ctl.cluster?.stop({ transferLeadership: false });
    for (const n of nodes.values()) await n.stop({ keepData: true });
    rmSync(dir, { recursive: true, force: true });
  });

  const leaderOf = () => [...nodes.keys()].find((id) => member(id).raft.isLeader())!;

  /** Stops member `id` (handing leadership over) and starts it again on its data and port with another release. */
  const restartAs = async (id: string, version: number) => {
    const old = nodes.get(id)!;
    const port = portOf(id);
    await old.ctl.cluster!.stop({ transferLeadership: true });
    await old.stop({ keepData: true });
    nodes.delete(id);
    nodes.set(id, await start(id, version, { join: peer }, port));
  };

  it('keeps the cluster at version 1 while a member states 1, and refuses the writes version 2 introduced', async () => {
    // n1 and n2 upgraded, one at a time
    await restartAs('n1', 2);
    await restartAs('n2', 2);
    // the leader has polled every member since: a raise would have been proposed by now
    await until(
      () => {
        const view = member(leaderOf()).memberView();
        return view.length === 3 && view.every((m) => m.online && m.status !== null);
      },
      10_000,
      'every member polled',
    );
    await new Promise((r) => setTimeout(r, 1_500));
    for (const id of ['n1', 'n2', 'n3']) expect(member(id).clusterStateMachineVersion()).toBe(1);

    // through the upgraded members (n3, of the older release, has no such write to make)
    for (const id of ['n1', 'n2']) {
      const n = nodes.get(id)!;
      const token = await login(n.base);
      const refused = await call('POST', `${n.mgmt}/services`, {
        token,
        body: { name: `svc-${id}`, encryptionRequired: true },
      });
      expect(refused.status, refused.text).toBe(503);
      expect(refused.body.error.code).toBe('CLUSTER_UPGRADE_INCOMPLETE');
      expect(refused.headers.get('retry-after')).toBe('5');
      // a write of version 1 goes through meanwhile
      const created = await call('POST', `${n.mgmt}/identities`, {
        token,
        body: { name: `during-upgrade-${id}`, type: 'User', isAdmin: false },
      });
      expect(created.status).toBe(201);
      // nothing of the refused write is anywhere
      const listed = await call('GET', `${n.mgmt}/services?filter=${encodeURIComponent(`name = "svc-${id}"`)}`, {
        token,
      });
      expect(listed.body.meta.pagination.totalCount).toBe(0);
    }
  }, 60_000);

  it('raises the cluster to version 2 once the last member runs the newer release; the write then succeeds', async () => {
    const old = nodes.get('n3')!;
    const port = portOf('n3');
    await old.ctl.cluster!.stop({ transferLeadership: true });
    await old.stop({ keepData: true });
    nodes.delete('n3');
    // a member that is down may run the older release: nothing is raised meanwhile (polls at 1 s)
    await new Promise((r) => setTimeout(r, 2_500));
    for (const id of ['n1', 'n2']) expect(member(id).clusterStateMachineVersion()).toBe(1);
    nodes.set('n3', await start('n3', 2, { join: peer }, port));

    await until(
      () => ['n1', 'n2', 'n3'].every((id) => member(id).clusterStateMachineVersion() === 2),
      20_000,
      'cluster version 2 on every member',
    );
    const n = nodes.get('n3')!;
    const token = await login(n.base);
    const created = await call('POST', `${n.mgmt}/services`, {
      token,
      body: { name: 'svc-after-upgrade', encryptionRequired: true },
    });
    expect(created.status).toBe(201);
  }, 60_000);

  it('refuses to add a node of the older release, and an older release refuses to start on the data', async () => {
    await expect(start('n4', 1, { join: peer })).rejects.toThrow(/state-machine version 1, the cluster 2/);
    expect(member(leaderOf()).raft.status().conf.voters.slice().sort()).toEqual(['n1', 'n2', 'n3']);
    expect(member(leaderOf()).raft.status().conf.learners).toEqual([]);

    const n3 = nodes.get('n3')!;
    const port = portOf('n3');
    await n3.ctl.cluster!.stop({ transferLeadership: true });
    await n3.stop({ keepData: true });
    nodes.delete('n3');
    await expect(start('n3', 1, { join: peer }, port)).rejects.toThrow(
      /the cluster applies state-machine version 2; this release .* applies versions up to 1/,
    );
  }, 30_000);
});
