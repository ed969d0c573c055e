/**
 * Operations of the management API beyond the entities (docs/operations.md): revocations, controller settings,
 * database snapshot and data integrity, identity tracing — step by step, with their error cases. Every call goes
 * through `conformant`/`call`, so each answer is validated against OpenZiti's spec.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_URIS } from '../../src/model/controller-setting.js';
import { buildSchema } from '../../src/model/index.js';
import { REVOCATION_LIFETIME_MS } from '../../src/model/revocation.js';
import { MAX_SNAPSHOT_FILES, SNAPSHOT_DIR, SNAPSHOT_MIN_INTERVAL_MS } from '../../src/ops/database.js';
import { MAX_TRACE_CHANNELS } from '../../src/ops/identity-trace.js';
import type { RoleIndex } from '../../storage/role-index.js';
import { Store } from '../../storage/store.js';
import { expectError, userWith } from '../support/api.js';
import { manualClock } from '../support/clock.js';
import { conformant, ownOperations } from '../support/conformance.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

let srv: TestServer;
let root: string;
const M = 'management' as const;

beforeAll(async () => {
  srv = await startServer();
  root = await login(srv.base);
});
afterAll(async () => {
  const { missing } = ownOperations('test/api/operations.test.ts', srv.ctl.ops);
  await srv.stop();
  expect(missing).toEqual([]);
});

const sessionWorks = async (token: string) =>
  (await call('GET', `${srv.client}/current-api-session`, { token })).status === 200;

describe('revocations', () => {
  const revoke = (body: unknown, token = root) => conformant(M, 'POST', '/revocations', srv.base, { token, body });

  it('IDENTITY ends the sessions the identity has, not the ones it starts afterwards', async () => {
    const u = await userWith(srv.base, root, 'revoked-user');
    const second = await login(srv.base, 'revoked-user', 'revoked-user-pass');
    const bystander = await userWith(srv.base, root, 'bystander');
    const before = Date.now();
    const r = await revoke({ id: u.id, type: 'IDENTITY', tags: { why: 'lost laptop' } });
    expect(r.status, r.text).toBe(201);
    expect(r.body.data.id).toBe(u.id);
    expect(await sessionWorks(u.token)).toBe(false);
    expect(await sessionWorks(second)).toBe(false);
    expect(await sessionWorks(bystander.token)).toBe(true);
    // a login after the revocation is a new token, valid
    expect(await sessionWorks(await login(srv.base, 'revoked-user', 'revoked-user-pass'))).toBe(true);
    const d = await conformant(M, 'GET', '/revocations/{id}', srv.base, { token: root, params: { id: u.id } });
    expect(d.status, d.text).toBe(200);
    expect(d.body.data).toMatchObject({ id: u.id, type: 'IDENTITY', tags: { why: 'lost laptop' } });
    const lifetime = Date.parse(d.body.data.expiresAt) - before;
    expect(lifetime).toBeGreaterThanOrEqual(REVOCATION_LIFETIME_MS);
    expect(lifetime).toBeLessThan(REVOCATION_LIFETIME_MS + 60_000);
    // the same id again is a conflict on `id`
    expectError(await revoke({ id: u.id, type: 'IDENTITY' }), 400, 'COULD_NOT_VALIDATE', 'id');
  });

  it('API_SESSION ends that one session', async () => {
    const u = await userWith(srv.base, root, 'session-revoked');
    const other = await login(srv.base, 'session-revoked', 'session-revoked-pass');
    const sid = (await call('GET', `${srv.client}/current-api-session`, { token: u.token })).body.data.id;
    const r = await revoke({ id: sid, type: 'API_SESSION' });
    expect(r.status, r.text).toBe(201);
    expect(await sessionWorks(u.token)).toBe(false);
    expect(await sessionWorks(other)).toBe(true);
    // a UUID is accepted (OpenZiti's OIDC session ids) even when Keel has no such session
    const uuid = '0b6a1c1e-7d0e-4a8e-9a36-6c1f1f0f7a11';
    expect((await revoke({ id: uuid, type: 'API_SESSION' })).status).toBe(201);
  });

  it('JTI is recorded (Keel issues no JWT bearer tokens it would refuse)', async () => {
    const jti = '7c1d2a52-1f0b-4b7d-8d9c-0e7f2d6b3a90';
    expect((await revoke({ id: jti, type: 'JTI' })).status).toBe(201);
    const list = await conformant(M, 'GET', '/revocations', srv.base, {
      token: root,
      query: `filter=${encodeURIComponent('type = "JTI"')}`,
    });
    expect(list.status, list.text).toBe(200);
    expect(list.body.data.map((x: { id: string }) => x.id)).toEqual([jti]);
    expect(await sessionWorks(root)).toBe(true);
  });

  it('refuses what OpenZiti refuses', async () => {
    expectError(await revoke({ id: 'no-such-identity', type: 'IDENTITY' }), 404, 'NOT_FOUND');
    expectError(await revoke({ id: 'not-a-uuid', type: 'JTI' }), 400, 'COULD_NOT_VALIDATE', 'id');
    expectError(await revoke({ id: 'not-a-session', type: 'API_SESSION' }), 400, 'COULD_NOT_VALIDATE', 'id');
    expectError(await revoke({ id: 'x', type: 'TOKEN' }), 400, 'COULD_NOT_VALIDATE');
    expectError(await revoke({ type: 'JTI' }), 400, 'COULD_NOT_VALIDATE');
    expectError(await revoke({ id: '', type: 'JTI' }), 400, 'COULD_NOT_VALIDATE');
    const plain = await userWith(srv.base, root, 'not-allowed-to-revoke');
    expectError(await revoke({ id: plain.id, type: 'IDENTITY' }, plain.token), 401, 'UNAUTHORIZED');
    expect(await sessionWorks(plain.token)).toBe(true);
    expectError(
      await conformant(M, 'GET', '/revocations/{id}', srv.base, { token: root, params: { id: 'nope' } }),
      404,
      'NOT_FOUND',
    );
  });

  it('expired revocations are removed by the next one written', async () => {
    const svc = srv.ctl.svc;
    const past = new Date(Date.now() - 1000).toISOString();
    await svc.write({
      op: 'batch',
      ops: ['old-1', 'old-2'].map((id) => ({
        op: 'create' as const,
        entity: 'revocations',
        id,
        data: { type: 'JTI', expiresAt: past },
        at: past,
      })),
    });
    expect(svc.get('revocations', 'old-1')).toBeDefined();
    expect((await revoke({ id: '5f0e0c52-3a1b-4c2d-9e8f-7a6b5c4d3e2f', type: 'JTI' })).status).toBe(201);
    expect(svc.get('revocations', 'old-1')).toBeUndefined();
    expect(svc.get('revocations', 'old-2')).toBeUndefined();
  });
});

describe('controller settings', () => {
  const effective = async (id: string) => {
    const r = await conformant(M, 'GET', '/controller-settings/{id}/effective', srv.base, {
      token: root,
      params: { id },
    });
    expect(r.status, r.text).toBe(200);
    return r.body.data;
  };
  const change = (method: 'PUT' | 'PATCH', id: string, body: unknown) =>
    conformant(M, method, '/controller-settings/{id}/effective', srv.base, { token: root, params: { id }, body });

  it('global, a controller’s own, and the two merged', async () => {
    const ctl = (await call('GET', `${srv.mgmt}/controllers`, { token: root })).body.data[0].id as string;
    const list = await conformant(M, 'GET', '/controller-settings', srv.base, { token: root });
    expect(list.status, list.text).toBe(200);
    expect(list.body.data.map((x: { id: string }) => x.id)).toEqual(['global']);
    const global = await conformant(M, 'GET', '/controller-settings/{id}', srv.base, {
      token: root,
      params: { id: 'global' },
    });
    expect(global.body.data).toMatchObject({ id: 'global', oidc: {} });
    // before it has settings of its own, a controller has the global ones
    expect(await effective(ctl)).toMatchObject({ id: ctl, effective: { oidc: {} } });
    expect((await effective(ctl)).instance).toBeUndefined();

    const redirect = ['https://console.example/callback', 'http://127.0.0.1:*/auth/callback'];
    expect((await change('PATCH', 'global', { oidc: { redirectUris: redirect } })).status).toBe(200);
    expect((await effective('global')).effective.oidc).toEqual({ redirectUris: redirect });

    const created = await conformant(M, 'POST', '/controller-settings', srv.base, {
      token: root,
      body: { controllerId: ctl, oidc: { postLogoutUris: ['https://console.example/bye'] }, tags: { site: 'a' } },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.id).toBe(ctl);
    const merged = await effective(ctl);
    expect(merged.effective.oidc).toEqual({ redirectUris: redirect, postLogoutUris: ['https://console.example/bye'] });
    expect(merged.instance.oidc).toEqual({ postLogoutUris: ['https://console.example/bye'] });
    // an own setting overrides the global one; PUT replaces the whole object, PATCH only what it names
    expect((await change('PATCH', ctl, { oidc: { redirectUris: ['https://own.example/cb'] } })).status).toBe(200);
    expect((await effective(ctl)).effective.oidc).toEqual({
      redirectUris: ['https://own.example/cb'],
      postLogoutUris: ['https://console.example/bye'],
    });
    expect((await change('PUT', ctl, { oidc: { redirectUris: ['https://put.example/cb'] } })).status).toBe(200);
    const afterPut = await effective(ctl);
    expect(afterPut.instance.oidc).toEqual({ redirectUris: ['https://put.example/cb'] });
    expect(afterPut.effective.oidc).toEqual({ redirectUris: ['https://put.example/cb'] });
    expect(afterPut.tags).toEqual({});
    const detail = await conformant(M, 'GET', '/controller-settings/{id}', srv.base, {
      token: root,
      params: { id: ctl },
    });
    expect(detail.body.data.oidc).toEqual({ redirectUris: ['https://put.example/cb'] });

    // deleting a controller's own settings leaves it the global ones; global itself cannot be deleted
    const del = (id: string) =>
      conformant(M, 'DELETE', '/controller-settings/{id}/effective', srv.base, { token: root, params: { id } });
    expectError(await del('global'), 400, 'ENTITY_CAN_NOT_BE_DELETED');
    expect((await del(ctl)).status).toBe(200);
    expect((await effective(ctl)).effective.oidc).toEqual({ redirectUris: redirect });
    expectError(await del(ctl), 404, 'NOT_FOUND');
  });

  it('refuses what OpenZiti refuses, and bounds the lists', async () => {
    const ctl = (await call('GET', `${srv.mgmt}/controllers`, { token: root })).body.data[0].id as string;
    const create = (body: unknown) => conformant(M, 'POST', '/controller-settings', srv.base, { token: root, body });
    expectError(await create({ controllerId: 'global' }), 400, 'COULD_NOT_VALIDATE', 'controllerId');
    expectError(await create({ controllerId: 'any' }), 400, 'COULD_NOT_VALIDATE', 'controllerId');
    expectError(await create({ controllerId: 'no-such-controller' }), 400, 'COULD_NOT_VALIDATE', 'controllerId');
    expectError(await create({ oidc: {} }), 400, 'COULD_NOT_VALIDATE');
    const many = Array.from({ length: MAX_URIS + 1 }, (_, i) => `https://x.example/${i}`);
    expectError(await create({ controllerId: ctl, oidc: { redirectUris: many } }), 400, 'COULD_NOT_VALIDATE');
    expectError(await change('PATCH', 'global', { oidc: { redirectUris: 'not-a-list' } }), 400, 'COULD_NOT_VALIDATE');
    expectError(await change('PUT', 'no-such-controller', { oidc: {} }), 404, 'NOT_FOUND');
    const unknown = await conformant(M, 'GET', '/controller-settings/{id}/effective', srv.base, {
      token: root,
      params: { id: 'no-such-controller' },
    });
    expectError(unknown, 404, 'NOT_FOUND');
    const plain = await userWith(srv.base, root, 'settings-reader');
    const denied = await conformant(M, 'GET', '/controller-settings', srv.base, { token: plain.token });
    expectError(denied, 401, 'UNAUTHORIZED');
  });

  it('a store initialised without global settings reads defaults and gets them on its first write', async () => {
    const svc = srv.ctl.svc;
    await svc.write({ op: 'delete', entity: 'controller-settings', id: 'global', at: svc.nowIso(), system: true });
    expect((await effective('global')).effective).toEqual({ oidc: {} });
    expect((await change('PATCH', 'global', { oidc: { postLogoutUris: ['https://bye.example'] } })).status).toBe(200);
    expect(svc.get('controller-settings', 'global')).toMatchObject({ isSystem: true });
    expect((await effective('global')).effective.oidc).toEqual({ postLogoutUris: ['https://bye.example'] });
  });
});

