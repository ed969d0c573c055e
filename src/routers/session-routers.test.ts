import { describe, expect, it } from 'vitest';
import type { Services } from '../api/services.js';
import { routerPresenceOf } from './presence.js';
import { MAX_SESSION_EDGE_ROUTERS, sessionEdgeRouters } from './session-routers.js';

/** Just what sessionEdgeRouters reads: edge router rows, and role indexes where every entity shares policy `p`. */
function fakeServices(routerIds: string[], allowed: (id: string) => boolean): Services {
  const shared = new Set(['p']);
  return {
    get: (entity: string, id: string) =>
      entity === 'edge-routers' && routerIds.includes(id) ? { id, name: `name-${id}`, cost: 7 } : undefined,
    store: {
      derived: {
        get: () => ({ policiesOf: (id: string) => (allowed(id) || !id.startsWith('r') ? shared : new Set()) }),
      },
    },
  } as unknown as Services;
}

const online = (svc: Services, id: string) => {
  const presence = routerPresenceOf(svc);
  presence.connecting(id);
  presence.hello({
    routerId: id,
    hostname: `${id}.test`,
    protocols: { tls: `tls:${id}.test:3022` },
    versionInfo: { version: 'v1', revision: '', buildDate: '', os: '', arch: '' },
    connectedAt_ms: 0,
  });
};

describe("a session's edge routers", () => {
  it(`the online routers both sides allow, at most ${MAX_SESSION_EDGE_ROUTERS}, in connection order`, () => {
    const ids = Array.from({ length: MAX_SESSION_EDGE_ROUTERS + 10 }, (_, i) => `r${i}`);
    const svc = fakeServices(ids, (id) => id !== 'r1');
    for (const id of ids) online(svc, id);
    const listed = sessionEdgeRouters(svc, 'identity', 'service');
    expect(listed.length).toBe(MAX_SESSION_EDGE_ROUTERS);
    expect(listed.map((r) => r.name)).not.toContain('name-r1');
    expect(listed[0]).toMatchObject({ name: 'name-r0', isOnline: true, cost: 7, urls: { tls: 'tls:r0.test:3022' } });
    routerPresenceOf(svc).disconnected('r0');
    expect(sessionEdgeRouters(svc, 'identity', 'service')[0]!.name).toBe('name-r2');
  });
});
