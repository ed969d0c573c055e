import type { Row } from '../../storage/types.js';
import type { Services } from '../api/services.js';
import type { Change, RowFor } from '../model/rows.js';
import { withTimeout } from '../util/timeout.js';

/** At most this many activity updates go into one replicated command. */
const MAX_TOUCHES_PER_COMMAND = 1000;
/** At most this many expired sessions are deleted per sweep command. */
const MAX_SWEEP_PER_COMMAND = 1000;

/** `lastActivityAt` of a stored row, parsed once (rows are immutable: an update is a new object). */
const parsedActivity = new WeakMap<Row, number>();

export interface ResolvedSession {
  session: RowFor<'api-sessions'>;
  identity: RowFor<'identities'>;
}

/** Bound on one catch-up wait: a read barrier whose index is confirmed waits for the apply with no timeout of its own. */
export const CATCH_UP_TIMEOUT_MS = 4_000;
/**
 * Catch-up waits in flight at once; beyond it a caller goes on with local state, so a flood of logins cannot take
 * every pending-read slot of the Raft node (which unknown tokens need too).
 */
export const MAX_CATCH_UPS = 64;

export interface SessionServiceOptions {
  flush_ms: number;
  sweep_ms: number;
  /** Defaults CATCH_UP_TIMEOUT_MS and MAX_CATCH_UPS. */
  catchUpTimeout_ms?: number;
  maxCatchUps?: number;
}

/**
 * API sessions: token lookup (an O(1) unique-index hit), idle expiry, and activity tracking.
 *
 * Activity is recorded in memory on every request and written to the replicated store in batches
 * (every `flush_ms`), so a busy session costs no write per request. A sweeper deletes sessions idle for longer
 * than the timeout. Expiry is judged from the newest activity this node knows (its own, or the stored one).
 */
