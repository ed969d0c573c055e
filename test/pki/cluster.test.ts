import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { WebSocketTransport } from '../../raft/index.js';
import type { Message, NodeId } from '../../raft/types.js';
import { main } from '../../src/cli/main.js';
import { x509 } from '../../src/pki/crypto.js';
import {
  API_CERT_RENEW_BEFORE_MS,
  ensureApiTls,
  ensureClusterCa,
  importRootCa,
  initClusterPki,
  isLoopbackHost,
  issueNodeBundle,
  issueServerCert,
  loadPeerTls,
  peerIdFromCert,
  peerNodeId,
  shareSigningCa,
  verifyChain,
} from '../../src/pki/index.js';
import { CA_EXTENSIONS, openssl, opensslSelfSigned, refusal, Scratch } from './helpers.js';

function mode(path: string): number {
  return statSync(path).mode & 0o777;
}

async function waitFor(cond: () => boolean, timeout_ms = 10_000): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for condition');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A heartbeat: the smallest message the transport carries. */
function heartbeat(from: NodeId, to: NodeId, term: number): Message {
  const zero = { logTerm: 0, index: 0, entries: [], commit: 0, reject: false, rejectHint: 0 };
  return { type: 'heartbeat', from, to, term, ...zero };
}

describe('cluster PKI on disk', () => {
  const s = new Scratch();
  const transports: WebSocketTransport[] = [];
  afterEach(async () => {
    for (const t of transports.splice(0)) await t.close();
  });
  afterAll(() => s.remove());

  it('init creates the CAs and the node certificate with private keys 0600, and refuses to overwrite', async () => {
    const dir = s.path('n1');
    await initClusterPki(dir, { nodeId: 'n1', hosts: ['127.0.0.1', 'ctrl1.example.com'] });
    for (const key of ['ca/root.key.pem', 'ca/signing.key.pem', 'node.key.pem'])
      expect(mode(`${dir}/${key}`)).toBe(0o600);
    expect(mode(`${dir}/ca`)).toBe(0o700);
    const tls = await loadPeerTls(dir);
    expect(tls.nodeId).toBe('n1');
    expect(tls.ca).toBe(readFileSync(`${dir}/ca/root.cert.pem`, 'utf8'));
    const v = openssl([
      'verify',
      '-CAfile',
      `${dir}/ca.cert.pem`,
      '-untrusted',
      `${dir}/ca/signing.cert.pem`,
      '-purpose',
      'sslclient',
      `${dir}/node.cert.pem`,
    ]);
    expect(v.stdout).toContain(': OK');
    const t = openssl(['x509', '-noout', '-text', '-in', `${dir}/node.cert.pem`]).stdout;
    expect(t).toContain('DNS:ctrl1.example.com, IP Address:127.0.0.1, URI:spiffe://keel/controller/n1');
    expect(t).toContain('Subject: CN = n1');
    const before = readFileSync(`${dir}/ca/root.key.pem`, 'utf8');
    expect(await refusal(initClusterPki(dir, { nodeId: 'n1', hosts: [] }))).toBe('ALREADY_EXISTS');
    expect(readFileSync(`${dir}/ca/root.key.pem`, 'utf8')).toBe(before);
    expect(await refusal(initClusterPki(s.path('bad'), { nodeId: 'bad/id', hosts: [] }))).toBe('INVALID_ARGUMENT');
    expect(await refusal(initClusterPki(s.path('bad'), { nodeId: '', hosts: [] }))).toBe('INVALID_ARGUMENT');
    expect(await refusal(initClusterPki(s.path('bad'), { nodeId: 'x', hosts: ['not a host'] }))).toBe(
      'INVALID_ARGUMENT',
    );
  });

  it('a join bundle lets a node talk to the first one over raft mutual TLS; an outsider cannot', async () => {
    const d1 = s.path('c1');
    await initClusterPki(d1, { nodeId: 'a', hosts: ['127.0.0.1'] });
    await issueNodeBundle(d1, s.path('b-bundle'), { nodeId: 'b', hosts: ['127.0.0.1'] });
    expect(mode(s.path('b-bundle/node.key.pem'))).toBe(0o600);
    expect(await refusal(issueNodeBundle(d1, s.path('b-bundle'), { nodeId: 'b', hosts: [] }))).toBe('ALREADY_EXISTS');
    // Another cluster's node with the id the first cluster expects.
    await initClusterPki(s.path('evil'), { nodeId: 'b', hosts: ['127.0.0.1'] });

    const tlsA = await loadPeerTls(d1);
    const tlsB = await loadPeerTls(s.path('b-bundle'));
    expect(tlsB.nodeId).toBe('b');
    const mk = (id: NodeId, tls: Awaited<ReturnType<typeof loadPeerTls>>, errors: string[] = []) => {
      const t = new WebSocketTransport({
        id,
        clusterId: 'k',
        ping_ms: 0,
        backoff: { min_ms: 10, max_ms: 80 },
        tls: { key: tls.key, cert: tls.cert, ca: tls.ca, peerIdFromCert },
        onError: (e) => errors.push(e.message),
      });
      transports.push(t);
      return t;
    };
    const aErrors: string[] = [];
    const a = mk('a', tlsA, aErrors);
    const addrA = await a.listen(0, '127.0.0.1');
    const got: Message[] = [];
    a.onMessage((m) => got.push(m));
    const bErrors: string[] = [];
    const b = mk('b', tlsB, bErrors);
    const addrB = await b.listen(0, '127.0.0.1');
    b.addPeer('a', addrA);
    a.addPeer('b', addrB); // the lower id dials
    b.send([heartbeat('b', 'a', 1)]);
    await waitFor(() => got.length === 1);
    expect(got[0]!.from).toBe('b');

    const outsiderErrors: string[] = [];
    // Another cluster's 'b' at b's address: a refuses its certificate, and it refuses a's.
    await b.close();
    const seen = aErrors.length;
    const outsider = mk('b', await loadPeerTls(s.path('evil')), outsiderErrors);
    await outsider.listen(Number(addrB.split(':')[1]), '127.0.0.1');
    outsider.addPeer('a', addrA);
    outsider.send([heartbeat('b', 'a', 2)]);
    // its certificate does not chain to a's root (signed by its own root, directly or through its signing CA)
    const foreign = /unable to get local issuer certificate|self-signed certificate in certificate chain/;
    await waitFor(() => aErrors.slice(seen).some((e) => foreign.test(e)));
    await new Promise((r) => setTimeout(r, 100));
    expect(got.map((m) => m.term)).toEqual([1]);
  });

  it('loadPeerTls refuses missing, mismatched or foreign material', async () => {
    expect(await refusal(loadPeerTls(s.path('nowhere')))).toBe('MISSING_FILE');
    const d = s.path('m');
    await initClusterPki(d, { nodeId: 'm', hosts: [] });
    const other = s.path('m2');
    await initClusterPki(other, { nodeId: 'm2', hosts: [] });
    const key = readFileSync(`${d}/node.key.pem`, 'utf8');
    writeFileSync(`${d}/node.key.pem`, readFileSync(`${other}/node.key.pem`));
    expect(await refusal(loadPeerTls(d))).toBe('KEY_MISMATCH');
    writeFileSync(`${d}/node.key.pem`, key);
    writeFileSync(`${d}/ca.cert.pem`, readFileSync(`${other}/ca.cert.pem`));
    expect(await refusal(loadPeerTls(d))).toBe('CERT_INVALID');
    writeFileSync(`${d}/ca.cert.pem`, readFileSync(`${d}/ca/root.cert.pem`));
    expect((await loadPeerTls(d)).nodeId).toBe('m');
  });

  it('completes a CA interrupted mid-write, and builds a signing CA under a root the operator provides', async () => {
    const d = s.path('crash');
    const first = await ensureClusterCa(d);
    expect(first).not.toBeNull();
    const root = readFileSync(`${d}/ca/root.cert.pem`, 'utf8');
    // As if the process died after writing the signing key: no signing certificate, no ca.cert.pem marker.
    rmSync(`${d}/ca/signing.cert.pem`);
    rmSync(`${d}/ca.cert.pem`);
    const again = await ensureClusterCa(d);
    expect(again!.certPem).not.toBe(first!.certPem);
    expect(readFileSync(`${d}/ca.cert.pem`, 'utf8')).toBe(root);
    expect((await verifyChain(again!.certPem, [], [root])).ok).toBe(true);
    expect(readdirSync(`${d}/ca`).filter((f) => f.includes('.tmp-'))).toEqual([]);
    // A complete CA is reused as is; an orphan node key is replaced by init.
    expect((await ensureClusterCa(d))!.certPem).toBe(again!.certPem);
    writeFileSync(`${d}/node.key.pem`, 'orphan');
    await initClusterPki(d, { nodeId: 'c', hosts: [] });
    expect((await loadPeerTls(d)).nodeId).toBe('c');

    const op = s.path('operator-root');
    mkdirSync(`${op}/ca`, { recursive: true });
    opensslSelfSigned(`${op}/ca/root.key.pem`, `${op}/ca/root.cert.pem`, '/CN=Operator Root', CA_EXTENSIONS, 'P-384');
    const signing = await ensureClusterCa(op);
    expect(readFileSync(`${op}/ca.cert.pem`, 'utf8')).toBe(readFileSync(`${op}/ca/root.cert.pem`, 'utf8'));
    const v = openssl(['verify', '-CAfile', `${op}/ca/root.cert.pem`, `${op}/ca/signing.cert.pem`]);
    expect(v.stdout).toContain(': OK');
    expect(signing!.chainPem).toEqual([readFileSync(`${op}/ca/root.cert.pem`, 'utf8')]);
    // A join bundle carries the cluster's one signing CA (its key too): the member signs with the same CA.
    await issueNodeBundle(op, s.path('op-bundle'), { nodeId: 'j', hosts: [] });
    const shared = await ensureClusterCa(s.path('op-bundle'));
    expect(shared).toEqual(signing);
    expect(mode(`${s.path('op-bundle')}/ca/signing.key.pem`)).toBe(0o600);
    expect(existsSync(`${s.path('op-bundle')}/ca/root.key.pem`)).toBe(false); // the root key stays where it is
    expect(await refusal(initClusterPki(s.path('op-bundle'), { nodeId: 'k', hosts: [] }))).toBe('ALREADY_EXISTS');
    const memberApi = await ensureApiTls(s.path('op-bundle'), { hosts: ['localhost'] });
    const rootPem = readFileSync(`${op}/ca/root.cert.pem`, 'utf8');
    const [apiLeaf, ...apiRest] = memberApi.cert.split(/(?<=-----END CERTIFICATE-----)\n/).filter((x) => x.trim());
    expect(await verifyChain(apiLeaf!, apiRest, [rootPem], { purpose: 'server' })).toMatchObject({ ok: true });
    // Issued without the signing CA, a bundle cannot sign: it carries an API certificate for the node's hosts instead.
    const bare = s.path('op-bundle-bare');
    expect(
      await refusal(issueNodeBundle(op, s.path('op-bundle-nohosts'), { nodeId: 'j', hosts: [], withSigningCa: false })),
    ).toBe('INVALID_ARGUMENT');
    await issueNodeBundle(op, bare, { nodeId: 'j2', hosts: ['j2.example.com'], withSigningCa: false });
    expect(await ensureClusterCa(bare)).toBeNull();
    expect(existsSync(`${bare}/ca`)).toBe(false);
    // its API certificate is used as it is even for other hosts (nothing here could issue another one)
    const bareApi = await ensureApiTls(bare, { hosts: ['localhost'] });
    expect(openssl(['x509', '-noout', '-ext', 'subjectAltName'], bareApi.cert).stdout).toContain('DNS:j2.example.com');
    rmSync(`${bare}/api.cert.pem`);
    expect(await refusal(ensureApiTls(bare, { hosts: ['localhost'] }))).toBe('MISSING_FILE');
    // such a member can be given the signing CA later (only from a CA under the root it trusts)
    expect(await refusal(shareSigningCa(d, bare))).toBe('CERT_INVALID');
    await shareSigningCa(op, bare);
    expect(await ensureClusterCa(bare)).toEqual(signing);
    expect((await ensureApiTls(bare, { hosts: ['localhost'] })).ca).toBe(rootPem);
    // A root certificate without its key cannot sign.
    const nokey = s.path('nokey');
    mkdirSync(`${nokey}/ca`, { recursive: true });
    writeFileSync(`${nokey}/ca/root.cert.pem`, readFileSync(`${op}/ca/root.cert.pem`));
    expect(await refusal(ensureClusterCa(nokey))).toBe('MISSING_FILE');
  });

  it('issues the API certificate once, replacing an orphan key', async () => {
    const d = s.path('api');
    expect(await refusal(ensureApiTls(d, { hosts: [] }))).toBe('INVALID_ARGUMENT');
    await ensureClusterCa(d);
    writeFileSync(`${d}/api.key.pem`, 'orphan');
    const api = await ensureApiTls(d, { hosts: ['localhost', '127.0.0.1'] });
    expect(mode(`${d}/api.key.pem`)).toBe(0o600);
    // the same hosts (or fewer): the certificate on disk is kept
    expect((await ensureApiTls(d, { hosts: ['localhost', '127.0.0.1'] })).cert).toBe(api.cert);
    expect((await ensureApiTls(d, { hosts: ['127.0.0.1'] })).cert).toBe(api.cert);
    const t = openssl(['x509', '-noout', '-text', '-in', `${d}/api.cert.pem`]).stdout;
    expect(t).toContain('DNS:localhost, IP Address:127.0.0.1');
    expect(t).not.toContain('TLS Web Client Authentication');
  });

  it('issues the API certificate anew for a host it lacks (IPv6 written any way), or when it expires soon', async () => {
    const d = s.path('api-renew');
    const first = await ensureApiTls(d, { hosts: ['localhost', '::1'] });
    expect((await ensureApiTls(d, { hosts: ['LOCALHOST', '0:0:0:0:0:0:0:1'] })).cert).toBe(first.cert);
    const moved = await ensureApiTls(d, { hosts: ['ctl.example.com', '10.0.0.7'] });
    expect(moved.cert).not.toBe(first.cert);
    const sans = openssl(['x509', '-noout', '-ext', 'subjectAltName'], moved.cert).stdout;
    expect(sans).toContain('DNS:ctl.example.com');
    expect(sans).toContain('IP Address:10.0.0.7');
    expect(moved.key).not.toBe(first.key);
    const notAfter = new x509.X509Certificate(moved.cert).notAfter.getTime();
    const later = notAfter - API_CERT_RENEW_BEFORE_MS + 1000;
    const renewed = await ensureApiTls(d, { hosts: ['ctl.example.com'], now_ms: later });
    expect(renewed.cert).not.toBe(moved.cert);
    expect((await ensureApiTls(d, { hosts: ['ctl.example.com'], now_ms: later - 2000 })).cert).toBe(renewed.cert);
    // a wildcard SAN covers the names one label below it (an operator's certificate put there is kept)
    const signing = (await ensureClusterCa(d))!;
    const wild = await issueServerCert(signing, { commonName: 'wild', dnsNames: ['*.example.com'] });
    writeFileSync(`${d}/api.key.pem`, wild.keyPem);
    const wildChain = `${wild.certPem}\n${signing.certPem}\n`;
    writeFileSync(`${d}/api.cert.pem`, wildChain);
    expect((await ensureApiTls(d, { hosts: ['ctl.example.com'] })).cert).toBe(wildChain);
    expect((await ensureApiTls(d, { hosts: ['a.b.example.com'] })).cert).not.toBe(wildChain);
  });

  it('isLoopbackHost: only addresses that accept loopback connections alone', () => {
    for (const h of [
      '127.0.0.1',
      '127.8.9.10',
      '::1',
      '0:0:0:0:0:0:0:1',
      'localhost',
      'LocalHost',
      '::ffff:127.0.0.1',
    ]) {
      expect([h, isLoopbackHost(h)]).toEqual([h, true]);
    }
    for (const h of ['0.0.0.0', '::', '', '10.0.0.1', '128.0.0.1', 'example.com', 'localhost.example.com', '::2']) {
      expect([h, isLoopbackHost(h)]).toEqual([h, false]);
    }
  });

  it('importRootCa takes an operator root (checked) into an empty PKI directory, never replaces one', async () => {
    const mk = (name: string, extra: string[]) =>
      opensslSelfSigned(s.path(`${name}.key`), s.path(`${name}.pem`), `/CN=${name}`, extra);
    const opRoot = mk('op-root', CA_EXTENSIONS);
    const other = mk('other-root', CA_EXTENSIONS);
    const notCa = mk('not-ca', ['-addext', 'basicConstraints=critical,CA:FALSE']);
    const d = s.path('imported');
    expect(await refusal(importRootCa(d, notCa.cert, notCa.key))).toBe('CERT_INVALID');
    expect(await refusal(importRootCa(d, opRoot.cert, other.key))).toBe('KEY_MISMATCH');
    expect(await refusal(importRootCa(d, opRoot.cert + other.cert, opRoot.key))).toBe('CERT_MALFORMED');
    expect(existsSync(d)).toBe(false); // nothing written by a refusal
    await importRootCa(d, opRoot.cert, opRoot.key);
    const signing = await ensureClusterCa(d);
    expect(signing!.chainPem[0]!.trim()).toBe(new x509.X509Certificate(opRoot.cert).toString('pem').trim());
    expect(openssl(['verify', '-CAfile', s.path('op-root.pem'), `${d}/ca/signing.cert.pem`]).stdout).toContain(': OK');
    await importRootCa(d, opRoot.cert, opRoot.key); // the same root again: nothing to do
    expect(await refusal(importRootCa(d, other.cert, other.key))).toBe('ALREADY_EXISTS');
    // an intermediate is not a root: not self-signed
    const sub = s.path('sub-root');
    await importRootCa(sub, other.cert, other.key);
    const subSigning = await ensureClusterCa(sub);
    expect(await refusal(importRootCa(s.path('sub2'), subSigning!.certPem, subSigning!.keyPem))).toBe('CERT_INVALID');
  });

  it('peerNodeId reads the node URI only', async () => {
    const d = s.path('p');
    await initClusterPki(d, { nodeId: 'p-1.x_y', hosts: [] });
    const der = new Uint8Array(new x509.X509Certificate(readFileSync(`${d}/node.cert.pem`, 'utf8')).rawData);
    expect(peerNodeId(der)).toBe('p-1.x_y');
    expect(peerNodeId(der.buffer.slice(der.byteOffset, der.byteOffset + der.byteLength) as ArrayBuffer)).toBe(
      'p-1.x_y',
    );
    expect(peerNodeId(new Uint8Array([0, 1, 2]))).toBeNull();
    const root = new x509.X509Certificate(readFileSync(`${d}/ca/root.cert.pem`, 'utf8'));
    expect(peerNodeId(new Uint8Array(root.rawData))).toBeNull(); // no SAN
    expect(peerIdFromCert({} as never)).toBeNull();
  });
});

