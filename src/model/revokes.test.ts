import { describe, expect, it } from 'vitest';
import { revokesAccess } from './revokes.js';
import type { Command } from './rows.js';

const at = '2026-01-01T00:00:00.000Z';

describe('revokesAccess', () => {
  it('names the writes that take access away, alone or in a batch', () => {
    const revoking: Command[] = [
      { op: 'delete', entity: 'api-sessions', id: 'a', at },
      { op: 'delete', entity: 'identities', id: 'i', at },
      { op: 'custom', name: 'disableIdentity', args: { id: 'i', durationMinutes: 0 }, at },
      { op: 'custom', name: 'applyRevocation', args: { id: 'i', type: 'IDENTITY', expired: [] }, at },
      { op: 'update', entity: 'identities', id: 'i', set: { isAdmin: false }, at },
      { op: 'update', entity: 'identities', id: 'i', set: { permissions: [] }, at },
      {
        op: 'batch',
        ops: [
          { op: 'create', entity: 'services', id: 's', data: {}, at },
          { op: 'delete', entity: 'api-sessions', id: 'a', at },
        ],
      },
    ];
    for (const cmd of revoking) expect(revokesAccess(cmd), JSON.stringify(cmd)).toBe(true);
  });

  it('leaves every other write alone (they are answered once applied on the member that took them)', () => {
    const others: Command[] = [
      { op: 'create', entity: 'identities', id: 'i', data: { name: 'x' }, at },
      { op: 'update', entity: 'identities', id: 'i', set: { isAdmin: true }, at },
      { op: 'update', entity: 'identities', id: 'i', set: { name: 'y' }, at },
      { op: 'delete', entity: 'services', id: 's', at },
      { op: 'custom', name: 'enableIdentity', args: { id: 'i' }, at },
      { op: 'custom', name: 'touchSessions', args: { touches: [] }, at },
      { op: 'batch', ops: [{ op: 'delete', entity: 'configs', id: 'c', at }] },
    ];
    for (const cmd of others) expect(revokesAccess(cmd), JSON.stringify(cmd)).toBe(false);
  });
});
