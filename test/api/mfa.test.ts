/**
 * MFA (TOTP) step by step on the controller's injectable clock: enrollment, QR code, verification, partial
 * sessions, recovery codes (single use), TOTP tokens, disable, admin removal, policies that require TOTP; every
 * response through the conformance helper.
 */
import { generate } from 'otplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_AUTH_POLICY } from '../../src/model/auth-policy.js';
import { MAX_MFA_FAILURES } from '../../src/model/mfa.js';
import { interceptNextWrite } from '../support/api.js';
import { manualClock } from '../support/clock.js';
import { conformant, ownOperations } from '../support/conformance.js';
import { readQrPng } from '../support/qr-read.js';
import { call, login, type Res, startServer, type TestServer } from '../support/server.js';

const clock = manualClock();
const logs: string[] = [];
let srv: TestServer;
let admin: string;
const C = 'client' as const;
const M = 'management' as const;
const TIMEOUT_MS = 30 * 60_000;

/** The controller on the manual clock; on `dataDir` when given (a restart). */
const start = (dataDir?: string) =>
  startServer({
    clock,
    log: (level, msg, extra) => logs.push(JSON.stringify({ level, msg, extra })),
    ...(dataDir ? { dataDir } : {}),
  });

beforeAll(async () => {
  srv = await start();
  admin = await login(srv.base);
});
afterAll(async () => {
  const { served, missing } = ownOperations('test/api/mfa.test.ts', srv.ctl.ops);
  await srv.stop();
  expect(served.length).toBe(19);
  expect(missing).toEqual([]);
});

function expectError(res: Res, status: number, code: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.body.error.code).toBe(code);
}

async function createUser(name: string, authPolicyId = 'default'): Promise<string> {
  const r = await call('POST', `${srv.mgmt}/identities`, {
    token: admin,
    body: { name, type: 'User', isAdmin: false, authPolicyId },
  });
  expect(r.status, r.text).toBe(201);
  const a = await call('POST', `${srv.mgmt}/authenticators`, {
    token: admin,
    body: { method: 'updb', identityId: r.body.data.id, username: name, password: `${name}-pw` },
  });
  expect(a.status, a.text).toBe(201);
  return r.body.data.id;
}

async function session(name: string): Promise<{ token: string; body: any }> {
  const r = await conformant(C, 'POST', '/authenticate', srv.base, {
    query: 'method=password',
    body: { username: name, password: `${name}-pw` },
  });
  expect(r.status, r.text).toBe(200);
  return { token: r.headers.get('zt-session')!, body: r.body.data };
}

const totp = (secret: string, atMs = clock.now()) => generate({ secret, epoch: Math.floor(atMs / 1000) });

/** Enrolls and verifies MFA for a full session; returns the secret and the recovery codes. */
async function enroll(token: string, spec: 'client' | 'management' = C): Promise<{ secret: string; codes: string[] }> {
  const e = await conformant(spec, 'POST', '/current-identity/mfa', srv.base, { token });
  expect(e.status, e.text).toBe(201);
  const d = await conformant(spec, 'GET', '/current-identity/mfa', srv.base, { token });
  const secret = new URL(d.body.data.provisioningUrl).searchParams.get('secret')!;
  const v = await conformant(spec, 'POST', '/current-identity/mfa/verify', srv.base, {
    token,
    body: { code: await totp(secret) },
  });
  expect(v.status, v.text).toBe(200);
  clock.advance(30_000); // the code is spent: a login needs the next one
  return { secret, codes: d.body.data.recoveryCodes };
}

