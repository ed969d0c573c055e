/**
 * A member dialing another (peer API, forward channel) checks who answers (src/cluster/member-identity.ts): the
 * certificate must name a cluster member, the one it meant when it knows. A router's server certificate of the same
 * CA, made for the address's host name, does not pass.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, createServer, type Server } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { memberServerCheck } from '../../src/cluster/member-identity.js';
import { type PeerHandlers, peerClient } from '../../src/cluster/peer-api.js';
import { initClusterPki, issueNodeBundle, loadPeerTlsOptions, peerIdFromCert } from '../../src/pki/cluster.js';
import { issueHostCert } from '../../src/pki/index.js';
import { loadSigningCa } from '../../src/pki/pki-dir.js';
import { withTimeout } from '../../src/util/timeout.js';
import { serveForwardChannel, servePeerApi } from '../support/peer-api-server.js';

type Tls = { key: string; cert: string };

describe('the member a peer client reaches', () => {
  const servers: Server[] = [];
  let ca: string;
  let n1: Tls;
  let n2: Tls;
  let router: Tls;
  let n1Client: Awaited<ReturnType<typeof loadPeerTlsOptions>>;
  const cleanup: Array<() => void | Promise<void>> = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });
  let dir = '';
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'keel-member-identity-'));
    await initClusterPki(join(dir, 'n1'), { nodeId: 'n1', hosts: ['127.0.0.1'] });
    await issueNodeBundle(join(dir, 'n1'), join(dir, 'n2'), { nodeId: 'n2', hosts: ['127.0.0.1'] });
    const t1 = await loadPeerTlsOptions(join(dir, 'n1'));
    const t2 = await loadPeerTlsOptions(join(dir, 'n2'));
    n1Client = t1;
    ca = String(t1.ca);
    n1 = { key: String(t1.key), cert: String(t1.cert) };
    n2 = { key: String(t2.key), cert: String(t2.cert) };
    // what an enrolled router gets: a server certificate of the cluster's signing CA for the host names it asks for
    const signing = await loadSigningCa(join(dir, 'n1'));
    const leaf = await issueHostCert(signing, ['127.0.0.1']);
    router = { key: leaf.keyPem, cert: `${leaf.certPem.trim()}\n${signing.certPem}` };
  });
  afterAll(() => {
    for (const s of servers) s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Connects to a TLS server showing `tls`, with the check for `member`: null when accepted, else the error. */
  const reach = async (tls: Tls, member?: string): Promise<string | null> => {
    const server = createServer(tls, (s) => s.end());
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    return new Promise((resolve) => {
      const s = connect({
        host: '127.0.0.1',
        port,
        ca,
        checkServerIdentity: memberServerCheck(peerIdFromCert, member),
      });
      s.once('secureConnect', () => {
        resolve(null);
        s.destroy();
      });
      s.once('error', (err) => resolve(err.message));
    });
  };

  it('a member, the one meant or any one when none is meant: accepted', async () => {
    expect(await reach(n1, 'n1')).toBeNull();
    expect(await reach(n2)).toBeNull();
  });

  it('another member than the one meant: refused', async () => {
    expect(await reach(n2, 'n1')).toMatch(/is n2, not n1/);
  });

  it("a router's certificate for the right host name: refused, whether a member is meant or not", async () => {
    expect(await reach(router, 'n1')).toMatch(/names no cluster member/);
    expect(await reach(router)).toMatch(/names no cluster member/);
  });

  it("the peer API client: a member's status is read; a router's answer for the member's address is not", async () => {
    const handlers = { status: () => ({ id: 'n2' }) } as unknown as PeerHandlers;
    const status = async (tls: Tls, member?: string) => {
      const address = await servePeerApi(handlers, null, cleanup, tls);
      const c = peerClient(address, n1Client, undefined, member);
      cleanup.push(() => c.close());
      return withTimeout(c.api.status.query(), 1_000, 'status').then(
        (s) => (s as { id: string }).id,
        () => 'no answer',
      );
    };
    expect(await status(n2, 'n2')).toBe('n2');
    expect(await status(router, 'n2')).toBe('no answer');
    expect(await status(router)).toBe('no answer');
    expect(await status(n2, 'n1')).toBe('no answer');
  });

  it("the forward channel's client: a member takes the forward; a router's answer for the member's address never gets it", async () => {
    const forward = async (tls: Tls, member?: string) => {
      const { address } = await serveForwardChannel(async (items) => items.map(() => ({ ok: true })), cleanup, {
        tls,
      });
      const c = peerClient(address, n1Client, undefined, member);
      cleanup.push(() => c.close());
      // null: never sent (a definite refusal the proposer may retry), never an outcome left unknown
      return c.forward.send(7, [new Uint8Array([1])], 1_000, 1_000);
    };
    expect(await forward(n2, 'n2')).toEqual([{ ok: true }]);
    expect(await forward(router, 'n2')).toBeNull();
    expect(await forward(router)).toBeNull();
    expect(await forward(n2, 'n1')).toBeNull();
  });
});
