/**
 * `keel run`'s choice of scheme and engine (src/cli/main.ts listenerScheme) and of a cluster member's peer security
 * (clusterOptions), without starting a process.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { clusterOptions, listenerScheme, routerControlOf } from '../../src/cli/main.js';
import { initClusterPki } from '../../src/pki/index.js';
import { Scratch } from '../pki/helpers.js';

const refusal = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return (err as Error).message;
  }
  return 'accepted';
};

describe('keel run: HTTPS by default, plain HTTP on loopback only', () => {
  it('HTTPS on the node engine unless told otherwise, on any address', () => {
    for (const host of ['127.0.0.1', '0.0.0.0', '10.0.0.1', '::', 'ctl.example.com']) {
      expect(listenerScheme({}, host)).toEqual({ https: true, engine: 'node' });
      expect(listenerScheme({ tls: true, engine: 'node' }, host)).toEqual({ https: true, engine: 'node' });
    }
  });

  it('--insecure-http: plain HTTP on uWS (or node) on loopback, refused on any other address', () => {
    for (const host of ['127.0.0.1', '127.0.0.2', '::1', 'localhost']) {
      expect(listenerScheme({ 'insecure-http': true }, host)).toEqual({ https: false, engine: 'uws' });
      expect(listenerScheme({ 'insecure-http': true, engine: 'node' }, host)).toEqual({ https: false, engine: 'node' });
    }
    for (const host of ['0.0.0.0', '::', '', '10.0.0.1', 'ctl.example.com', '::ffff:10.0.0.1']) {
      expect(refusal(() => listenerScheme({ 'insecure-http': true }, host))).toContain('--insecure-http is refused');
    }
  });

  it('uWS serves plain HTTP only; --tls and --insecure-http exclude each other; unknown engines refused', () => {
    expect(refusal(() => listenerScheme({ engine: 'uws' }, '127.0.0.1'))).toContain('serves plain HTTP only');
    expect(refusal(() => listenerScheme({ tls: true, 'insecure-http': true }, '127.0.0.1'))).toContain('exclude');
    expect(refusal(() => listenerScheme({ engine: 'apache' }, '127.0.0.1'))).toContain('invalid --engine');
  });
});

describe('keel run: the router control listener and the address routers dial', () => {
  it('--router-listen alone; --router-advertise a host:port routers dial, only with --router-listen', () => {
    expect(routerControlOf(undefined, undefined)).toBeUndefined();
    expect(routerControlOf('0.0.0.0:6262', undefined)).toEqual({ host: '0.0.0.0', port: 6262 });
    expect(routerControlOf('0.0.0.0:6262', 'ctrl.example.com:443')).toEqual({
      host: '0.0.0.0',
      port: 6262,
      advertise: 'ctrl.example.com:443',
    });
    expect(routerControlOf('[::]:6262', '[2001:db8::1]:6262')?.advertise).toBe('[2001:db8::1]:6262');
    expect(refusal(() => routerControlOf(undefined, 'ctrl.example.com:443'))).toContain('needs --router-listen');
    for (const bad of ['ctrl.example.com', 'ctrl.example.com:0', 'tls:ctrl.example.com:443', 'a b:1', 'x/y:1']) {
      expect(refusal(() => routerControlOf('0.0.0.0:6262', bad))).toContain('invalid --router-advertise');
    }
  });
});

describe('keel run as a cluster member: peer links are mutual TLS by default, with no way to turn it off', () => {
  const s = new Scratch();
  afterAll(() => s.remove());
  const failure = async (p: Promise<unknown>) =>
    p.then(
      () => 'accepted',
      (err: Error) => err.message,
    );

  it('loads the member certificate without any TLS flag (--peer-tls is the default, kept for older scripts)', async () => {
    const pki = s.path('n1-pki');
    await initClusterPki(pki, { nodeId: 'n1', hosts: ['127.0.0.1'] });
    for (const flags of [{}, { 'peer-tls': true }, { 'cluster-init': true }, { join: '127.0.0.1:6262' }]) {
      const o = await clusterOptions({ 'node-id': 'n1', ...flags }, pki);
      expect(o?.tls.cert.toString()).toContain('BEGIN CERTIFICATE');
      expect(o?.tls.key.toString()).toContain('PRIVATE KEY');
      expect(o?.tls.peerIdFromCert).toBeTypeOf('function');
    }
    expect(await clusterOptions({}, pki)).toBeUndefined(); // a single node has no peer links
    expect(await failure(clusterOptions({ 'peer-tls': true }, pki))).toContain('--peer-tls needs --node-id');
  });

  it('--pipeline-proposals turns one batch in flight off (on by default), and needs --node-id', async () => {
    const pki = s.path('n1-pipeline-pki');
    await initClusterPki(pki, { nodeId: 'n1', hosts: ['127.0.0.1'] });
    expect((await clusterOptions({ 'node-id': 'n1' }, pki))?.holdWhileCommitting).toBeUndefined();
    const off = await clusterOptions({ 'node-id': 'n1', 'pipeline-proposals': true }, pki);
    expect(off?.holdWhileCommitting).toBe(false);
    expect(await failure(clusterOptions({ 'pipeline-proposals': true }, pki))).toContain(
      '--pipeline-proposals needs --node-id',
    );
  });

  it('--snapshot-every sets the interval of a member, and needs --node-id (a single node keeps no Raft log)', async () => {
    const pki = s.path('n1-snapshot-pki');
    await initClusterPki(pki, { nodeId: 'n1', hosts: ['127.0.0.1'] });
    const set = await clusterOptions({ 'node-id': 'n1', 'snapshot-every': '5000' }, pki);
    expect(set?.snapshotEvery_entries).toBe(5000);
    expect(await failure(clusterOptions({ 'snapshot-every': '5000' }, pki))).toContain(
      '--snapshot-every needs --node-id',
    );
  });

  it('--force-new-cluster: a member restarted on its data only (not with --cluster-init or --join), needs --node-id', async () => {
    const pki = s.path('n1-force-pki');
    await initClusterPki(pki, { nodeId: 'n1', hosts: ['127.0.0.1'] });
    expect((await clusterOptions({ 'node-id': 'n1', 'force-new-cluster': true }, pki))?.forceNewCluster).toBe(true);
    expect((await clusterOptions({ 'node-id': 'n1' }, pki))?.forceNewCluster).toBeUndefined();
    for (const other of [{ 'cluster-init': true }, { join: '127.0.0.1:6262' }]) {
      expect(await failure(clusterOptions({ 'node-id': 'n1', 'force-new-cluster': true, ...other }, pki))).toContain(
        '--force-new-cluster restarts a member on its data: not with --cluster-init or --join',
      );
    }
    expect(await failure(clusterOptions({ 'force-new-cluster': true }, pki))).toContain(
      '--force-new-cluster needs --node-id',
    );
  });

  it('--raft-wal-mib sizes the Raft write-ahead file (0: none), within 0 to 4096, and needs --node-id', async () => {
    const pki = s.path('n1-wal-pki');
    await initClusterPki(pki, { nodeId: 'n1', hosts: ['127.0.0.1'] });
    expect((await clusterOptions({ 'node-id': 'n1', 'raft-wal-mib': '16' }, pki))?.raftWal_bytes).toBe(16 << 20);
    expect((await clusterOptions({ 'node-id': 'n1', 'raft-wal-mib': '0' }, pki))?.raftWal_bytes).toBe(0);
    expect((await clusterOptions({ 'node-id': 'n1' }, pki))?.raftWal_bytes).toBeUndefined();
    for (const bad of ['-1', '1.5', '4097', 'x']) {
      expect(await failure(clusterOptions({ 'node-id': 'n1', 'raft-wal-mib': bad }, pki))).toContain(
        `invalid --raft-wal-mib '${bad}'`,
      );
    }
    expect(await failure(clusterOptions({ 'raft-wal-mib': '16' }, pki))).toContain('--raft-wal-mib needs --node-id');
  });

  it('refuses to start a member without a certificate, or with one naming another node', async () => {
    const none = await failure(clusterOptions({ 'node-id': 'n2', join: '127.0.0.1:6262' }, s.path('empty')));
    expect(none).toContain('no valid peer certificate for n2');
    expect(none).toContain('MISSING_FILE');
    expect(none).toContain('keel pki issue-node --node-id n2');
    const other = s.path('n3-pki');
    await initClusterPki(other, { nodeId: 'n3', hosts: [] });
    expect(await failure(clusterOptions({ 'node-id': 'n2' }, other))).toContain('names n3, not n2');
  });
});