describe('MFA enrollment', () => {
  it('enroll, detail with provisioning URL and recovery codes, QR code, wrong codes, verify', async () => {
    const id = await createUser('mfa-alice');
    const { token } = await session('mfa-alice');
    expectError(await conformant(C, 'GET', '/current-identity/mfa', srv.base, { token }), 404, 'NOT_FOUND');
    expectError(await conformant(C, 'GET', '/current-identity/mfa/qr-code', srv.base, { token }), 404, 'NOT_FOUND');
    const verifyFirst = await conformant(C, 'POST', '/current-identity/mfa/verify', srv.base, {
      token,
      body: { code: '123456' },
    });
    expectError(verifyFirst, 404, 'MFA_ENROLLMENT_NOT_STARTED');

    const e = await conformant(C, 'POST', '/current-identity/mfa', srv.base, { token });
    expect(e.status, e.text).toBe(201);
    expect(e.body.data._links.self.href).toBe('./current-identity/mfa');
    expectError(await conformant(C, 'POST', '/current-identity/mfa', srv.base, { token }), 409, 'MFA_EXISTS');

    const d = await conformant(C, 'GET', '/current-identity/mfa', srv.base, { token });
    expect(d.body.data.isVerified).toBe(false);
    const url = new URL(d.body.data.provisioningUrl);
    expect(url.protocol).toBe('otpauth:');
    expect(decodeURIComponent(url.pathname)).toContain('mfa-alice');
    const secret = url.searchParams.get('secret')!;
    expect(secret).toMatch(/^[A-Z2-7]{26,}$/);
    const codes: string[] = d.body.data.recoveryCodes;
    expect(codes.length).toBe(20);
    expect(new Set(codes).size).toBe(20);

    const qr = await call('GET', `${srv.client}/current-identity/mfa/qr-code`, { token });
    expect(qr.status).toBe(200);
    expect(qr.headers.get('content-type')).toBe('image/png');
    const png = Buffer.from(
      await (
        await fetch(`${srv.client}/current-identity/mfa/qr-code`, { headers: { 'zt-session': token } })
      ).arrayBuffer(),
    );
    expect(readQrPng(png)).toBe(d.body.data.provisioningUrl);

    // wrong, malformed and stale codes
    for (const code of ['000000', '12', 'abcdef', await totp(secret, clock.now() - 5 * 60_000)]) {
      const r = await conformant(C, 'POST', '/current-identity/mfa/verify', srv.base, { token, body: { code } });
      if (code === '000000' && r.status === 200) throw new Error('000000 happened to be the code: rerun');
      expectError(r, 400, 'MFA_INVALID_TOKEN');
    }
    const tooLong = await conformant(C, 'POST', '/current-identity/mfa/verify', srv.base, {
      token,
      body: { code: '1'.repeat(65) },
    });
    expectError(tooLong, 400, 'COULD_NOT_VALIDATE');
    expect((await call('GET', `${srv.mgmt}/identities/${id}`, { token: admin })).body.data.isMfaEnabled).toBe(false);

    const v = await conformant(C, 'POST', '/current-identity/mfa/verify', srv.base, {
      token,
      body: { code: await totp(secret) },
    });
    expect(v.status, v.text).toBe(200);
    const again = await conformant(C, 'POST', '/current-identity/mfa/verify', srv.base, {
      token,
      body: { code: await totp(secret) },
    });
    expectError(again, 409, 'MFA_EXISTS');
    // verified: no secret, no codes, no QR code any more; the session that verified is complete
    const after = await conformant(C, 'GET', '/current-identity/mfa', srv.base, { token });
    expect(after.body.data).toMatchObject({ isVerified: true });
    expect(after.body.data.provisioningUrl).toBeUndefined();
    expect(after.body.data.recoveryCodes).toBeUndefined();
    expectError(await conformant(C, 'GET', '/current-identity/mfa/qr-code', srv.base, { token }), 404, 'NOT_FOUND');
    const cur = await call('GET', `${srv.client}/current-api-session`, { token });
    expect(cur.body.data).toMatchObject({ isMfaRequired: true, isMfaComplete: true });
    expect((await call('GET', `${srv.client}/current-identity`, { token })).body.data.isMfaEnabled).toBe(true);
    // the secret is nowhere but where OpenZiti shows it
    const shown = await call('GET', `${srv.mgmt}/identities/${id}`, { token: admin });
    expect(shown.text).not.toContain(secret);
    expect(logs.join('\n')).not.toContain(secret);
  });
});

