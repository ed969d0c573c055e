/**
 * The service policy enforcer: a session whose identity may no longer use its service (of the session's type, Dial
 * or Bind) is deleted, as OpenZiti's ServicePolicyEnforcer deletes it when the identity loses access. Access is lost
 * through a service policy changed or deleted, the identity's or the service's role attributes changed, or the
 * identity no longer an admin... so the enforcer watches what the store publishes:
 * - a service policy changed or deleted: the sessions of the identities it named as it was (every session when it
 *   named `#all`);
 * - an identity whose `roleAttributes` or `isAdmin` changed: its sessions; a service whose `roleAttributes` changed:
 *   its sessions;
 * - a session created: that session (it may have been checked against policies that changed before it applied).
 * Checks run a moment after the change (CHECK_DELAY_MS: the changes of a burst are checked once), in chunks that give
 * the event loop back, and every session is checked at start and once in every term this node leads. Sessions of
 * admins are left alone, as OpenZiti leaves them. The deletes are replicated writes; in a cluster only the leader
 * makes them (every member sees the same changes; one writer is enough).
 */

import { parseRoles } from '../../storage/role-index.js';
import type { Services } from '../api/services.js';
import { serviceAccessOf } from '../model/access.js';
import type { Change } from '../model/rows.js';

/** A policy naming more attributes than this marks every session rather than each attribute's identities. */
const MAX_MARKED_ATTRIBUTES = 64;
/** How long after a change its checks run (the changes of one burst are checked together). */
export const CHECK_DELAY_MS = 50;
/** How often a cluster member looks whether it leads in a new term (it then checks every session). */
const LEADERSHIP_CHECK_MS = 2_000;
/** Sessions deleted per command. */
const MAX_DELETES_PER_COMMAND = 500;
/** Sessions checked between two turns of the event loop. */
const CHECKS_PER_TURN = 2_000;
/** After a failed delete (no leader, overloaded), the checks are tried again this much later. */
const RETRY_MS = 1_000;

export class SessionEnforcer {
  private all = true;
  private readonly identities = new Set<string>();
  private readonly services = new Set<string>();
  private readonly sessions = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private leadership: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  /** The Raft term this node last checked every session in as the leader (-1: never). */
  private ledTerm = -1;
  private stopped = false;

  constructor(private readonly svc: Services) {}

  start(): void {
    this.schedule(0);
    if (this.svc.cluster === null) return;
    // a leader checks every session once per term it leads (a term is one leadership: leading again after losing it
    // in between, however briefly, is a new term, in which the changes seen as a follower were never checked)
    this.leadership = setInterval(() => {
      const raft = this.svc.cluster!.raft;
      if (!raft.isLeader()) return;
      const term = raft.term();
      if (term === this.ledTerm) return;
      this.ledTerm = term;
      this.all = true;
      this.schedule(0);
    }, LEADERSHIP_CHECK_MS).unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    if (this.leadership !== null) clearInterval(this.leadership);
    this.timer = null;
    this.leadership = null;
    await this.running;
  }

  /** Marks what the published changes may have cost a session its access. */
  onPublish(changes: Change[]): void {
    let marked = false;
    for (const c of changes) {
      switch (c.entity) {
        case 'service-policies':
          // what the policy granted before (a new policy grants more: nothing to check)
          if (c.before) this.markPolicy(c.before);
          marked = marked || c.before !== undefined;
          break;
        case 'identities':
          if (c.before && c.after && (changed(c, 'roleAttributes') || c.before.isAdmin !== c.after.isAdmin)) {
            this.identities.add(c.id);
            marked = true;
          }
          break;
        case 'services':
          if (c.before && c.after && changed(c, 'roleAttributes')) {
            this.services.add(c.id);
            marked = true;
          }
          break;
        case 'sessions':
          if (!c.before && c.after) {
            this.sessions.add(c.id);
            marked = true;
          }
          break;
      }
    }
    if (marked) this.schedule(CHECK_DELAY_MS);
  }

  /**
   * The sessions a service policy (as it was) may have granted: those of the identities its identity roles name
   * (by `@id`, or holding one of its `#attr`s now: an identity whose attributes changed is marked by that change),
   * or every session when it named `#all`. Its service side is left to the check itself.
   */
  private markPolicy(policy: Record<string, unknown>): void {
    const roles = parseRoles(policy.identityRoles, policy.semantic);
    if (roles.all || roles.attrs.length > MAX_MARKED_ATTRIBUTES) {
      this.all = true;
      return;
    }
    for (const id of roles.ids) this.identities.add(id);
    for (const attr of roles.attrs) {
      for (const id of this.svc.store.lookup('identities', 'roleAttributes', attr)) this.identities.add(id);
    }
  }

