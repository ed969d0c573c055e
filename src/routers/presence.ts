/**
 * Which routers are connected to this controller right now (docs/routers.md, "Router presence"): filled by the
 * router control listener (src/routers/control.ts), read by every view that shows `isOnline`, `hostname`,
 * `supportedProtocols`, `syncStatus` and a router's version, and by sessions, which list the online routers their
 * policies allow. Presence is this controller's own: it is not replicated (in an OpenZiti HA network every router
 * connects to every controller, so each one sees every router).
 */
import type { Services } from '../api/services.js';

/** What a router reports about its build in its hello (OpenZiti's `versionInfo`). */
export interface RouterVersionInfo {
  version: string;
  revision: string;
  buildDate: string;
  os: string;
  arch: string;
}

/** A router that said hello on its control connection. */
export interface OnlineRouter {
  routerId: string;
  hostname: string;
  /** Protocol → advertised listener address, e.g. `tls` → `tls:router.example.com:3022`. */
  protocols: Record<string, string>;
  versionInfo: RouterVersionInfo;
  connectedAt_ms: number;
}

/** What the API shows of a router's connection state (OpenZiti's edge router state). */
export interface RouterStateView {
  isOnline: boolean;
  hostname: string;
  supportedProtocols: Record<string, string>;
  syncStatus: string;
  versionInfo: RouterVersionInfo | null;
}

/**
 * OpenZiti's sync states, as far as Keel has them: a router never seen since this controller started, one whose
 * connection waits for its hello, one online, one that went away.
 */
export const SYNC_NEW = 'SYNC_NEW';
export const SYNC_HELLO_WAIT = 'SYNC_HELLO_WAIT';
export const SYNC_DONE = 'SYNC_DONE';
export const SYNC_DISCONNECTED = 'SYNC_DISCONNECTED';

/** How many gone routers this controller remembers as `SYNC_DISCONNECTED` (older ones fall back to `SYNC_NEW`). */
export const MAX_REMEMBERED_DISCONNECTS = 10_000;

export class RouterPresence {
  private readonly online = new Map<string, OnlineRouter>();
  /** Connected, hello not yet received. */
  private readonly waiting = new Set<string>();
  /** Routers that were connected and went away, oldest first (bounded). */
  private readonly gone = new Set<string>();

  /** Whether a router holds a control connection (with or without its hello). */
  isConnected(routerId: string): boolean {
    return this.online.has(routerId) || this.waiting.has(routerId);
  }

  /** Whether the router is online (connected and said hello). */
  isOnline(routerId: string): boolean {
    return this.online.has(routerId);
  }

  /** The online routers in the order they connected. */
  onlineRouters(): IterableIterator<OnlineRouter> {
    return this.online.values();
  }

  connecting(routerId: string): void {
    if (this.isConnected(routerId)) throw new Error(`router ${routerId} is already connected`);
    this.waiting.add(routerId);
    this.gone.delete(routerId);
  }

  hello(router: OnlineRouter): void {
    if (!this.waiting.delete(router.routerId)) throw new Error(`router ${router.routerId} said hello unconnected`);
    this.online.set(router.routerId, router);
  }

  disconnected(routerId: string): void {
    if (!this.online.delete(routerId) && !this.waiting.delete(routerId)) return;
    this.gone.delete(routerId);
    this.gone.add(routerId);
    while (this.gone.size > MAX_REMEMBERED_DISCONNECTS) this.gone.delete(this.gone.values().next().value!);
  }

  /** The router was deleted: forget it. */
  forget(routerId: string): void {
    this.gone.delete(routerId);
  }

  state(routerId: string): RouterStateView {
    const on = this.online.get(routerId);
    if (on) {
      return {
        isOnline: true,
        hostname: on.hostname,
        supportedProtocols: { ...on.protocols },
        syncStatus: SYNC_DONE,
        versionInfo: on.versionInfo,
      };
    }
    const syncStatus = this.waiting.has(routerId)
      ? SYNC_HELLO_WAIT
      : this.gone.has(routerId)
        ? SYNC_DISCONNECTED
        : SYNC_NEW;
    return { isOnline: false, hostname: '', supportedProtocols: {}, syncStatus, versionInfo: null };
  }
}

const presences = new WeakMap<Services, RouterPresence>();

/** This controller's router presence (one per Services, i.e. per controller). */
export function routerPresenceOf(svc: Services): RouterPresence {
  let presence = presences.get(svc);
  if (!presence) presences.set(svc, (presence = new RouterPresence()));
  return presence;
}
