/**
 * Edge routers stored before every router had a router row (src/model/transit-router.ts) get theirs: at startup
 * a member that sees such edge routers proposes `addRouterRows` through the log, and apply — not the proposer —
 * decides, from the state it meets, which rows to create, so every member ends with the same rows and a second
 * proposal (another member, a restart) changes nothing (docs/routers.md "Edge routers stored before router rows").
 */

import { assert } from '../../storage/types.js';
import type { Services } from '../api/services.js';
import { routerRowData } from './edge-router.js';
import type { ApplyContext, RowFor } from './rows.js';

/** Edge routers one `addRouterRows` command names at most (Keel's bound); more go in further commands. */
export const MAX_ROUTER_ROWS_PER_COMMAND = 500;

/**
 * Custom command: the router row (the shared fields, unenrolled) of each named edge router that still exists and
 * has none. An edge router whose name another router already holds is skipped (the names are unique among
 * routers). Returns the ids given a row.
 */
export function addRouterRows(ctx: ApplyContext, args: { ids: string[] }, at: string): string[] {
  assert(args.ids.length <= MAX_ROUTER_ROWS_PER_COMMAND, 'addRouterRows names at most MAX_ROUTER_ROWS_PER_COMMAND');
  const added: string[] = [];
  for (const id of args.ids) {
    const edge = ctx.txn.get('edge-routers', id);
    if (!edge || ctx.txn.get('transit-routers', id)) continue;
    if (ctx.txn.lookup('transit-routers', 'name', edge.name).length > 0) continue;
    ctx.create('transit-routers', id, routerRowData(edge), at);
    added.push(id);
  }
  return added;
}

/** The edge routers this member's state shows without a router row, in id order. */
export function edgeRoutersWithoutRouterRow(svc: Services): string[] {
  const out: string[] = [];
  for (const edge of svc.store.collection('edge-routers').scan()) {
    if (!svc.get('transit-routers', edge.id)) out.push(edge.id);
  }
  return out;
}

/**
 * Proposes `addRouterRows` for the edge routers without a router row, MAX_ROUTER_ROWS_PER_COMMAND at a time; logs
 * those still without one (their name is another router's: rename one and restart) as an error.
 */
export async function migrateRouterRows(svc: Services): Promise<void> {
  const missing = edgeRoutersWithoutRouterRow(svc);
  if (missing.length === 0) return;
  for (let start = 0; start < missing.length; start += MAX_ROUTER_ROWS_PER_COMMAND) {
    const ids = missing.slice(start, start + MAX_ROUTER_ROWS_PER_COMMAND);
    await svc.write({ op: 'custom', name: 'addRouterRows', args: { ids }, at: svc.nowIso() });
  }
  const left = edgeRoutersWithoutRouterRow(svc);
  svc.log('info', 'edge routers stored before router rows got theirs', { count: missing.length - left.length });
  if (left.length > 0) {
    svc.log('error', 'edge routers left without a router row: another router holds the name; rename one, restart', {
      ids: left,
    });
  }
}

/**
 * The router whose current client certificate has this SHA-1 fingerprint (as enrollment and extension store it; a
 * unique field), or undefined: no router holds that certificate on this member.
 */
export function routerByFingerprint(svc: Services, fingerprint: string): RowFor<'transit-routers'> | undefined {
  const [id] = svc.store.lookup('transit-routers', 'fingerprint', fingerprint);
  return id === undefined ? undefined : svc.get('transit-routers', id);
}
