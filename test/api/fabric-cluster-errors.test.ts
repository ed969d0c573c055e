/**
 * How the fabric cluster operations answer a failed membership change (src/ops/cluster.ts, membershipError), as
 * OpenZiti's cluster router does: an add's failure a 400 naming `address`, a removal's naming `id`, a transfer's
 * 500 TRANSFER_LEADERSHIP_ERROR; no leader 503 and a full queue 429, both with Retry-After; Keel's own failures 500.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RaftError } from '../../raft/index.js';
import { fakeClusterView, fakeMember } from '../support/cluster-view.js';
import { call, login, startServer, type TestServer } from '../support/server.js';

const F = '/fabric/v1/cluster';

describe('fabric cluster operations: a failed membership change', () => {
  let srv: TestServer;
  let token: string;
  let failure: unknown = null;
  beforeAll(async () => {
    srv = await startServer();
    token = await login(srv.base);
    const view = fakeClusterView('n2', () => [fakeMember('n1', true, []), fakeMember('n2', true, [])]);
    const fail = async () => {
      if (failure !== null) throw failure;
    };
    view.addMemberAt = async () => {
      await fail();
      return 'n3';
    };
    view.removeMember = fail;
    view.transferLeadership = fail;
    srv.ctl.svc.cluster = view;
  });
  afterAll(() => srv?.stop());

  const post = (op: string, body: unknown) => call('POST', `${srv.base}${F}/${op}`, { token, body });
  const add = () => post('add-member', { address: 'tls:n3.example:6262', isVoter: true });
  const remove = () => post('remove-member', { id: 'n1' });
  const transfer = () => post('transfer-leadership', { newLeaderId: 'n1' });

  it('a refusal: 400 on the field the request named, with the reason, as OpenZiti', async () => {
    failure = new RaftError('conf-change-refused', 'another membership change is still pending');
    const a = await add();
    expect(a.status).toBe(400);
    expect(a.body.error.code).toBe('COULD_NOT_VALIDATE');
    expect(a.body.error.cause).toMatchObject({ field: 'address', value: 'n3.example:6262' });
    expect(a.body.error.cause.reason).toMatch(
      /^unable to add cluster member for supplied address: \[.*still pending\]$/,
    );
    failure = new Error('status of n3.example:6262 not answered within 5000 ms');
    expect((await add()).body.error.cause).toMatchObject({ field: 'address' });
    failure = new RaftError('conf-change-refused', 'removed all voters');
    const r = await remove();
    expect(r.status).toBe(400);
    expect(r.body.error.cause).toMatchObject({ field: 'id', value: 'n1' });
    expect(r.body.error.cause.reason).toMatch(/^unable to remove cluster member node for supplied node id: \[/);
  });

  it('a transfer that failed: 500 TRANSFER_LEADERSHIP_ERROR, with Retry-After when it ran out of time', async () => {
    failure = new RaftError('timeout', 'leadership did not move to n1 within 3000 ms');
    const late = await transfer();
    expect(late.status).toBe(500);
    expect(late.body.error.code).toBe('TRANSFER_LEADERSHIP_ERROR');
    expect(late.body.error.cause.message).toMatch(/did not move to n1/);
    expect(late.headers.get('retry-after')).toBe('2');
    failure = new RaftError('conf-change-refused', 'n1 is a learner');
    const refused = await transfer();
    expect([refused.status, refused.body.error.code]).toEqual([500, 'TRANSFER_LEADERSHIP_ERROR']);
    expect(refused.headers.get('retry-after')).toBeNull();
  });

  it('no leader: 503 CLUSTER_NO_LEADER; a full queue: 429; both with Retry-After, for every operation', async () => {
    for (const [code, status, error] of [
      ['not-leader', 503, 'CLUSTER_NO_LEADER'],
      ['leadership-lost', 503, 'CLUSTER_NO_LEADER'],
      ['too-many-pending', 429, 'SERVER_TOO_MANY_REQUESTS'],
    ] as const) {
      failure = new RaftError(code, 'x');
      for (const res of [await add(), await remove(), await transfer()]) {
        expect([res.status, res.body.error.code], code).toEqual([status, error]);
        expect(res.headers.get('retry-after'), code).toBe('2');
      }
    }
  });

  it('a failure of Keel itself is not the request’s: 500, never a 400 with its message', async () => {
    for (const err of [new TypeError('x is undefined'), new RaftError('fatal', 'the log failed')]) {
      failure = err;
      for (const res of [await add(), await remove(), await transfer()]) {
        expect(res.status, String(err)).toBe(500);
        expect(res.text, String(err)).not.toContain('COULD_NOT_VALIDATE');
      }
    }
  });

  it('add-member takes a peer address only, [tls:]HOST:PORT: anything else is a 400 on address, nothing added', async () => {
    failure = null;
    let asked = 0;
    const view = srv.ctl.svc.cluster!;
    const before = view.addMemberAt;
    view.addMemberAt = async (...args) => {
      asked++;
      return before(...args);
    };
    try {
      for (const address of [
        'not a url',
        'https://x:1',
        'tls://x:1/../evil?',
        'ctl4:6262/peer-api?',
        'ctl4',
        'ctl4:0',
      ]) {
        const res = await post('add-member', { address });
        expect([res.status, res.body.error.cause?.field], address).toEqual([400, 'address']);
      }
      expect(asked).toBe(0);
      for (const address of ['TLS:ctl4.example.com:6262', 'ctl4:6262', '10.0.0.4:6262', 'tls:[::1]:6262']) {
        expect((await post('add-member', { address })).status, address).toBe(200);
      }
      expect(asked).toBe(4);
    } finally {
      view.addMemberAt = before;
    }
  });
});
