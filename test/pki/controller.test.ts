import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { apiCertHosts } from '../../src/pki/index.js';
import { ADMIN_PASSWORD, call, startServer, type TestServer } from '../support/server.js';
import { tlsCall } from '../support/tls-call.js';
import { httpsGet, OPENSSL, openssl, opensslCa, opensslIssue, Scratch } from './helpers.js';

describe('the controller PKI: /.well-known/est/cacerts and API TLS', () => {
  const servers: TestServer[] = [];
  const s = new Scratch();
  afterEach(async () => {
    for (const srv of servers.splice(0)) await srv.stop();
  });
  afterAll(() => s.remove());

  it('serves the CA bundle over plain HTTP by default, on both APIs and the bare path, unchanged by a restart', async () => {
    const srv = await startServer();
    servers.push(srv);
    expect(srv.base.startsWith('http://')).toBe(true);
    const pkiDir = join(srv.dataDir, 'pki');
    expect(existsSync(join(pkiDir, 'ca', 'root.cert.pem'))).toBe(true);
    expect(existsSync(join(pkiDir, 'api.cert.pem'))).toBe(false);
    const bodies: string[] = [];
    for (const url of [
      `${srv.base}/.well-known/est/cacerts`,
      `${srv.client}/.well-known/est/cacerts`,
      `${srv.mgmt}/.well-known/est/cacerts`,
    ]) {
      const res = await fetch(url);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/pkcs7-mime');
      bodies.push(await res.text());
    }
    expect(new Set(bodies).size).toBe(1);
    s.write('bundle.p7', Buffer.from(bodies[0]!, 'base64'));
    const printed = openssl(['pkcs7', '-inform', 'DER', '-in', s.path('bundle.p7'), '-print_certs']);
    expect(printed.status).toBe(0);
    expect(printed.stdout).toContain('subject=CN = Keel Root CA');
    expect(printed.stdout).toContain('subject=CN = Keel Signing CA');
    // The bundle's root is the one on disk.
    const root = openssl(['x509', '-noout', '-fingerprint', '-in', join(pkiDir, 'ca.cert.pem')]).stdout;
    s.write('certs.pem', printed.stdout);
    expect(openssl(['x509', '-noout', '-fingerprint', '-in', s.path('certs.pem')]).stdout).toBe(root);
    // Documented without a session, with its own content type.
    const spec = (await call('GET', `${srv.client}/swagger.json`)).body;
    expect(spec.paths['/.well-known/est/cacerts'].get.produces).toEqual(['application/pkcs7-mime']);
    expect(spec.paths['/.well-known/est/cacerts'].get.security).toEqual([]);

    await srv.stop({ keepData: true });
    servers.pop();
    const again = await startServer({ dataDir: srv.dataDir });
    servers.push(again);
    expect(await (await fetch(`${again.client}/.well-known/est/cacerts`)).text()).toBe(bodies[0]);
  });

  it('serves HTTPS with apiTls: a certificate issued on first start, kept across restarts, trusted via the root', async () => {
    const srv = await startServer({ apiTls: true });
    servers.push(srv);
    expect(srv.base.startsWith('https://127.0.0.1:')).toBe(true);
    const pkiDir = join(srv.dataDir, 'pki');
    const ca = readFileSync(join(pkiDir, 'ca.cert.pem'), 'utf8');
    const version = await httpsGet(`${srv.base}/edge/client/v1/version`, ca);
    expect(version.status).toBe(200);
    expect(JSON.parse(version.body).data.apiVersions['edge-client'].v1.apiBaseUrls[0]).toBe(
      `${srv.base}/edge/client/v1`,
    );
    const byName = await httpsGet(srv.base.replace('127.0.0.1', 'localhost') + '/.well-known/est/cacerts', ca);
    expect(byName).toMatchObject({ status: 200, type: 'application/pkcs7-mime' });
    const v = openssl([
      'verify',
      '-CAfile',
      join(pkiDir, 'ca.cert.pem'),
      '-untrusted',
      join(pkiDir, 'api.cert.pem'),
      '-purpose',
      'sslserver',
      join(pkiDir, 'api.cert.pem'),
    ]);
    expect(v.stdout).toContain(': OK');
    // An untrusting client refuses it.
    await expect(fetch(`${srv.base}/version`)).rejects.toThrow();
    const cert = readFileSync(join(pkiDir, 'api.cert.pem'), 'utf8');
    await srv.stop({ keepData: true });
    servers.pop();
    const again = await startServer({ dataDir: srv.dataDir, apiTls: true });
    servers.push(again);
    expect(readFileSync(join(pkiDir, 'api.cert.pem'), 'utf8')).toBe(cert);
    expect((await httpsGet(`${again.base}/version`, ca)).status).toBe(200);
  });

  it('refuses API TLS on the uWS engine', async () => {
    await expect(startServer({ dataDir: s.path('uws'), apiTls: true, engine: 'uws' })).rejects.toThrow(/node engine/);
  });

  it('names the advertised and listen hosts in the API certificate', () => {
    expect(apiCertHosts('127.0.0.1', ['https://ctrl.example.com:1280'])).toEqual([
      'ctrl.example.com',
      '127.0.0.1',
      'localhost',
      '::1',
    ]);
    expect(apiCertHosts('10.0.0.5', ['https://[fd00::1]:443', 'not a url'])).toEqual(['fd00::1', '10.0.0.5']);
    expect(apiCertHosts('0.0.0.0', [])).toContain('localhost');
  });

  it('the HTTPS listener names its own CAs and every verified CA when it asks for a client certificate', async () => {
    const srv = await startServer({ engine: 'node', apiTls: true });
    servers.push(srv);
    const ca = readFileSync(join(srv.dataDir, 'pki', 'ca.cert.pem'), 'utf8');
    const { port } = new URL(srv.base);
    // asynchronously: the server runs in this process, a synchronous openssl would block its event loop
    const acceptable = async () => {
      const child = execFile(OPENSSL, ['s_client', '-connect', `127.0.0.1:${port}`], { timeout: 20_000 });
      child.stdin?.end();
      let out = '';
      child.stdout?.on('data', (d) => (out += d));
      await new Promise((r) => child.on('close', r));
      const at = out.indexOf('Acceptable client certificate CA names');
      expect(at).toBeGreaterThan(-1);
      return out.slice(at, out.indexOf('Requested Signature Algorithms', at));
    };
    const mgmt = (method: string, path: string, opts: { body?: unknown; raw?: string } = {}) =>
      tlsCall(method, `${srv.mgmt}${path}`, {
        ca,
        token: admin,
        ...(opts.raw !== undefined ? { raw: opts.raw } : { body: opts.body }),
      });
    const admin = (
      await tlsCall('POST', `${srv.mgmt}/authenticate?method=password`, {
        ca,
        body: { username: 'admin', password: ADMIN_PASSWORD },
      })
    ).headers['zt-session'] as string;
    expect(await acceptable()).toContain('CN = Keel Root CA');
    expect(await acceptable()).toContain('CN = Keel Signing CA');
    const pem = opensslCa(s, 'Third Party CA');
    const created = await mgmt('POST', '/cas', {
      body: {
        name: 'third',
        certPem: pem,
        isAutoCaEnrollmentEnabled: false,
        isOttCaEnrollmentEnabled: true,
        isAuthEnabled: true,
        identityRoles: [],
      },
    });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    expect(await acceptable()).not.toContain('Third Party CA'); // not verified yet
    const token = (await mgmt('GET', `/cas/${id}`)).body.data.verificationToken as string;
    expect(
      (await mgmt('POST', `/cas/${id}/verify`, { raw: opensslIssue(s, 'Third Party CA', 'proof', token) })).status,
    ).toBe(200);
    expect(await acceptable()).toContain('CN = Third Party CA');
    expect((await mgmt('DELETE', `/cas/${id}`)).status).toBe(200);
    expect(await acceptable()).not.toContain('Third Party CA');
    expect(await acceptable()).toContain('CN = Keel Root CA');
  });
});
