import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type App, createApp } from '../http/app.js';
import { Router } from '../http/router.js';
import { serve } from '../http/serve.js';
import type { HttpServer } from '../http/types.js';
import { LocalProposer } from '../storage/local-proposer.js';
import type { Proposer } from '../storage/proposer.js';
import { Store } from '../storage/store.js';
import type { StoreDb } from '../storage/store-db.js';
import type { StoreFailedError } from '../storage/types.js';
import type { ApiName, OpDef } from './api/op.js';
import { buildOpenApi } from './api/openapi.js';
import { handlerFor, mountOps, type RouteMeta, rewritePath } from './api/register.js';
import { type Clock, type Logger, Services, systemClock } from './api/services.js';
import { SessionEnforcer } from './auth/session-enforcer.js';
import { SessionService } from './auth/sessions.js';
import { generatePassword, initialize, isInitialized } from './bootstrap.js';
import { ClusterNode, type ClusterOptions } from './cluster/node.js';
import { dialAddress } from './cluster/peer-address.js';
import { RemovedFromClusterError } from './cluster/removal.js';
import { controllerMetrics, type MetricsListenOptions, serveMetrics } from './metrics.js';
import { buildSchema, ENTITIES } from './model/index.js';
import { migrateRouterRows } from './model/router-rows.js';
import { onChanges } from './model/rows.js';
import { accessOps } from './ops/access.js';
import { authenticationOps } from './ops/authentication.js';
import { caOps } from './ops/cas.js';
import { controllerOps, FABRIC_BASE, fabricClusterOps } from './ops/cluster.js';
import { controllerSettingOps } from './ops/controller-settings.js';
import { databaseOps } from './ops/database.js';
import { enrollOps } from './ops/enroll.js';
import { enrollmentOps } from './ops/enrollments.js';
import { extendOps } from './ops/extend.js';
import { externalJwtSignerOps } from './ops/external-jwt-signers.js';
import { fabricOps } from './ops/fabric.js';
import { mountHealth } from './ops/health.js';
import { identityOps } from './ops/identity.js';
import { identityTraceOps } from './ops/identity-trace.js';
import { informationalOps } from './ops/informational.js';
import { mfaOps } from './ops/mfa.js';
import { networkJwtOps } from './ops/network-jwts.js';
import { routerEnrollOps } from './ops/router-enroll.js';
import { selfAuthenticatorOps } from './ops/self-authenticators.js';
import { sessionCertificateOps } from './ops/session-certificates.js';
import { tokenEnrollOps } from './ops/token-enroll.js';
import { wellKnownOps } from './ops/well-known.js';
import { issueHostCert } from './pki/ca.js';
import { listenerCas, trackListenerCas } from './pki/listener-trust.js';
import { apiCertHosts, type NodePki, openNodePki } from './pki/node-pki.js';
import { RouterControl, type RouterControlOptions } from './routers/control.js';
import { KEEL_VERSION } from './version.js';