export class SessionService {
  private readonly activity = new Map<string, number>();
  /** catchUp() waits in flight. */
  private catchingUp = 0;
  private readonly dirty = new Set<string>();
  private timers: NodeJS.Timeout[] = [];
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly svc: Services,
    private readonly opts: SessionServiceOptions = { flush_ms: 5_000, sweep_ms: 15_000 },
  ) {}

  start(): void {
    this.timers.push(setInterval(() => void this.flush(), this.opts.flush_ms).unref());
    this.timers.push(setInterval(() => void this.sweep(), this.opts.sweep_ms).unref());
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    await this.flush();
  }

  private lastActivityMs(row: RowFor<'api-sessions'>): number {
    let stored = parsedActivity.get(row);
    if (stored === undefined) parsedActivity.set(row, (stored = Date.parse(row.lastActivityAt as string)));
    const local = this.activity.get(row.id) ?? 0;
    return Math.max(stored, local);
  }

  lastActivityIso(row: RowFor<'api-sessions'>): string {
    return new Date(this.lastActivityMs(row)).toISOString();
  }

  expiresAtMs(row: RowFor<'api-sessions'>): number {
    return this.lastActivityMs(row) + this.svc.config.sessionTimeout_ms;
  }

  /** Seconds until expiry (OpenZiti's `expirationSeconds`). */
  expirationSeconds(row: RowFor<'api-sessions'>): number {
    return Math.max(0, Math.round((this.expiresAtMs(row) - this.svc.clock.now()) / 1000));
  }

  authQueries(row: RowFor<'api-sessions'>): unknown[] {
    const out: unknown[] = [];
    if (typeof row.extJwtPending === 'string') {
      const signer = this.svc.store.get('external-jwt-signers', row.extJwtPending);
      out.push({
        httpMethod: 'POST',
        httpUrl: signer?.externalAuthUrl ?? '',
        id: row.extJwtPending,
        clientId: signer?.clientId ?? '',
        scopes: signer?.scopes ?? [],
        provider: 'url',
        typeId: 'EXT-JWT',
      });
    }
    if (row.isMfaRequired && !row.isMfaComplete) {
      out.push({
        format: 'numeric',
        httpMethod: 'POST',
        httpUrl: './authenticate/mfa',
        maxLength: 8,
        minLength: 4,
        provider: 'ziti',
        typeId: 'MFA',
      });
    }
    return out;
  }

  /** The live session and identity for a token, or null (unknown, expired, or the identity is gone). */
  resolve(token: string): ResolvedSession | null {
    const c = this.svc.store.collection('api-sessions');
    const ids = c.lookup('token', token);
    let id: string | undefined;
    for (const x of ids ?? []) id = x;
    if (id === undefined) return null;
    const session = c.get(id)!;
    if (this.svc.clock.now() > this.expiresAtMs(session)) return null;
    const identity = this.svc.store.get('identities', session.identityId!);
    if (!identity) return null;
    return { session, identity };
  }

  /** True when no session holds this token (as opposed to one that expired or lost its identity). */
  isUnknown(token: string): boolean {
    const ids = this.svc.store.collection('api-sessions').lookup('token', token);
    for (const _ of ids ?? []) return false;
    return true;
  }

  /**
   * Cluster members: waits until this node has applied everything committed (a ReadIndex barrier), so that a
   * session or credential created on another member is known here (an unknown token, every login). At most
   * `catchUpTimeout_ms` (a member far behind, replaying or restoring, is not waited for), and at most `maxCatchUps`
   * waits at once (beyond, the caller does not wait). A failed, timed-out or skipped wait returns all the same: the
   * caller goes on with local state (an unknown token then gets 401).
   */
  async catchUp(): Promise<void> {
    const cluster = this.svc.cluster;
    if (!cluster || this.catchingUp >= (this.opts.maxCatchUps ?? MAX_CATCH_UPS)) return;
    this.catchingUp++;
    try {
      await withTimeout(cluster.readBarrier(), this.opts.catchUpTimeout_ms ?? CATCH_UP_TIMEOUT_MS, 'catch-up');
    } catch {
      // no leader to confirm with, too far behind, or too many pending reads: local state it is
    } finally {
      this.catchingUp--;
    }
  }

  /** Records a request on the session (in memory; persisted by the next flush). */
  touch(session: RowFor<'api-sessions'>): void {
    this.activity.set(session.id, this.svc.clock.now());
    this.dirty.add(session.id);
  }

  /** Forgets local state of a session that was removed. */
  forget(id: string): void {
    this.activity.delete(id);
    this.dirty.delete(id);
  }

  /**
   * Writes the activity recorded since the last flush. Takes only the sessions dirty when it starts (so a busy
   * node still writes once per interval, not back to back), in commands of at most MAX_TOUCHES_PER_COMMAND.
   */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    if (this.dirty.size === 0) return Promise.resolve();
    const ids = [...this.dirty];
    this.dirty.clear();
    const p = this.writeTouches(ids).finally(() => {
      this.flushing = null;
    });
    this.flushing = p;
    return p;
  }

  private async writeTouches(ids: string[]): Promise<void> {
    for (let i = 0; i < ids.length; i += MAX_TOUCHES_PER_COMMAND) {
      const touches: [string, string][] = [];
      for (const id of ids.slice(i, i + MAX_TOUCHES_PER_COMMAND)) {
        const ms = this.activity.get(id);
        if (ms !== undefined) touches.push([id, new Date(ms).toISOString()]);
      }
      if (touches.length === 0) continue;
      try {
        await this.svc.write({ op: 'custom', name: 'touchSessions', args: { touches }, at: this.svc.nowIso() });
      } catch {
        // Best effort: put them back so that the next flush retries them with their newest values.
        for (const [id] of touches) if (this.activity.has(id)) this.dirty.add(id);
      }
    }
  }

  /**
   * Deletes sessions idle for longer than the timeout. The command re-checks each session's stored activity when it
   * applies (`expireSessions`), so a session that was active elsewhere in the meantime survives.
   */
  async sweep(): Promise<number> {
    await this.flush();
    // In a cluster only the leader sweeps, with a grace period covering activity that other members recorded and
    // have not flushed yet (their flush interval, twice).
    const cluster = this.svc.cluster;
    if (cluster !== null && !cluster.raft.isLeader()) return 0;
    const grace_ms = cluster === null ? 0 : 2 * this.opts.flush_ms;
    const now = this.svc.clock.now() - grace_ms;
    const expired: string[] = [];
    for (const row of this.svc.store.collection('api-sessions').scan()) {
      if (now > this.expiresAtMs(row)) expired.push(row.id);
    }
    const cutoff = new Date(now - this.svc.config.sessionTimeout_ms).toISOString();
    let deleted = 0;
    for (let i = 0; i < expired.length; i += MAX_SWEEP_PER_COMMAND) {
      const ids = expired.slice(i, i + MAX_SWEEP_PER_COMMAND);
      try {
        deleted += (await this.svc.write({
          op: 'custom',
          name: 'expireSessions',
          args: { ids, cutoff },
          at: this.svc.nowIso(),
        })) as number;
      } catch {
        break;
      }
    }
    return deleted;
  }

  /** Keeps the in-memory activity map in step with the store: removed sessions are forgotten. */
  onPublish(changes: Change[]): void {
    for (const c of changes) if (c.entity === 'api-sessions' && !c.after) this.forget(c.id);
  }
}
