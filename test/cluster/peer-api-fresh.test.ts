/**
 * A membership change through the peer API is judged on the member's state as of the call: it asks for a read
 * index first (src/cluster/peer-api.ts, memberChange). A member that lags behind (cut off while a removal went by)
 * would otherwise still take the removed caller for a member and pass its change on to the leader.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type PeerHandlers, peerClient } from '../../src/cluster/peer-api.js';
import { servePeerApi } from '../support/peer-api-server.js';

const cleanup: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/**
 * A member whose applied state lags: it takes `caller` for a member until a read index brings it up to date, which
 * applies the caller's removal (at index 40). Records the changes it was asked to make.
 */
async function laggingMember(caller: string) {
  let caughtUp = false;
  const made: string[] = [];
  const handlers = {
    isMember: (id: string) => id !== caller || !caughtUp,
    removedAt: (id: string) => (id === caller && caughtUp ? 40 : null),
    readIndex: async () => {
      caughtUp = true;
      return 40;
    },
    addMember: async (id: string) => void made.push(`add ${id}`),
    removeMember: async (id: string) => void made.push(`remove ${id}`),
    transferLeadership: async (to: string) => void made.push(`transfer ${to}`),
  } as unknown as PeerHandlers;
  return { address: await servePeerApi(handlers, caller, cleanup), made };
}

describe('a membership change through a member that lags behind', () => {
  for (const [name, call] of [
    ['removeMember', (c: ReturnType<typeof peerClient>) => c.api.removeMember.mutate({ id: 'n1' })],
    ['transferLeadership', (c: ReturnType<typeof peerClient>) => c.api.transferLeadership.mutate({ to: 'n1' })],
    [
      'addMember (another node)',
      (c: ReturnType<typeof peerClient>) => c.api.addMember.mutate({ id: 'n7', address: '127.0.0.1:7', voter: true }),
    ],
  ] as const) {
    it(`${name} by a caller removed meanwhile: refused once the member has caught up, nothing made`, async () => {
      const m = await laggingMember('n3');
      const c = peerClient(m.address);
      cleanup.push(() => c.close());
      const err = (await call(c).then(
        () => null,
        (e: unknown) => e,
      )) as { data?: Record<string, unknown> } | null;
      expect(err?.data).toMatchObject({ code: 'FORBIDDEN', removedAt: 40 });
      expect(err?.data?.stack).toBeUndefined(); // never a stack trace in an answer, whatever NODE_ENV says
      expect(m.made).toEqual([]);
    });
  }
});
