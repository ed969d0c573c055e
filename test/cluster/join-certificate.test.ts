/**
 * Who may join by itself (src/cluster/peer-api.ts, requireJoinCertificate): a node that is not a member, only with a
 * peer certificate the cluster's root signed (pki/cluster.ts issuePeerCert under loadRootCa), never with one of the
 * signing CA, whose key every member (a removed one too) holds.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_HOSTS } from '../../src/cluster/local.js';
import { peerClient } from '../../src/cluster/peer-api.js';
import { issueNodeBundle, issuePeerCert, loadPeerTlsOptions, peerIdFromCert } from '../../src/pki/index.js';
import { loadSigningCa } from '../../src/pki/pki-dir.js';
import { inProcessCluster } from './in-process.js';

const setup = inProcessCluster('keel-join-certificate-', ['n1']);
beforeAll(() => setup.start(), 60_000);
afterAll(() => setup.stop());

describe('a node that is not a member, adding itself', () => {
  it('with a certificate the signing CA signed (what any member can make): refused, nothing added', async () => {
    const signing = await loadSigningCa(join(setup.dir, 'n1', 'pki'));
    const minted = await issuePeerCert(signing, { nodeId: 'n7', hosts: LOCAL_HOSTS });
    const n7 = peerClient(setup.member(0).peerAddress, {
      key: minted.keyPem,
      cert: `${minted.certPem.trim()}\n${signing.certPem}`,
      ca: signing.chainPem.at(-1)!,
      peerIdFromCert,
    });
    try {
      // it may still ask about the cluster: its certificate is the cluster's
      expect((await n7.api.members.query()).members.map((m) => m.id)).toEqual(['n1']);
      await expect(n7.api.addMember.mutate({ id: 'n7', address: '127.0.0.1:7', voter: false })).rejects.toThrow(
        /n7 may join only with a peer certificate signed by the cluster's root CA/,
      );
    } finally {
      n7.close();
    }
    expect(setup.member(0).raft.status().conf.learners).toEqual([]);
  });

  it('with a certificate the root signed (keel pki issue-node): added', async () => {
    const dir = join(setup.dir, 'n8', 'pki');
    await issueNodeBundle(join(setup.dir, 'n1', 'pki'), dir, { nodeId: 'n8', hosts: LOCAL_HOSTS });
    const n8 = peerClient(setup.member(0).peerAddress, await loadPeerTlsOptions(dir));
    try {
      // a learner only: nothing runs at that address to catch up
      await n8.api.addMember.mutate({ id: 'n8', address: '127.0.0.1:8', voter: false });
    } finally {
      n8.close();
    }
    expect(setup.member(0).raft.status().conf.learners).toEqual(['n8']);
  });
});