  /** Resolves once the checks marked so far have run, and any they queued (tests). */
  async settled(): Promise<void> {
    while (!this.stopped && (this.timer !== null || this.running !== null || this.marked())) {
      await (this.running ?? new Promise((r) => setTimeout(r, CHECK_DELAY_MS)));
    }
  }

  private marked(): boolean {
    return this.all || this.identities.size > 0 || this.services.size > 0 || this.sessions.size > 0;
  }

  private isWriter(): boolean {
    return this.svc.cluster === null || this.svc.cluster.raft.isLeader();
  }

  private schedule(delay_ms: number): void {
    if (this.stopped || this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.running !== null) {
        // one run at a time: the marks wait for the next
        void this.running.then(() => this.schedule(0));
        return;
      }
      this.running = this.run()
        .catch((err: unknown) => {
          // never an unhandled rejection: the marks taken are lost, so the next run checks every session
          this.all = true;
          this.svc.log('error', 'session enforcer: a check failed', { err: String(err) });
          this.schedule(RETRY_MS);
        })
        .finally(() => {
          this.running = null;
        });
    }, delay_ms);
    this.timer.unref();
  }

  private async run(): Promise<void> {
    const ids = this.takeMarked();
    if (ids.length === 0) return;
    if (!this.isWriter()) return; // the leader checks them (it saw the same changes)
    const lost: string[] = [];
    for (let i = 0; i < ids.length; i++) {
      if (i > 0 && i % CHECKS_PER_TURN === 0) await new Promise((r) => setImmediate(r));
      if (this.stopped) return;
      const id = ids[i]!;
      if (this.lostAccess(id)) lost.push(id);
    }
    for (let i = 0; i < lost.length; i += MAX_DELETES_PER_COMMAND) {
      const chunk = lost.slice(i, i + MAX_DELETES_PER_COMMAND);
      const at = this.svc.nowIso();
      try {
        await this.svc.write({
          op: 'batch',
          ops: chunk.map((id) => ({ op: 'delete', entity: 'sessions', id, at, system: true, ifExists: true })),
        });
      } catch (err) {
        // not written (no leader, overloaded, stopping): checked again a moment later
        for (const id of lost.slice(i)) this.sessions.add(id);
        this.svc.log('warn', 'sessions that lost access not deleted yet', { count: lost.length - i, err: String(err) });
        this.schedule(RETRY_MS);
        return;
      }
    }
    if (lost.length > 0) this.svc.log('info', 'sessions deleted: their identities lost access', { count: lost.length });
  }

  /** The ids of the sessions to check (every one after a policy change), the marks cleared. */
  private takeMarked(): string[] {
    const out = new Set<string>(this.sessions);
    if (this.all) {
      for (const row of this.svc.store.collection('sessions').scan()) out.add(row.id);
    } else {
      for (const id of this.identities) for (const s of this.svc.store.lookup('sessions', 'identityId', id)) out.add(s);
      for (const id of this.services) for (const s of this.svc.store.lookup('sessions', 'serviceId', id)) out.add(s);
    }
    this.all = false;
    this.identities.clear();
    this.services.clear();
    this.sessions.clear();
    return [...out];
  }

  /** Whether session `id` exists and its identity (not an admin) may no longer use its service its way. */
  private lostAccess(id: string): boolean {
    const row = this.svc.get('sessions', id);
    if (!row) return false;
    const identity = this.svc.get('identities', row.identityId as string);
    if (!identity || identity.isAdmin === true) return false;
    const access = serviceAccessOf(this.svc, identity.id, row.serviceId as string).get(row.serviceId as string);
    const granted = row.type === 'Bind' ? access?.bind : access?.dial;
    return granted === undefined || granted.length === 0;
  }
}

/** Whether a set field (a list) holds other values after the change than before. */
function changed(c: Change, field: string): boolean {
  const a = (c.before?.[field] as unknown[] | undefined) ?? [];
  const b = (c.after?.[field] as unknown[] | undefined) ?? [];
  if (a.length !== b.length) return true;
  const seen = new Set(a);
  return b.some((x) => !seen.has(x));
}