export interface ControllerOptions {
  dataDir: string;
  host: string;
  /** 0 = an ephemeral port (tests). */
  port: number;
  engine?: 'uws' | 'node';
  /** The PKI directory (docs/pki.md); default `<dataDir>/pki`. Its CAs are created on first start. */
  pkiDir?: string;
  /** Serve the API over HTTPS (node engine) with a certificate from the PKI, issued on first start. Default false. */
  apiTls?: boolean;
  /** Used on first start only; generated when absent. */
  adminPassword?: string;
  sessionTimeout_ms?: number;
  /** Public base URLs of the API listener (default: derived from host and port). */
  apiBaseUrls?: string[];
  clock?: Clock;
  /** fsync every batch (default true; tests of non-durability paths may turn it off). */
  sync?: boolean;
  log?: Logger;
  /**
   * Called once when the store fails (a disk write failed: see StoreFailedError). Writes are refused from then
   * on, and the health check says why; the owner is expected to stop the process (`keel run` exits non-zero).
   */
  onFatal?: (failure: StoreFailedError) => void;
  /** The store's database in `dir` (default: LevelDB). Tests inject faults at this boundary. */
  storeDb?: (dir: string) => StoreDb;
  sessionFlush_ms?: number;
  /** Concurrent connections (node) / requests in flight (uWS) beyond which requests get 429 (default 10 000). */
  maxConnections?: number;
  sessionSweep_ms?: number;
  /** Run as a member of a Raft cluster (absent: a single node). */
  cluster?: ClusterOptions;
  /**
   * The cluster member stopped itself (a broken Raft invariant or a failing Raft log) or learnt it was removed from
   * the cluster (RemovedFromClusterError): the process should exit.
   */
  onClusterFatal?: (err: Error) => void;
  /** Serve the router control listener (routers connect and go online: docs/routers.md); absent: none. */
  routerControl?: RouterControlOptions;
  /**
   * Serve `GET /metrics` (Prometheus) on a listener of its own: HTTPS with the API's certificate when the API is
   * HTTPS, else plain HTTP (docs/operations.md, "Metrics"); absent: none.
   */
  metrics?: MetricsListenOptions;
}

/** How long a starting cluster member waits for a leader (and, when joining, to catch up) before giving up. */
const CLUSTER_READY_TIMEOUT_MS = 30_000;

export const DEFAULT_SESSION_TIMEOUT_MS = 30 * 60 * 1000;
export const DEFAULT_MAX_CONNECTIONS = 10_000;

/** The base URL clients reach a listener at when none is advertised (a wildcard address names this host). */
export function defaultBaseUrl(host: string, port: number, scheme: 'http' | 'https' = 'http'): string {
  return `${scheme}://${dialAddress(host, port)}`;
}

/**
 * The router control listener's certificate: the API's (API TLS), else one the signing CA issues in memory for
 * the listen host at every start.
 */
async function routerControlTls(pki: NodePki, listen: RouterControlOptions): Promise<{ key: string; cert: string }> {
  if (pki.apiTls) return pki.apiTls;
  if (!pki.signing) throw new Error('the router control listener needs API TLS or the signing CA (docs/routers.md)');
  // the advertised host too: routers that dial it check the certificate names it
  const advertised = listen.advertise ? [`tls://${listen.advertise}`] : [];
  const leaf = await issueHostCert(pki.signing, apiCertHosts(listen.host, advertised));
  return { key: leaf.keyPem, cert: [leaf.certPem, ...leaf.chainPem].join('\n') };
}

/** Every operation Keel serves, in one list (CRUD from the entity declarations plus the hand-written ones). */
export function allOps(specs: (api: ApiName) => string, cacerts: () => string = () => ''): OpDef<unknown>[] {
  return [
    ...informationalOps(specs),
    ...wellKnownOps(cacerts),
    ...authenticationOps(),
    ...externalJwtSignerOps(),
    ...enrollOps(),
    ...enrollmentOps(),
    ...caOps(),
    ...extendOps(),
    ...identityOps(),
    ...controllerOps(),
    ...mfaOps(),
    ...accessOps(),
    ...selfAuthenticatorOps(),
    ...controllerSettingOps(),
    ...databaseOps(),
    ...identityTraceOps(),
    ...networkJwtOps(),
    ...routerEnrollOps(),
    ...sessionCertificateOps(),
    ...tokenEnrollOps(),
    ...ENTITIES.flatMap((e) => e.ops()),
  ];
}

/**
 * A controller node: the store, the write path (single node, or a Raft cluster member), the session service and
 * the HTTP front end.
 */
export class Controller {
  /** The admin password generated on this start (first start without a configured one), else null. */
  generatedAdminPassword: string | null = null;
  private server: HttpServer | null = null;
  /** The router control listener, when configured. */
  routerControl: RouterControl | null = null;
  /** The metrics listener, when configured. */
  private metricsServer: HttpServer | null = null;
  private stopped = false;