describe('keel pki (CLI)', () => {
  const s = new Scratch();
  afterAll(() => s.remove());

  async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const o = vi.spyOn(process.stdout, 'write').mockImplementation((c) => {
      out += String(c);
      return true;
    });
    const e = vi.spyOn(process.stderr, 'write').mockImplementation((c) => {
      err += String(c);
      return true;
    });
    try {
      return { code: await main(args), out, err };
    } finally {
      o.mockRestore();
      e.mockRestore();
    }
  }

  it('init and issue-node write material that verifies; errors exit non-zero with the code', async () => {
    const dir = s.path('pki');
    const init = await run([
      'pki',
      'init',
      '--dir',
      dir,
      '--node-id',
      'ctrl1',
      '--host',
      '127.0.0.1',
      '--host',
      'localhost',
    ]);
    expect(init.code).toBe(0);
    expect(init.out).toMatch(/fingerprint: {2}[0-9a-f]{40}/);
    const issue = await run([
      'pki',
      'issue-node',
      '--ca-dir',
      dir,
      '--node-id',
      'ctrl2',
      '--host',
      '10.0.0.2',
      '--out',
      s.path('b2'),
    ]);
    expect(issue.code).toBe(0);
    expect((await loadPeerTls(s.path('b2'))).nodeId).toBe('ctrl2');
    const v = openssl([
      'verify',
      '-CAfile',
      s.path('b2/ca.cert.pem'),
      '-untrusted',
      s.path('b2/node.cert.pem'),
      s.path('b2/node.cert.pem'),
    ]);
    expect(v.stdout).toContain(': OK');
    // the bundle carries the signing CA; with --without-signing-ca an API certificate for its hosts instead
    expect(readFileSync(s.path('b2/ca/signing.cert.pem'), 'utf8')).toBe(
      readFileSync(`${dir}/ca/signing.cert.pem`, 'utf8'),
    );
    const bare = await run([
      'pki',
      'issue-node',
      '--ca-dir',
      dir,
      '--node-id',
      'ctrl3',
      '--host',
      'c3.example.com',
      '--out',
      s.path('b3'),
      '--without-signing-ca',
    ]);
    expect(bare.code).toBe(0);
    expect(existsSync(s.path('b3/ca'))).toBe(false);
    expect(openssl(['x509', '-noout', '-ext', 'subjectAltName', '-in', s.path('b3/api.cert.pem')]).stdout).toContain(
      'DNS:c3.example.com',
    );

    const again = await run(['pki', 'init', '--dir', dir, '--node-id', 'ctrl1']);
    expect(again).toMatchObject({ code: 1 });
    expect(again.err).toContain('ALREADY_EXISTS');
    expect(
      (await run(['pki', 'issue-node', '--ca-dir', s.path('none'), '--node-id', 'x', '--out', s.path('o')])).err,
    ).toContain('MISSING_FILE');
    expect((await run(['pki', 'init', '--dir', s.path('q'), '--node-id', 'a b'])).code).toBe(1);
    expect((await run(['pki', 'init', '--dir', s.path('q'), '--node-id', 'a', '--validity-days', 'x'])).err).toContain(
      'INVALID_ARGUMENT',
    );
    expect((await run(['pki', 'init', '--node-id', 'a'])).err).toContain('--dir is required');
    expect((await run(['pki', 'frob'])).code).toBe(2);
    expect((await run(['pki', '--help'])).out).toContain('keel pki init');
  });
});
