import type { Router } from '../../http/router.js';
import type { RouteMeta } from '../api/register.js';
import { ok } from '../api/respond.js';
import type { Clock } from '../api/services.js';
import type { Store } from '../model/rows.js';

/** Where OpenZiti serves its health checks (its `health-checks` API binding); no session needed. */
export const HEALTH_PATH = '/health-checks';

/** One check, in the shape of OpenZiti's health-check API (`id`, `healthy`, `lastCheckTime`, `lastCheckDuration`). */
export interface HealthCheck {
  id: string;
  healthy: boolean;
  lastCheckTime: string;
  lastCheckDuration: string;
  /** When the check started failing (Keel's addition; absent while healthy). */
  failingSince?: string;
  /** Why it fails, for an operator (Keel's addition; no paths or internals: those are in the log). */
  details?: string;
}

/**
 * `GET /health-checks`: `{"data":{"checks":[…],"healthy":bool},"meta":{}}` as OpenZiti answers, 200 when healthy
 * and 503 when not (so a supervisor or load balancer can go by the status alone). Keel's one check, `store.write`,
 * fails once the store has failed a write (it then refuses writes and the process stops, see docs/architecture.md).
 */
export function mountHealth(router: Router<RouteMeta>, store: Store, clock: Clock): void {
  // OpenZiti writes whole seconds: 2025-01-14T19:42:13Z
  const isoSeconds = () => new Date(clock.now()).toISOString().replace(/\.\d{3}Z$/, 'Z');
  let failingSince: string | undefined;
  store.onFailure(() => {
    failingSince = isoSeconds();
  });
  router.add('GET', HEALTH_PATH, () => {
    const failure = store.failed;
    const check: HealthCheck = {
      id: 'store.write',
      healthy: failure === null,
      lastCheckTime: isoSeconds(),
      lastCheckDuration: '0s',
    };
    if (failure !== null) {
      check.failingSince = failingSince ?? check.lastCheckTime;
      check.details = `a data store write failed (${failure.stage}); writes are refused and the controller is stopping`;
    }
    const res = ok({ checks: [check], healthy: check.healthy });
    return check.healthy ? res : { ...res, status: 503 };
  });
}
