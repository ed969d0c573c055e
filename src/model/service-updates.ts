/**
 * When the services an API session sees last changed, for `GET /current-api-session/service-updates` (SDKs poll it
 * and refresh their service list when the time moves). Keel tracks one time per store for every change that can
 * change any identity's services: services, configs and config types, the three policy types, edge routers, and
 * identities' role attributes. That is coarser than OpenZiti's per-identity refresh map, so a client may refresh
 * when nothing of its own changed, never the reverse.
 */
import { type Change, onChanges, type Store } from './rows.js';

const SOURCES = new Set([
  'services',
  'configs',
  'config-types',
  'service-policies',
  'edge-routers',
  'edge-router-policies',
  'service-edge-router-policies',
]);

function affectsServices(c: Change): boolean {
  if (SOURCES.has(c.entity)) return true;
  if (c.entity !== 'identities') return false;
  const before = c.before?.roleAttributes ?? [];
  const after = c.after?.roleAttributes ?? [];
  return before.length !== after.length || before.some((a, i) => a !== after[i]);
}

const trackers = new WeakMap<Store, { lastChangeAt_ms: number }>();

/**
 * The time of the last change that can affect services (ms), tracked from the first call on (until a change: the
 * time of that call). A delete counts at the clock's time when it is published.
 */
export function lastServiceChangeMs(store: Store, clock: { now(): number }): number {
  let tracker = trackers.get(store);
  if (!tracker) {
    const created = { lastChangeAt_ms: clock.now() };
    onChanges(store, (changes) => {
      for (const c of changes) {
        if (!affectsServices(c)) continue;
        const at = Date.parse(c.after?.updatedAt ?? '');
        created.lastChangeAt_ms = Math.max(created.lastChangeAt_ms, Number.isNaN(at) ? clock.now() : at);
      }
    });
    trackers.set(store, (tracker = created));
  }
  return tracker.lastChangeAt_ms;
}
