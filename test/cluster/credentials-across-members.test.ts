/**
 * Credentials across a cluster. The MFA wrong-code limit holds across it (in-process: three controllers in this process, Raft over their
 * mutual-TLS peer listeners): a partial session's wrong codes count wherever they arrive, so MAX_MFA_FAILURES of
 * them spread over the members end it on every member, not MAX_MFA_FAILURES per member. And a login on a member that
 * has not applied the credential yet waits for it to catch up instead of failing, as do an enrollment, and a
 * router connecting to a member that has not applied its enrollment yet.
 */
import { X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import { importPKCS8, SignJWT } from 'jose';
import { generate } from 'otplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extendRouter } from '../../src/auth/router-enrollment.js';
import { clusterCommand } from '../../src/cli/cluster.js';
import { CONFIRM_APPLIED_TIMEOUT_MS } from '../../src/cluster/node.js';
import { DEFAULT_AUTH_POLICY } from '../../src/model/auth-policy.js';
import { MAX_MFA_FAILURES } from '../../src/model/mfa.js';
import { createRootCa, issueLeaf } from '../../src/pki/ca.js';
import { generateKeyPair } from '../../src/pki/crypto.js';
import { MAX_ROUTER_CATCH_UPS } from '../../src/routers/control.js';
import { openEdgeRouter } from '../support/admin-api.js';
import { connectRouter, csr, enrolledRouter, type Probe, probe } from '../support/router-client.js';
import { call, login, type TestServer } from '../support/server.js';
import { inProcessCluster } from './in-process.js';
import { until } from './support.js';

const setup = inProcessCluster('keel-mfa-cluster-', ['n1', 'n2', 'n3'], {
  routerControl: { host: '127.0.0.1', port: 0 },
});
const nodes = setup.nodes;
/** How long followers may take to apply a committed write (generous: the machine is shared). */
const SETTLE_MS = 10_000;

beforeAll(() => setup.start(), 120_000);
afterAll(() => setup.stop());

/** Waits (at most SETTLE_MS) until `ok()` holds on the members: followers apply what the leader committed shortly after. */
const settled = (ok: () => boolean) => until(() => ok() || null, SETTLE_MS, 'the members to apply it');

describe('MFA wrong codes across a cluster', () => {
  it(`${MAX_MFA_FAILURES} wrong codes spread over the members end the session on every member`, async () => {
    const [a, b, c] = nodes as [TestServer, TestServer, TestServer];
    const admin = await login(a.base);
    const created = await call('POST', `${a.mgmt}/identities`, {
      token: admin,
      body: { name: 'mfa-carol', type: 'User', isAdmin: false },
    });
    expect(created.status, created.text).toBe(201);
    const auth = await call('POST', `${a.mgmt}/authenticators`, {
      token: admin,
      body: { method: 'updb', identityId: created.body.data.id, username: 'mfa-carol', password: 'mfa-carol-pw' },
    });
    expect(auth.status, auth.text).toBe(201);
    const full = await login(a.base, 'mfa-carol', 'mfa-carol-pw');
    expect((await call('POST', `${a.client}/current-identity/mfa`, { token: full })).status).toBe(201);
    const detail = await call('GET', `${a.client}/current-identity/mfa`, { token: full });
    const secret = new URL(detail.body.data.provisioningUrl).searchParams.get('secret')!;
    const verified = await call('POST', `${a.client}/current-identity/mfa/verify`, {
      token: full,
      body: { code: await generate({ secret }) },
    });
    expect(verified.status, verified.text).toBe(200);

    // a new (partial) session, its wrong codes sent round robin to the members
    const partial = await login(b.base, 'mfa-carol', 'mfa-carol-pw');
    const sessionId = (await call('GET', `${b.client}/current-api-session`, { token: partial })).body.data.id;
    const members = [a, b, c];
    const wrong = async (n: TestServer) => {
      const r = await call('POST', `${n.client}/authenticate/mfa`, { token: partial, body: { code: '99999x' } });
      expect([r.status, r.body.error?.code], r.text).toEqual([400, 'MFA_INVALID_TOKEN']);
    };
    await wrong(a);
    await wrong(b);
    // every member holds the count, also the one no code reached
    await settled(() => members.every((n) => n.ctl.svc.get('api-sessions', sessionId)?.mfaFailures === 2));
    for (let i = 2; i < MAX_MFA_FAILURES; i++) await wrong(members[i % members.length]!);
    // ended on every member
    await settled(() => members.every((n) => n.ctl.svc.get('api-sessions', sessionId) === undefined));
    for (const n of members) {
      const r = await call('GET', `${n.client}/current-api-session`, { token: partial });
      expect([r.status, r.body.error?.code], `${n.base}: ${r.text}`).toEqual([401, 'UNAUTHORIZED']);
    }
  });
});

/**
 * A member that is not the leader, and a way to hold its applies: the entries reach its log, its store learns them
 * only when the returned `release` is called (at the latest by `done`).
 */
function laggingMember(): { via: TestServer; lagging: TestServer; release: () => void; done: () => void } {
  const via = leader();
  const lagging = nodes.find((n) => n !== via)!;
  const sm = lagging.ctl.cluster!.sm;
  const apply = sm.apply;
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  sm.apply = async (entries) => {
    await held;
    return apply.call(sm, entries);
  };
  return {
    via,
    lagging,
    release,
    done: () => {
      sm.apply = apply;
      release();
    },
  };
}

describe('a login on a member that has not applied the credential yet', () => {
  it('waits for the member to catch up: a password set through one member logs in at once on a lagging one', async () => {
    const first = leader();
    const admin = await login(first.base);
    const created = await call('POST', `${first.mgmt}/identities`, {
      token: admin,
      body: { name: 'lag-dave', type: 'User', isAdmin: false },
    });
    expect(created.status, created.text).toBe(201);
    const { via, lagging, release, done } = laggingMember();
    try {
      const auth = await call('POST', `${via.mgmt}/authenticators`, {
        token: admin,
        body: { method: 'updb', identityId: created.body.data.id, username: 'lag-dave', password: 'lag-dave-pw' },
      });
      expect(auth.status, auth.text).toBe(201);
      // the lagging member does not know the username yet
      expect(lagging.ctl.svc.store.lookup('authenticators', 'username', 'lag-dave')).toEqual([]);
      const released = setTimeout(release, 300);
      const r = await call('POST', `${lagging.base}/edge/management/v1/authenticate?method=password`, {
        body: { username: 'lag-dave', password: 'lag-dave-pw' },
      });
      clearTimeout(released);
      expect(r.status, r.text).toBe(200);
    } finally {
      done();
    }
  });

  it('an ext-jwt secondary step sent to a lagging member completes the partial session made on another', async () => {
    const first = leader();
    const admin = await login(first.base);
    const ca = await createRootCa({ commonName: 'lag-ext-jwt-signer' });
    const signer = await call('POST', `${first.mgmt}/external-jwt-signers`, {
      token: admin,
      body: {
        name: 'lag-signer',
        enabled: true,
        issuer: 'https://idp.lag.test',
        audience: 'keel-lag',
        externalAuthUrl: 'https://idp.lag.test/auth',
        certPem: ca.certPem,
        kid: 'lag-kid',
      },
    });
    expect(signer.status, signer.text).toBe(201);
    const policy = structuredClone(DEFAULT_AUTH_POLICY) as Record<string, any>;
    policy.name = 'lag-secondary';
    policy.secondary.requireExtJwtSigner = signer.body.data.id;
    const pol = await call('POST', `${first.mgmt}/auth-policies`, { token: admin, body: policy });
    expect(pol.status, pol.text).toBe(201);
    const created = await call('POST', `${first.mgmt}/identities`, {
      token: admin,
      body: { name: 'lag-erin', type: 'User', isAdmin: false, authPolicyId: pol.body.data.id },
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.data.id as string;
    const auth = await call('POST', `${first.mgmt}/authenticators`, {
      token: admin,
      body: { method: 'updb', identityId: id, username: 'lag-erin', password: 'lag-erin-pw' },
    });
    expect(auth.status, auth.text).toBe(201);
    const now_s = Math.floor(Date.now() / 1000);
    const jwt = await new SignJWT({ sub: id })
      .setProtectedHeader({ alg: 'ES256', kid: 'lag-kid' })
      .setIssuer('https://idp.lag.test')
      .setAudience('keel-lag')
      .setIssuedAt(now_s)
      .setExpirationTime(now_s + 300)
      .sign(await importPKCS8(ca.keyPem, 'ES256'));
    await settled(() => nodes.every((n) => n.ctl.svc.get('identities', id) !== undefined));

    const { via, lagging, release, done } = laggingMember();
    try {
      // the partial session is made on the leader; the lagging member has not applied it
      const pw = await call('POST', `${via.client}/authenticate?method=password`, {
        body: { username: 'lag-erin', password: 'lag-erin-pw' },
      });
      expect(pw.status, pw.text).toBe(200);
      const session = pw.headers.get('zt-session')!;
      const sessionId = pw.body.data.id as string;
      expect(lagging.ctl.svc.get('api-sessions', sessionId)).toBeUndefined();
      const released = setTimeout(release, 300);
      const second = await call('POST', `${lagging.client}/authenticate?method=ext-jwt`, {
        token: session,
        headers: { authorization: `Bearer ${jwt}` },
        body: {},
      });
      clearTimeout(released);
      // the secondary step completed the session it names (no new session handed out)
      expect(second.status, second.text).toBe(200);
      expect(second.headers.get('zt-session'), 'a new session instead of the partial one completed').toBeNull();
      expect(second.body.data.id).toBe(sessionId);
    } finally {
      done();
    }
  });
});

describe('an enrollment on a member that has not applied it yet', () => {
  it('waits for the member to catch up: a token made through one member enrolls at once on a lagging one', async () => {
    await whileLagging(async ({ admin, via, lagging, release }) => {
      const created = await call('POST', `${via.mgmt}/identities`, {
        token: admin,
        body: { name: 'lag-gina', type: 'User', isAdmin: false, enrollment: { updb: 'lag-gina' } },
      });
      expect(created.status, created.text).toBe(201);
      const detail = await call('GET', `${via.mgmt}/identities/${created.body.data.id}`, { token: admin });
      const [enrollment] = Object.values(detail.body.data.enrollment) as { token: string }[];
      // the lagging member does not know the token yet
      expect(lagging.ctl.svc.store.lookup('enrollments', 'token', enrollment!.token)).toEqual([]);
      const released = setTimeout(release, 300);
      const r = await call('POST', `${lagging.client}/enroll/updb?token=${enrollment!.token}`, {
        body: { password: 'Lag-gina-pw-2026' },
      });
      clearTimeout(released);
      expect(r.status, r.text).toBe(200);
      expect((await login(lagging.base, 'lag-gina', 'Lag-gina-pw-2026')).length).toBeGreaterThan(0);
    });
  });
});

describe('a router on a member that has not applied its enrollment yet', () => {
  it('is admitted once the member caught up: enrolled through one member, it connects to a lagging one at once', async () => {
    await whileLagging(async ({ admin, via, lagging, release }) => {
      const port = lagging.ctl.routerControl!.port;
      const creds = await enrolledRouter(via.mgmt, via.client, admin, { name: 'lag-router', roleAttributes: [] });
      // the lagging member does not know the router's certificate yet
      expect(lagging.ctl.svc.get('transit-routers', creds.id)?.isVerified).not.toBe(true);
      // and a certificate of the same CA that no router holds, sent meanwhile
      const forged = await issueLeaf(lagging.ctl.svc.pki!.signing!, { commonName: creds.id, usage: 'client' });
      const forgedCreds = { key: forged.keyPem, cert: forged.certPem, ca: creds.ca };
      const released = setTimeout(release, 300);
      const [conn, other] = await Promise.all([connectRouter(port, creds), outcome(probe(port, forgedCreds))]);
      clearTimeout(released);
      expect(conn.answer.routerId).toBe(creds.id);
      conn.close();
      // refused once the member caught up: closed after its handshake, no upgrade answered
      expect(other).toBe('closed');
    });
  });

  it(`waits on at most ${MAX_ROUTER_CATCH_UPS} unknown certificates at once: beyond, one is closed without waiting`, async () => {
    await whileLagging(async ({ admin, via, lagging, release }) => {
      const rc = lagging.ctl.routerControl!;
      const ca = lagging.ctl.svc.pki!.caPems.join('\n');
      // a write the lagging member holds, so that its catch-up waits
      const created = await call('POST', `${via.mgmt}/identities`, {
        token: admin,
        body: { name: 'lag-frank', type: 'User', isAdmin: false },
      });
      expect(created.status, created.text).toBe(201);
      const certs = await Promise.all(
        Array.from({ length: MAX_ROUTER_CATCH_UPS + 1 }, (_, i) =>
          issueLeaf(lagging.ctl.svc.pki!.signing!, { commonName: `nobody-${i}`, usage: 'client' }),
        ),
      );
      const waiting = certs
        .slice(0, MAX_ROUTER_CATCH_UPS)
        .map((c) => outcome(probe(rc.port, { key: c.keyPem, cert: c.certPem, ca })));
      await until(() => rc.catchUpsInFlight === MAX_ROUTER_CATCH_UPS || null, 5_000, 'the waits to start');
      const extra = certs[MAX_ROUTER_CATCH_UPS]!;
      expect(await outcome(probe(rc.port, { key: extra.keyPem, cert: extra.certPem, ca }))).toBe('closed');
      // closed while the others still wait: it did not wait itself (a wait ends only with the 4 s bound here, which
      // would have ended theirs too)
      expect(rc.catchUpsInFlight).toBe(MAX_ROUTER_CATCH_UPS);
      release();
      expect(await Promise.all(waiting)).toEqual(Array(MAX_ROUTER_CATCH_UPS).fill('closed'));
      await until(() => rc.catchUpsInFlight === 0 || null, 5_000, 'the waits to end');
    });
  });

  it('extends its certificate on a lagging member: the member catches up before it refuses the certificate', async () => {
    await whileLagging(async ({ admin, via, lagging, release }) => {
      const creds = await enrolledRouter(via.mgmt, via.client, admin, { name: 'lag-router-x', roleAttributes: [] });
      expect(lagging.ctl.svc.get('transit-routers', creds.id)?.isVerified).not.toBe(true);
      const csrPem = await csr(creds.id, await generateKeyPair());
      // no certificate at all: refused without waiting for the member (which would take the 4 s catch-up bound)
      const started = Date.now();
      await expect(
        extendRouter(lagging.ctl.svc, undefined, { certCsr: csrPem, serverCertCsr: csrPem }),
      ).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(2_000);
      const released = setTimeout(release, 300);
      const certs = await extendRouter(lagging.ctl.svc, [new X509Certificate(creds.cert).raw], {
        certCsr: csrPem,
        serverCertCsr: csrPem,
      });
      clearTimeout(released);
      expect(certs.cert).toContain('BEGIN CERTIFICATE');
    });
  });
});

/** What became of a router-control probe: opened, refused at the upgrade (an HTTP status), or closed before it. */
function outcome(p: Promise<Probe>): Promise<'opened' | 'refused' | 'closed'> {
  return p.then(
    (r) => {
      if ('refused' in r) return 'refused';
      r.ws.close();
      return 'opened';
    },
    () => 'closed',
  );
}

/**
 * Runs `body` with an admin session made on the leader and one member's applies held (laggingMember), released at
 * the latest when `body` ends.
 */
async function whileLagging(
  body: (m: { admin: string; via: TestServer; lagging: TestServer; release: () => void }) => Promise<void>,
): Promise<void> {
  const admin = await login(leader().base);
  const { via, lagging, release, done } = laggingMember();
  try {
    await body({ admin, via, lagging, release });
  } finally {
    done();
  }
}

/** The member the others name as leader (the first node if none is named yet). */
function leader(): TestServer {
  const leaderId = nodes[0]!.ctl.cluster!.raft.leaderId();
  return nodes.find((n) => n.ctl.cluster!.raft.id === leaderId) ?? nodes[0]!;
}

describe('where routers connect to each member', () => {
  it("every member lists each member's router control listener as its ctrlAddress (management API)", async () => {
    const token = await login(nodes[0]!.base);
    const expected = Object.fromEntries(
      nodes.map((n) => [n.ctl.cluster!.id, `tls:127.0.0.1:${n.ctl.routerControl!.port}`]),
    );
    for (const n of nodes) {
      // a member's own row at once; the others' once its status poll (every second) has reached them
      await until(
        async () => {
          const rows = (await call('GET', `${n.mgmt}/controllers`, { token })).body.data;
          const got = Object.fromEntries(rows.map((c: any) => [c.name, c.ctrlAddress]));
          return JSON.stringify(got) === JSON.stringify(expected) || null;
        },
        SETTLE_MS,
        `${n.base} to list every member's router address`,
      );
    }
    // and `keel cluster list` (each member's own status)
    const lines: string[] = [];
    const peer = ['--peer', nodes[1]!.ctl.cluster!.peerAddress, '--pki-dir', join(setup.dir, 'n1', 'pki')];
    expect(await clusterCommand(['list', ...peer], (l) => lines.push(l))).toBe(0);
    const listed = Object.fromEntries(
      lines
        .slice(1)
        .map((l) => l.split('\t'))
        .map((r) => [r[0], `tls:${r[7]}`]),
    );
    expect(listed).toEqual(expected);
  });
});

describe('sessions whose identity lost access, in a cluster', () => {
  it('are deleted once (by the leader) and gone on every member, whichever member saw the change', async () => {
    const [a, b, c] = nodes as [TestServer, TestServer, TestServer];
    const admin = await login(a.base);
    const post = async (path: string, body: unknown) => {
      const r = await call('POST', `${a.mgmt}${path}`, { token: admin, body });
      expect(r.status, r.text).toBe(201);
      return r.body.data.id as string;
    };
    await openEdgeRouter(post, 'enf');
    const identityId = await post('/identities', {
      name: 'enf-dora',
      type: 'User',
      isAdmin: false,
      roleAttributes: ['enf-dora'],
    });
    await post('/authenticators', { method: 'updb', identityId, username: 'enf-dora', password: 'enf-dora-pw' });
    const serviceId = await post('/services', { name: 'enf-svc', encryptionRequired: true, roleAttributes: ['enf'] });
    const policyId = await post('/service-policies', {
      name: 'enf-dial',
      type: 'Dial',
      semantic: 'AnyOf',
      identityRoles: ['#enf-dora'],
      serviceRoles: ['#enf'],
    });
    await settled(() => b.ctl.svc.get('service-policies', policyId) !== undefined);
    const user = await login(b.base, 'enf-dora', 'enf-dora-pw');
    const made = await call('POST', `${b.client}/sessions`, { token: user, body: { serviceId, type: 'Dial' } });
    expect(made.status, made.text).toBe(201);
    const sessionId = made.body.data.id as string;
    const patched = await call('PATCH', `${c.mgmt}/identities/${identityId}`, {
      token: await login(c.base),
      body: { roleAttributes: [] },
    });
    expect(patched.status, patched.text).toBe(200);
    await settled(() => nodes.every((n) => n.ctl.svc.get('sessions', sessionId) === undefined));
  });
});

describe('a revocation is answered once every member applied it', () => {
  /** A user's session that every member knows, and its id. */
  async function knownSession(name: string): Promise<{ token: string; id: string; identityId: string }> {
    const first = leader();
    const admin = await login(first.base);
    const created = await call('POST', `${first.mgmt}/identities`, {
      token: admin,
      body: { name, type: 'User', isAdmin: false },
    });
    expect(created.status, created.text).toBe(201);
    const identityId = created.body.data.id as string;
    const auth = await call('POST', `${first.mgmt}/authenticators`, {
      token: admin,
      body: { method: 'updb', identityId, username: name, password: `${name}-pw` },
    });
    expect(auth.status, auth.text).toBe(201);
    const token = await login(first.base, name, `${name}-pw`);
    const id = (await call('GET', `${first.client}/current-api-session`, { token })).body.data.id as string;
    await settled(() => nodes.every((n) => n.ctl.svc.get('api-sessions', id) !== undefined));
    return { token, id, identityId };
  }

  it('a logout answers once a lagging member applied it: the token is refused there at once', async () => {
    const { token, id } = await knownSession('rev-erin');
    const { via, lagging, release, done } = laggingMember();
    try {
      const t0 = Date.now();
      const released = setTimeout(release, 300);
      const out = await call('DELETE', `${via.client}/current-api-session`, { token });
      clearTimeout(released);
      expect(out.status, out.text).toBe(200);
      // answered only after the lagging member was let go and applied the logout
      expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
      expect(lagging.ctl.svc.get('api-sessions', id)).toBeUndefined();
      const r = await call('GET', `${lagging.client}/current-api-session`, { token });
      expect([r.status, r.body.error?.code], r.text).toEqual([401, 'UNAUTHORIZED']);
    } finally {
      done();
    }
  });

  it("an admin's delete of a session and an identity's disable wait the same way", async () => {
    const s1 = await knownSession('rev-finn');
    const s2 = await knownSession('rev-gail');
    const admin = await login(leader().base);
    for (const [what, revoke, session] of [
      ['delete', (via: TestServer) => call('DELETE', `${via.mgmt}/api-sessions/${s1.id}`, { token: admin }), s1],
      [
        'disable',
        (via: TestServer) =>
          call('POST', `${via.mgmt}/identities/${s2.identityId}/disable`, {
            token: admin,
            body: { durationMinutes: 0 },
          }),
        s2,
      ],
    ] as const) {
      const { via, lagging, release, done } = laggingMember();
      try {
        const released = setTimeout(release, 300);
        const out = await revoke(via);
        clearTimeout(released);
        expect(out.status, `${what}: ${out.text}`).toBe(200);
        const r = await call('GET', `${lagging.client}/current-api-session`, { token: session.token });
        expect([r.status, r.body.error?.code], `${what}: ${r.text}`).toEqual([401, 'UNAUTHORIZED']);
      } finally {
        done();
      }
    }
  });

  it(`a member that does not apply within ${CONFIRM_APPLIED_TIMEOUT_MS} ms is not waited for longer`, async () => {
    const { token } = await knownSession('rev-hugo');
    const { via, done } = laggingMember();
    try {
      const t0 = Date.now();
      const out = await call('DELETE', `${via.client}/current-api-session`, { token });
      const took_ms = Date.now() - t0;
      expect(out.status, out.text).toBe(200);
      expect(took_ms).toBeGreaterThanOrEqual(CONFIRM_APPLIED_TIMEOUT_MS - 50);
      expect(took_ms).toBeLessThan(CONFIRM_APPLIED_TIMEOUT_MS + 3_000);
    } finally {
      done();
    }
  });
});