describe('MFA login', () => {
  let secret: string;
  let codes: string[];
  let bobId: string;
  beforeAll(async () => {
    bobId = await createUser('mfa-bob');
    ({ secret, codes } = await enroll((await session('mfa-bob')).token));
  });

  it('a new session is partial until POST /authenticate/mfa; partial sessions are refused elsewhere', async () => {
    const { token, body } = await session('mfa-bob');
    expect(body).toMatchObject({ isMfaRequired: true, isMfaComplete: false });
    expect(body.authQueries).toEqual([expect.objectContaining({ typeId: 'MFA', provider: 'ziti' })]);
    expectError(await call('GET', `${srv.client}/current-identity`, { token }), 401, 'UNAUTHORIZED');
    const tt = await conformant(C, 'POST', '/current-api-session/totp-token', srv.base, {
      token,
      body: { code: await totp(secret) },
    });
    expectError(tt, 401, 'UNAUTHORIZED');
    expect((await call('GET', `${srv.client}/current-api-session`, { token })).status).toBe(200);
    const wrong = await conformant(C, 'POST', '/authenticate/mfa', srv.base, { token, body: { code: 'nope' } });
    expectError(wrong, 400, 'MFA_INVALID_TOKEN');
    const r = await conformant(C, 'POST', '/authenticate/mfa', srv.base, { token, body: { code: await totp(secret) } });
    expect(r.status, r.text).toBe(200);
    const cur = await call('GET', `${srv.client}/current-api-session`, { token });
    expect(cur.body.data).toMatchObject({ isMfaRequired: true, isMfaComplete: true, authQueries: [] });
    expect((await call('GET', `${srv.client}/current-identity`, { token })).status).toBe(200);
  });

  it('a TOTP is accepted once (RFC 6238 §5.2), even by sessions racing with it', async () => {
    clock.advance(30_000);
    const code = await totp(secret);
    const [a, b, c] = [await session('mfa-bob'), await session('mfa-bob'), await session('mfa-bob')];
    const raced = await Promise.all(
      [a, b].map((s) => call('POST', `${srv.client}/authenticate/mfa`, { token: s.token, body: { code } })),
    );
    expect(raced.map((r) => r.status).sort()).toEqual([200, 400]);
    const replay = await call('POST', `${srv.client}/authenticate/mfa`, { token: c.token, body: { code } });
    expectError(replay, 400, 'MFA_INVALID_TOKEN');
    expect(replay.body.error.cause).toBeUndefined();
    clock.advance(30_000);
    const next = await call('POST', `${srv.client}/authenticate/mfa`, {
      token: c.token,
      body: { code: await totp(secret) },
    });
    expect(next.status, next.text).toBe(200);
  });

  it('each recovery code works once; regeneration replaces them', async () => {
    const first = await session('mfa-bob');
    const r1 = await conformant(C, 'POST', '/authenticate/mfa', srv.base, {
      token: first.token,
      body: { code: codes[0]!.toLowerCase() },
    });
    expect(r1.status, r1.text).toBe(200);
    const second = await session('mfa-bob');
    const r2 = await conformant(C, 'POST', '/authenticate/mfa', srv.base, {
      token: second.token,
      body: { code: codes[0]! },
    });
    expectError(r2, 400, 'MFA_INVALID_TOKEN');
    // two racing uses of one code: exactly one wins
    const a = await session('mfa-bob');
    const b = await session('mfa-bob');
    const raced = await Promise.all(
      [a, b].map((s) => call('POST', `${srv.client}/authenticate/mfa`, { token: s.token, body: { code: codes[1] } })),
    );
    expect(raced.map((r) => r.status).sort()).toEqual([200, 400]);

    // viewing needs a valid TOTP (header or body); the used ones are gone
    const noCode = await conformant(C, 'GET', '/current-identity/mfa/recovery-codes', srv.base, { token: first.token });
    expectError(noCode, 400, 'MFA_INVALID_TOKEN');
    const view = await conformant(C, 'GET', '/current-identity/mfa/recovery-codes', srv.base, {
      token: first.token,
      headers: { 'mfa-validation-code': await totp(secret) },
    });
    expect(view.status, view.text).toBe(200);
    expect([...view.body.data.recoveryCodes].sort()).toEqual(codes.slice(2).sort());
    const badRegen = await conformant(C, 'POST', '/current-identity/mfa/recovery-codes', srv.base, {
      token: first.token,
      body: { code: '111111' },
    });
    expectError(badRegen, 400, 'MFA_INVALID_TOKEN');
    const regen = await conformant(C, 'POST', '/current-identity/mfa/recovery-codes', srv.base, {
      token: first.token,
      body: { code: await totp(secret) },
    });
    expect(regen.status).toBe(200);
    const fresh = await call('GET', `${srv.client}/current-identity/mfa/recovery-codes`, {
      token: first.token,
      headers: { 'mfa-validation-code': await totp(secret) },
    });
    expect(fresh.body.data.recoveryCodes.length).toBe(20);
    expect(fresh.body.data.recoveryCodes.filter((c: string) => codes.includes(c))).toEqual([]);
    const old = await session('mfa-bob');
    const r3 = await call('POST', `${srv.client}/authenticate/mfa`, { token: old.token, body: { code: codes[5] } });
    expectError(r3, 400, 'MFA_INVALID_TOKEN');
    codes = fresh.body.data.recoveryCodes;
  });

  it(`a partial session that sends ${MAX_MFA_FAILURES} wrong codes is ended`, async () => {
    const { token } = await session('mfa-bob');
    for (let i = 0; i < MAX_MFA_FAILURES; i++) {
      expectError(
        await call('POST', `${srv.client}/authenticate/mfa`, { token, body: { code: '99999x' } }),
        400,
        'MFA_INVALID_TOKEN',
      );
    }
    const after = await conformant(C, 'POST', '/authenticate/mfa', srv.base, {
      token,
      body: { code: await totp(secret) },
    });
    expectError(after, 401, 'UNAUTHORIZED');
  });

  it('wrong codes are counted on the session row (replicated): racing ones all count, a restart keeps the count', async () => {
    const { token, body } = await session('mfa-bob');
    const wrong = () => call('POST', `${srv.client}/authenticate/mfa`, { token, body: { code: '99999x' } });
    const raced = await Promise.all([wrong(), wrong()]);
    for (const r of raced) expectError(r, 400, 'MFA_INVALID_TOKEN');
    expect(srv.ctl.svc.get('api-sessions', body.id)?.mfaFailures).toBe(2);
    // the count is state every node applies, not a node's memory: a restarted node goes on from it
    const dataDir = srv.dataDir;
    await srv.stop({ keepData: true });
    srv = await start(dataDir);
    admin = await login(srv.base);
    for (let i = 2; i < MAX_MFA_FAILURES; i++) expectError(await wrong(), 400, 'MFA_INVALID_TOKEN');
    expect(srv.ctl.svc.get('api-sessions', body.id)).toBeUndefined();
    const after = await call('POST', `${srv.client}/authenticate/mfa`, { token, body: { code: await totp(secret) } });
    expectError(after, 401, 'UNAUTHORIZED');
  });

  /** Wrong codes to the checks that spend nothing (`totp-token` last: it is for complete sessions only). */
  const spendNothingGuesses = (token: string) => {
    const headers = { 'mfa-validation-code': '99999x' };
    return [
      () => call('GET', `${srv.client}/current-identity/mfa/recovery-codes`, { token, headers }),
      () => call('POST', `${srv.client}/current-identity/mfa/recovery-codes`, { token, body: { code: '99999x' } }),
      () => call('DELETE', `${srv.client}/current-identity/mfa`, { token, headers }),
      () => call('POST', `${srv.client}/current-api-session/totp-token`, { token, body: { code: '99999x' } }),
    ];
  };

  /** MAX_MFA_FAILURES of the guesses, round robin: each 400; then the session is gone and a right code gets 401. */
  async function expectEndedBy(guesses: (() => Promise<Res>)[], token: string, sessionId: string): Promise<void> {
    for (let i = 0; i < MAX_MFA_FAILURES; i++)
      expectError(await guesses[i % guesses.length]!(), 400, 'MFA_INVALID_TOKEN');
    expect(srv.ctl.svc.get('api-sessions', sessionId)).toBeUndefined();
    const after = await call('GET', `${srv.client}/current-identity/mfa/recovery-codes`, {
      token,
      headers: { 'mfa-validation-code': await totp(secret) },
    });
    expectError(after, 401, 'UNAUTHORIZED');
  }

  it('a partial session cannot reach the checks that spend nothing (OpenZiti: a full session): a code spent at login neither reveals the recovery codes nor removes MFA', async () => {
    // the identity's owner logs in with a TOTP; someone who knows the password saw that code
    clock.advance(30_000);
    const seen = await totp(secret);
    const owner = await session('mfa-bob');
    const done = await call('POST', `${srv.client}/authenticate/mfa`, { token: owner.token, body: { code: seen } });
    expect(done.status, done.text).toBe(200);
    const { token, body } = await session('mfa-bob');
    const headers = { 'mfa-validation-code': seen };
    for (const api of [srv.client, srv.mgmt]) {
      const attempts = [
        await call('GET', `${api}/current-identity/mfa/recovery-codes`, { token, headers }),
        await call('POST', `${api}/current-identity/mfa/recovery-codes`, { token, body: { code: seen } }),
        await call('DELETE', `${api}/current-identity/mfa`, { token, headers }),
      ];
      for (const r of attempts) expectError(r, 401, 'UNAUTHORIZED');
    }
    // nothing changed: the enrollment is there, the session still partial and not ended (no code was checked)
    expect((await call('GET', `${srv.mgmt}/identities/${bobId}`, { token: admin })).body.data.isMfaEnabled).toBe(true);
    expect(srv.ctl.svc.get('api-sessions', body.id)).toMatchObject({ isMfaComplete: false });
    expect(srv.ctl.svc.get('api-sessions', body.id)?.mfaFailures).toBeUndefined();
    // and the spent code does not complete it either
    const replay = await call('POST', `${srv.client}/authenticate/mfa`, { token, body: { code: seen } });
    expectError(replay, 400, 'MFA_INVALID_TOKEN');
  });

  it('a complete session is not counted (no write per wrong code)', async () => {
    const { token, body } = await session('mfa-bob');
    clock.advance(30_000);
    const done = await call('POST', `${srv.client}/authenticate/mfa`, { token, body: { code: await totp(secret) } });
    expect(done.status, done.text).toBe(200);
    const row = srv.ctl.svc.get('api-sessions', body.id);
    for (let i = 0; i < MAX_MFA_FAILURES; i++) {
      const r = await call('POST', `${srv.client}/authenticate/mfa`, { token, body: { code: '99999x' } });
      expectError(r, 400, 'MFA_INVALID_TOKEN');
    }
    // the same row object: nothing was written (an update makes a new row)
    expect(srv.ctl.svc.get('api-sessions', body.id)).toBe(row);
  });

  it("a complete session's wrong codes to the checks that reveal or remove the second factor count: ended at the limit", async () => {
    const { token, body } = await session('mfa-bob');
    clock.advance(30_000);
    const done = await call('POST', `${srv.client}/authenticate/mfa`, { token, body: { code: await totp(secret) } });
    expect(done.status, done.text).toBe(200);
    // a flood of guesses on a session that passed MFA (or a stolen token of it) cannot reach the recovery codes
    await expectEndedBy(spendNothingGuesses(token), token, body.id);
    // the enrollment is kept: a new login asks for MFA again
    expect((await session('mfa-bob')).body.authQueries).toHaveLength(1);
  });

  it('a partial session expires like any other; codes follow the clock', async () => {
    const { token } = await session('mfa-bob');
    const stale = await totp(secret);
    clock.advance(TIMEOUT_MS + 1000);
    const r = await call('POST', `${srv.client}/authenticate/mfa`, { token, body: { code: await totp(secret) } });
    expectError(r, 401, 'UNAUTHORIZED');
    admin = await login(srv.base);
    const next = await session('mfa-bob');
    const old = await call('POST', `${srv.client}/authenticate/mfa`, { token: next.token, body: { code: stale } });
    expectError(old, 400, 'MFA_INVALID_TOKEN');
    // a code of the previous 30 s step is still accepted (phone clock skew)
    const prev = await call('POST', `${srv.client}/authenticate/mfa`, {
      token: next.token,
      body: { code: await totp(secret, clock.now() - 30_000) },
    });
    expect(prev.status, prev.text).toBe(200);
  });

  it('TOTP tokens for a completed session', async () => {
    const { token } = await session('mfa-bob');
    await call('POST', `${srv.client}/authenticate/mfa`, { token, body: { code: await totp(secret) } });
    for (const spec of [C, M]) {
      const r = await conformant(spec, 'POST', '/current-api-session/totp-token', srv.base, {
        token,
        body: { code: await totp(secret) },
      });
      expect(r.status, r.text).toBe(200);
      expect(r.body.data.token).toMatch(/^[0-9a-f-]{36}$/);
      expect(r.body.data.issuedAt).toBe(new Date(clock.now()).toISOString());
      const bad = await conformant(spec, 'POST', '/current-api-session/totp-token', srv.base, {
        token,
        body: { code: '000001' },
      });
      expectError(bad, 400, 'MFA_INVALID_TOKEN');
    }
  });
});