  private constructor(
    readonly svc: Services,
    readonly app: App,
    readonly ops: OpDef<unknown>[],
    private readonly proposer: Proposer,
    private readonly opts: ControllerOptions,
    /** The cluster membership of this node, or null for a single node. */
    readonly cluster: ClusterNode | null,
    /** Deletes sessions whose identities lost access to their services (src/auth/session-enforcer.ts). */
    readonly enforcer: SessionEnforcer,
  ) {}

  static async start(opts: ControllerOptions): Promise<Controller> {
    const log = opts.log ?? (() => {});
    // The PKI first (it creates the data directory too): nothing is open yet if it refuses.
    if (opts.apiTls && opts.engine === 'uws') throw new Error('API TLS needs the node engine');
    const pki: NodePki = await openNodePki(opts.pkiDir ?? join(opts.dataDir, 'pki'), {
      apiHosts: opts.apiTls ? apiCertHosts(opts.host, opts.apiBaseUrls ?? []) : null,
    });
    mkdirSync(opts.dataDir, { recursive: true });
    const stateDir = join(opts.dataDir, 'state');
    const store = await Store.open(
      opts.storeDb ? opts.storeDb(stateDir) : stateDir,
      buildSchema(opts.cluster?.stateMachineVersion),
    );
    store.onFailure((failure) => {
      log('fatal', 'data store failed: refusing every write from now on', {
        stage: failure.stage,
        reason: failure.reason,
      });
      opts.onFatal?.(failure);
    });
    let cluster: ClusterNode | null = null;
    if (opts.cluster) {
      try {
        cluster = await ClusterNode.start(opts.dataDir, store, opts.cluster, log, (err) => {
          // a removal is logged by the node itself, without a stack: nothing failed
          if (!(err instanceof RemovedFromClusterError)) {
            log('error', 'cluster member stopped itself', { err: String(err.stack ?? err) });
          }
          opts.onClusterFatal?.(err);
        });
      } catch (err) {
        await store.close();
        throw err;
      }
    }
    const proposer: Proposer = cluster
      ? cluster.proposer
      : new LocalProposer(store, { maxQueued: 10_000, sync: opts.sync ?? true });
    const instanceId = randomBytes(8).toString('hex');
    const svc = new Services(
      store,
      proposer,
      {
        sessionTimeout_ms: opts.sessionTimeout_ms ?? DEFAULT_SESSION_TIMEOUT_MS,
        apiBaseUrls: opts.apiBaseUrls ?? [],
        instanceId,
        clustered: cluster !== null,
        dataDir: opts.dataDir,
      },
      opts.clock ?? systemClock,
      log,
    );
    svc.cluster = cluster;
    svc.pki = pki;
    svc.sessions = new SessionService(svc, {
      flush_ms: opts.sessionFlush_ms ?? 5_000,
      sweep_ms: opts.sessionSweep_ms ?? 15_000,
    });
    onChanges(store, (changes) => svc.sessions.onPublish(changes));
    const enforcer = new SessionEnforcer(svc);
    onChanges(store, (changes) => enforcer.onPublish(changes));

    const specCache = new Map<ApiName, string>();
    const router = new Router<RouteMeta>();
    const ops = allOps(
      (api) => {
        let doc = specCache.get(api);
        if (!doc) specCache.set(api, (doc = JSON.stringify(buildOpenApi(api, ops, KEEL_VERSION))));
        return doc;
      },
      () => pki.cacertsPkcs7,
    );
    mountOps(router, ops, svc);
    for (const f of [...fabricClusterOps(), ...fabricOps()]) {
      router.add(f.method, FABRIC_BASE + f.path, handlerFor(f, 'management', svc), { op: f, api: 'management' });
    }
    mountHealth(router, store, opts.clock ?? systemClock);
    const app = createApp({
      router,
      rewritePath,
      defaultHeaders: { server: `keel/${KEEL_VERSION}`, 'ziti-instance-id': instanceId },
      onError: (err, req) =>
        log('error', 'unhandled error', { err: String((err as Error)?.stack ?? err), path: req.path }),
    });
    const ctl = new Controller(svc, app, ops, proposer, opts, cluster, enforcer);
    try {
      if (cluster) {
        // A member answers only once it has caught up with what the cluster committed (its own writes and reads
        // are then as fresh as the leader's), and only the founding member initialises the state.
        await cluster.waitUntilReady(opts.cluster?.readyTimeout_ms ?? CLUSTER_READY_TIMEOUT_MS);
      }
      if (!isInitialized(svc) && (!cluster || opts.cluster?.init)) {
        const password = opts.adminPassword ?? generatePassword();
        if (!opts.adminPassword) ctl.generatedAdminPassword = password;
        await initialize(svc, password);
        log('info', 'initialised a new data directory', { dataDir: opts.dataDir });
      }
      // edge routers stored before every router had a router row get theirs, through the log
      await migrateRouterRows(svc);
      svc.sessions.start();
      enforcer.start();
      const listen = {
        host: opts.host,
        port: opts.port,
        maxConnections: opts.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
      };
      ctl.server = await serve(
        app,
        pki.apiTls
          ? {
              engine: 'node',
              ...listen,
              // client certificates are asked for but optional; `cert` authentication verifies them (docs/enrollment.md)
              tls: { key: pki.apiTls.key, cert: pki.apiTls.cert, ca: listenerCas(svc), requestCert: true },
            }
          : { engine: opts.engine ?? 'uws', ...listen },
      );
      // the HTTPS listener names this controller's CAs and the verified CAs when it asks for a client certificate
      trackListenerCas(svc, ctl.server);
      const scheme = pki.apiTls ? 'https' : 'http';
      if (!opts.apiBaseUrls) svc.config.apiBaseUrls.push(defaultBaseUrl(opts.host, ctl.server.port, scheme));
      if (cluster) cluster.apiAddresses = svc.config.apiBaseUrls;
      if (opts.routerControl) {
        ctl.routerControl = await RouterControl.start(
          svc,
          opts.routerControl,
          await routerControlTls(pki, opts.routerControl),
        );
        // where routers dial this member: its `ctrlAddress` in the controllers list, on every member
        svc.config.routerAddress = ctl.routerControl.address;
        if (cluster) cluster.routerAddress = ctl.routerControl.address;
      }
      if (opts.metrics) {
        const metrics = controllerMetrics({ svc, app, cluster, routerControl: ctl.routerControl });
        ctl.metricsServer = await serveMetrics(metrics, {
          ...opts.metrics,
          ...(pki.apiTls ? { tls: pki.apiTls } : {}),
        });
      }
    } catch (err) {
      await ctl.stop();
      throw err;
    }
    return ctl;
  }

  /** Whether writes are acknowledged only after a synced (fsync'd) batch: true unless a test turned it off. */
  get durableWrites(): boolean {
    return this.proposer.syncWrites;
  }

  get port(): number {
    return this.server?.port ?? 0;
  }

  /** The metrics listener's bound port (0: none). */
  get metricsPort(): number {
    return this.metricsServer?.port ?? 0;
  }

  /** The first advertised base URL (`http://host:port`, https with API TLS, unless configured). */
  get baseUrl(): string {
    return (
      this.svc.config.apiBaseUrls[0] ?? defaultBaseUrl(this.opts.host, this.port, this.opts.apiTls ? 'https' : 'http')
    );
  }

  /**
   * Stops accepting requests, persists session activity, waits for queued writes, (a cluster member: hands
   * leadership over and leaves the Raft group's traffic), closes the store.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.routerControl?.stop();
    await this.metricsServer?.close();
    await this.server?.close();
    await this.svc.sessions?.stop();
    await this.enforcer.stop();
    await this.proposer.close();
    await this.cluster?.stop({ transferLeadership: true });
    await this.svc.store.close();
  }
}