describe('database: snapshot and data integrity', () => {
  let db: TestServer;
  let token: string;
  const clock = manualClock(Date.now());
  beforeAll(async () => {
    db = await startServer({ clock });
    token = await login(db.base);
  });
  afterAll(() => db.stop());

  const post = (path: string, t: string | undefined = token) => conformant(M, 'POST', path, db.base, { token: t });
  const results = async () => {
    const r = await conformant(M, 'GET', '/database/data-integrity-results', db.base, { token });
    expect(r.status, r.text).toBe(200);
    return r.body.data;
  };
  const settled = async () => {
    for (let i = 0; i < 200; i++) {
      const d = await results();
      if (!d.inProgress) return d;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error('the integrity check did not finish');
  };

  it('a snapshot is a file of the whole store that restores to the same rows; at most one a minute', async () => {
    const u = await userWith(db.base, token, 'in-the-snapshot');
    expect((await post('/database/snapshot')).status).toBe(200);
    const dir = join(db.dataDir, SNAPSHOT_DIR);
    const files = readdirSync(dir).filter((f) => f.endsWith('.keel-snapshot'));
    expect(files).toHaveLength(1);
    const restored = await Store.open(mkdtempSync(join(tmpdir(), 'keel-snap-')), buildSchema());
    try {
      await restored.restore(readFileSync(join(dir, files[0]!)));
      const live = db.ctl.svc.store;
      for (const name of ['identities', 'authenticators', 'api-sessions', 'auth-policies'] as const) {
        expect([...restored.collection(name).scan()], name).toEqual([...live.collection(name).scan()]);
      }
      expect(restored.get('identities', u.id)?.name).toBe('in-the-snapshot');
    } finally {
      await restored.close();
    }
    expectError(await post('/database/snapshot'), 429, 'RATE_LIMITED');
    // a minute later another; never more than MAX_SNAPSHOT_FILES kept
    for (let i = 0; i < MAX_SNAPSHOT_FILES + 2; i++) {
      clock.advance(SNAPSHOT_MIN_INTERVAL_MS);
      expect((await post('/database/snapshot')).status).toBe(200);
    }
    expect(readdirSync(dir).filter((f) => f.endsWith('.keel-snapshot'))).toHaveLength(MAX_SNAPSHOT_FILES);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('before any check, the results are empty; a check of a sound store finds nothing', async () => {
    const before = await results();
    expect(before).toMatchObject({ inProgress: false, results: [], tooManyErrors: false, error: '' });
    const r = await post('/database/check-data-integrity');
    expect(r.status, r.text).toBe(202);
    const done = await settled();
    expect(done).toMatchObject({ inProgress: false, fixingErrors: false, results: [], tooManyErrors: false });
    expect(Date.parse(done.endTime)).toBeGreaterThanOrEqual(Date.parse(done.startTime));
  });

  it('finds damaged indexes and dangling references; fix repairs the indexes and says what it could not', async () => {
    const store = db.ctl.svc.store;
    const u = await userWith(db.base, token, 'damaged');
    // a service policy whose derived index entry goes missing, an identity index entry pointing elsewhere, a row
    // naming an identity that does not exist (memory-only damage: what a bug in publish would leave)
    const policy = await call('POST', `${db.mgmt}/service-policies`, {
      token,
      body: { name: 'sp-damaged', type: 'Dial', semantic: 'AnyOf', identityRoles: [`@${u.id}`], serviceRoles: [] },
    });
    expect(policy.status, policy.text).toBe(201);
    const roleIndex = store.derived.get<RoleIndex>('service-policies.identityRoles');
    expect(roleIndex.targetsOf(policy.body.data.id).has(u.id)).toBe(true);
    (roleIndex.targetsOf(policy.body.data.id) as Set<string>).delete(u.id);
    const identities = store.collection('identities') as any;
    const byName: Map<string, string> = identities.uniques.find((u: any) => u.field === 'name').map;
    byName.set('ghost-name', u.id);
    const auth = store.collection('authenticators');
    const orphan = {
      ...[...auth.scan()][0]!,
      id: 'orphan-auth',
      identityId: 'no-such-identity',
      username: null,
      methodKey: null,
    };
    auth.put(orphan);

    expect((await post('/database/check-data-integrity')).status).toBe(202);
    const found = await settled();
    const text = found.results.map((f: { description: string }) => f.description);
    expect(text.some((d: string) => d.includes('service-policies.identityRoles') && d.includes(u.id))).toBe(true);
    expect(text.some((d: string) => d.includes('identities: unique index name') && d.includes('ghost-name'))).toBe(
      true,
    );
    expect(text).toContain(
      'authenticators orphan-auth: identityId names identities no-such-identity, which does not exist',
    );
    expect(found.results.every((f: { fixed: boolean }) => f.fixed === false)).toBe(true);

    expect((await post('/database/fix-data-integrity')).status).toBe(202);
    const fixed = await settled();
    expect(fixed.fixingErrors).toBe(true);
    const fixedText = (f: { description: string; fixed: boolean }) => `${f.fixed} ${f.description}`;
    const lines = fixed.results.map(fixedText);
    expect(lines.some((l: string) => l.startsWith('true service-policies.identityRoles'))).toBe(true);
    expect(lines.some((l: string) => l.startsWith('true identities: unique index name'))).toBe(true);
    expect(lines.some((l: string) => l.startsWith('false authenticators orphan-auth'))).toBe(true);
    expect(roleIndex.targetsOf(policy.body.data.id).has(u.id)).toBe(true);
    expect(byName.has('ghost-name')).toBe(false);

    auth.delete('orphan-auth');
    expect((await post('/database/check-data-integrity')).status).toBe(202);
    expect((await settled()).results).toEqual([]);
  });

  it('one check at a time; admins only', async () => {
    expect((await post('/database/check-data-integrity')).status).toBe(202);
    expectError(await post('/database/fix-data-integrity'), 429, 'RATE_LIMITED');
    await settled();
    const plain = await userWith(db.base, token, 'not-a-dba');
    for (const path of ['/database/snapshot', '/database/check-data-integrity', '/database/fix-data-integrity']) {
      expectError(await post(path, plain.token), 401, 'UNAUTHORIZED');
    }
    const r = await conformant(M, 'GET', '/database/data-integrity-results', db.base, { token: plain.token });
    expectError(r, 401, 'UNAUTHORIZED');
  });
});

describe('identity tracing', () => {
  const trace = (id: string, body: unknown, token = root) =>
    conformant(M, 'PUT', '/identities/{id}/trace', srv.base, { token, params: { id }, body });

  it('turns on for a duration, replaces, turns off; the setting is recorded and goes with the identity', async () => {
    const u = await userWith(srv.base, root, 'traced');
    const before = Date.now();
    const on = await trace(u.id, { enabled: true, duration: '10m', channels: ['select.path'] });
    expect(on.status, on.text).toBe(200);
    expect(on.body.data.enabled).toBe(true);
    expect(on.body.data.traceId).toMatch(/^[0-9a-f-]{36}$/);
    const until = Date.parse(on.body.data.until);
    expect(until - before).toBeGreaterThanOrEqual(10 * 60_000);
    expect(until - before).toBeLessThan(10 * 60_000 + 60_000);
    const svc = srv.ctl.svc;
    expect(svc.get('identity-traces', u.id)).toMatchObject({
      traceId: on.body.data.traceId,
      channels: ['select.path'],
    });

    const again = await trace(u.id, { enabled: true, duration: '1h30m', traceId: 'my-trace' });
    expect(again.body.data).toMatchObject({ enabled: true, traceId: 'my-trace' });
    expect(svc.get('identity-traces', u.id)).toMatchObject({ traceId: 'my-trace', channels: ['all'] });

    const off = await trace(u.id, { enabled: false });
    expect(off.status, off.text).toBe(200);
    expect(off.body.data).toEqual({ enabled: false });
    expect(svc.get('identity-traces', u.id)).toBeUndefined();
    expect((await trace(u.id, { enabled: false })).status).toBe(200);

    expect((await trace(u.id, { enabled: true, duration: '5m' })).status).toBe(200);
    expect((await call('DELETE', `${srv.mgmt}/identities/${u.id}`, { token: root })).status).toBe(200);
    expect(svc.get('identity-traces', u.id)).toBeUndefined();
  });

  it('refuses bad durations, unknown identities and non-admins', async () => {
    const u = await userWith(srv.base, root, 'trace-target');
    for (const duration of ['', 'ten minutes', '10', '0', '-5m', '25h', undefined]) {
      expectError(await trace(u.id, { enabled: true, duration }), 400, 'COULD_NOT_VALIDATE', 'duration');
    }
    expect((await trace(u.id, { enabled: true, duration: '24h' })).status).toBe(200);
    const many = Array.from({ length: MAX_TRACE_CHANNELS + 1 }, (_, i) => `c${i}`);
    expectError(await trace(u.id, { enabled: true, duration: '1m', channels: many }), 400, 'COULD_NOT_VALIDATE');
    expectError(await trace('no-such-identity', { enabled: true, duration: '1m' }), 404, 'NOT_FOUND');
    expectError(await trace(u.id, { enabled: 'yes' }), 400, 'COULD_NOT_VALIDATE');
    expectError(await trace(u.id, { enabled: true, duration: '1m' }, u.token), 401, 'UNAUTHORIZED');
  });
});