describe('MFA removal and policies', () => {
  it('DELETE /current-identity/mfa needs a valid code once verified (header or recovery code)', async () => {
    const id = await createUser('mfa-carol');
    const { token } = await session('mfa-carol');
    // an unverified enrollment is removed without a code
    await conformant(M, 'POST', '/current-identity/mfa', srv.base, { token });
    expect((await conformant(C, 'DELETE', '/current-identity/mfa', srv.base, { token })).status).toBe(200);
    expectError(await conformant(M, 'DELETE', '/current-identity/mfa', srv.base, { token }), 404, 'NOT_FOUND');
    const { secret, codes } = await enroll(token, M);
    const noCode = await conformant(M, 'DELETE', '/current-identity/mfa', srv.base, { token });
    expectError(noCode, 400, 'MFA_INVALID_TOKEN');
    const wrong = await conformant(M, 'DELETE', '/current-identity/mfa', srv.base, {
      token,
      headers: { 'mfa-validation-code': '123123' },
    });
    expectError(wrong, 400, 'MFA_INVALID_TOKEN');
    const del = await conformant(M, 'DELETE', '/current-identity/mfa', srv.base, {
      token,
      headers: { 'mfa-validation-code': await totp(secret) },
    });
    expect(del.status, del.text).toBe(200);
    expect((await call('GET', `${srv.mgmt}/identities/${id}`, { token: admin })).body.data.isMfaEnabled).toBe(false);
    expect((await session('mfa-carol')).body.isMfaRequired).toBe(false);
    // with a recovery code
    const again = await enroll(token, M);
    const byRecovery = await call('DELETE', `${srv.mgmt}/current-identity/mfa`, {
      token,
      headers: { 'mfa-validation-code': again.codes[3]! },
    });
    expect(byRecovery.status, byRecovery.text).toBe(200);
    expect(codes).not.toContain(again.codes[3]);
  });

  it('two racing enrollments: one 201, one 409 MFA_EXISTS', async () => {
    await createUser('mfa-racer');
    const { token } = await session('mfa-racer');
    const both = await Promise.all(
      [1, 2].map(() => conformant(C, 'POST', '/current-identity/mfa', srv.base, { token })),
    );
    expect(both.map((r) => r.status).sort()).toEqual([201, 409]);
    expect(both.find((r) => r.status === 409)!.body.error.code).toBe('MFA_EXISTS');
  });

  it('two verifications racing with one code: one 200, one 409 MFA_EXISTS; the code completes one session', async () => {
    await createUser('mfa-verifier');
    const [s1, s2] = [await session('mfa-verifier'), await session('mfa-verifier')];
    expect((await call('POST', `${srv.client}/current-identity/mfa`, { token: s1.token })).status).toBe(201);
    const d = await call('GET', `${srv.client}/current-identity/mfa`, { token: s1.token });
    const code = await totp(new URL(d.body.data.provisioningUrl).searchParams.get('secret')!);
    // the second verification passes its checks and is applied first: the first one's checks are stale by then
    const meanwhile = interceptNextWrite(srv.ctl.svc);
    let second: Res | undefined;
    meanwhile(async () => {
      second = await call('POST', `${srv.client}/current-identity/mfa/verify`, { token: s2.token, body: { code } });
    });
    const first = await call('POST', `${srv.client}/current-identity/mfa/verify`, { token: s1.token, body: { code } });
    expect(second?.status, second?.text).toBe(200);
    expectError(first, 409, 'MFA_EXISTS');
    expect(first.body.error.cause).toBeUndefined(); // as the handler's own check answers
    const complete = async (t: string) =>
      (await call('GET', `${srv.client}/current-api-session`, { token: t })).body.data.isMfaComplete;
    expect([await complete(s1.token), await complete(s2.token)]).toEqual([false, true]);
  });

  it('an admin removes an identity MFA (DELETE /identities/{id}/mfa)', async () => {
    const id = await createUser('mfa-dave');
    const { token } = await session('mfa-dave');
    await enroll(token, M);
    expect((await session('mfa-dave')).body.isMfaRequired).toBe(true);
    const userDenied = await conformant(M, 'DELETE', '/identities/{id}/mfa', srv.base, { token, params: { id } });
    expectError(userDenied, 401, 'UNAUTHORIZED');
    const r = await conformant(M, 'DELETE', '/identities/{id}/mfa', srv.base, { token: admin, params: { id } });
    expect(r.status, r.text).toBe(200);
    expect((await session('mfa-dave')).body.isMfaRequired).toBe(false);
    const none = await conformant(M, 'DELETE', '/identities/{id}/mfa', srv.base, { token: admin, params: { id } });
    expectError(none, 404, 'NOT_FOUND');
    const unknown = await conformant(M, 'DELETE', '/identities/{id}/mfa', srv.base, {
      token: admin,
      params: { id: 'nope' },
    });
    expectError(unknown, 404, 'NOT_FOUND');
    // the login-time operations need an enrollment
    const s = await session('mfa-dave');
    expectError(
      await conformant(M, 'POST', '/authenticate/mfa', srv.base, { token: s.token, body: { code: '123456' } }),
      409,
      'MFA_NOT_ENROLLED',
    );
    expectError(
      await conformant(M, 'POST', '/current-api-session/totp-token', srv.base, {
        token: s.token,
        body: { code: '123456' },
      }),
      409,
      'MFA_NOT_ENROLLED',
    );
  });

  it('a policy with secondary.requireTotp makes sessions partial until the identity enrolls and verifies', async () => {
    const body = structuredClone(DEFAULT_AUTH_POLICY);
    body.name = 'totp-required';
    body.secondary.requireTotp = true;
    const p = await call('POST', `${srv.mgmt}/auth-policies`, { token: admin, body });
    expect(p.status, p.text).toBe(201);
    await createUser('mfa-erin', p.body.data.id);
    const { token, body: s } = await session('mfa-erin');
    expect(s).toMatchObject({ isMfaRequired: true, isMfaComplete: false });
    expectError(await call('GET', `${srv.client}/current-identity`, { token }), 401, 'UNAUTHORIZED');
    const e = await conformant(M, 'POST', '/current-identity/mfa', srv.base, { token });
    expect(e.status, e.text).toBe(201);
    const d = await conformant(M, 'GET', '/current-identity/mfa', srv.base, { token });
    const qr = await conformant(M, 'GET', '/current-identity/mfa/qr-code', srv.base, { token: undefined });
    expectError(qr, 401, 'UNAUTHORIZED');
    const secret = new URL(d.body.data.provisioningUrl).searchParams.get('secret')!;
    const v = await conformant(M, 'POST', '/current-identity/mfa/verify', srv.base, {
      token,
      body: { code: await totp(secret) },
    });
    expect(v.status, v.text).toBe(200);
    expect((await call('GET', `${srv.client}/current-identity`, { token })).status).toBe(200);
    const rc = await conformant(M, 'GET', '/current-identity/mfa/recovery-codes', srv.base, {
      token,
      headers: { 'mfa-validation-code': await totp(secret) },
    });
    expect(rc.status, rc.text).toBe(200);
    const regen = await conformant(M, 'POST', '/current-identity/mfa/recovery-codes', srv.base, {
      token,
      body: { code: await totp(secret) },
    });
    expect(regen.status).toBe(200);
    expect(logs.join('\n')).not.toContain(secret);
  });
});
