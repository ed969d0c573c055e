import { createServer as createHttpsServer, request as httpsRequest, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type CaMaterial,
  createIntermediateCa,
  createRootCa,
  issuePeerCert,
  issueServerCert,
  peerNodeId,
  signCsr,
} from '../../src/pki/index.js';
import { opensslCsr, Scratch } from './helpers.js';

type ClientTls = { key?: string; cert?: string; ca: string; servername?: string };

/** One HTTPS GET; resolves with the body, or the error's code when the TLS handshake or request fails. */
function get(port: number, tls: ClientTls): Promise<{ ok: true; body: string } | { ok: false; code: string }> {
  return new Promise((resolve) => {
    const req = httpsRequest(
      { host: '127.0.0.1', port, path: '/', method: 'GET', agent: false, timeout: 10_000, ...tls },
      (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ ok: true, body }));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ ok: false, code: err.code ?? err.message }));
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

describe('certificates in node:tls mutual TLS', () => {
  const s = new Scratch();
  let root: CaMaterial;
  let signing: CaMaterial;
  let server: Server;
  let port: number;
  beforeAll(async () => {
    root = await createRootCa({ commonName: 'TLS Root' });
    signing = await createIntermediateCa(root, { commonName: 'TLS Signing' });
    const srv = await issueServerCert(signing, {
      commonName: 'api',
      ipAddresses: ['127.0.0.1'],
      dnsNames: ['localhost'],
    });
    server = createHttpsServer(
      {
        key: srv.keyPem,
        cert: `${srv.certPem}\n${signing.certPem}`,
        ca: root.certPem,
        requestCert: true,
        rejectUnauthorized: true,
      },
      (req, res) => {
        const peer = (req.socket as TLSSocket).getPeerCertificate();
        res.end(JSON.stringify({ cn: peer.subject?.CN, node: peerNodeId(peer.raw) }));
      },
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    s.remove();
  });

  it('accepts a client certificate issued by the signing CA (fresh key, and from an openssl CSR)', async () => {
    const client = await issuePeerCert(signing, { nodeId: 'n2', hosts: [] });
    const r1 = await get(port, { key: client.keyPem, cert: `${client.certPem}\n${signing.certPem}`, ca: root.certPem });
    expect(r1).toEqual({ ok: true, body: JSON.stringify({ cn: 'n2', node: 'n2' }) });

    const csr = opensslCsr(s, 'alice', 'ec', '/CN=alice');
    const certPem = await signCsr(signing, csr, { usage: 'client' });
    const r2 = await get(port, { key: s.read('alice.key'), cert: `${certPem}\n${signing.certPem}`, ca: root.certPem });
    // Not a node: its CN does not make it one.
    expect(r2).toEqual({ ok: true, body: JSON.stringify({ cn: 'alice', node: null }) });
  });

  it('refuses a client without a certificate or with one from another CA', async () => {
    expect((await get(port, { ca: root.certPem })).ok).toBe(false);
    const otherRoot = await createRootCa({ commonName: 'TLS Root' }); // same name, other key
    const otherSigning = await createIntermediateCa(otherRoot, { commonName: 'TLS Signing' });
    const intruder = await issueServerCert(otherSigning, { commonName: 'n2', usage: 'both' });
    const r = await get(port, {
      key: intruder.keyPem,
      cert: `${intruder.certPem}\n${otherSigning.certPem}`,
      ca: root.certPem,
    });
    expect(r.ok).toBe(false);
  });

  it('lets the client check the server against the root and its SANs', async () => {
    const client = await issueServerCert(signing, { commonName: 'c', usage: 'client' });
    const tls = { key: client.keyPem, cert: `${client.certPem}\n${signing.certPem}` };
    expect((await get(port, { ...tls, ca: root.certPem, servername: 'localhost' })).ok).toBe(true);
    const otherRoot = await createRootCa({ commonName: 'Elsewhere' });
    expect(await get(port, { ...tls, ca: otherRoot.certPem })).toMatchObject({ ok: false });
  });
});
