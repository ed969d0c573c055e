/**
 * The cluster as the APIs show it: the client and management `controllers` lists (live members) and OpenZiti's
 * fabric cluster endpoints (`/fabric/v1/cluster/...`, admin only) that its CLI and consoles call.
 */

import { RaftError } from '../../raft/index.js';
import { Collection } from '../../storage/collection.js';
import type { EntityDef, Row } from '../../storage/types.js';
import { createSymbolTable, type SymbolTable } from '../../storage/zitiql/index.js';
import { baseSymbols, fieldSymbols } from '../api/entity.js';
import { Errors, fieldError } from '../api/errors.js';
import { collectionSource, listResponse, mapResult, runList } from '../api/list.js';
import { type ApiName, LIST_QUERY, type OpDef, op } from '../api/op.js';
import { API_BASE } from '../api/register.js';
import { ok, okEmpty } from '../api/respond.js';
import type { ClusterView, Services } from '../api/services.js';
import type { MemberCert, MemberView } from '../cluster/members.js';
import { isPeerAddress } from '../cluster/peer-address.js';
import { routerAddressOf } from '../cluster/peer-api.js';
import { baseEntity, empty, listEnvelope } from '../model/common.js';
import { s } from '../schema/s.js';
import { KEEL_VERSION } from '../version.js';

export const FABRIC_BASE = '/fabric/v1';

const apiAddress = s.named('apiAddress', s.obj({ url: s.str(), version: s.str() }));
const controllerDetail = s.named(
  'controllerDetail',
  s.allOf(
    baseEntity,
    s.obj(
      {
        apiAddresses: s.named('apiAddressList', s.map(s.named('apiAddressArray', s.arr(apiAddress)))),
        certPem: s.str(),
        ctrlAddress: s.nullable(s.str()),
        fingerprint: s.str(),
        isOnline: s.bool(),
        lastJoinedAt: s.datetime(),
        name: s.str(),
      },
      ['name', 'certPem', 'fingerprint', 'isOnline', 'lastJoinedAt'],
    ),
  ),
);

const CONTROLLER_DEF: EntityDef = {
  name: 'controllers',
  type: 'controller',
  fields: {
    name: { type: 'string' },
    ctrlAddress: { type: 'string' },
    isOnline: { type: 'bool' },
    lastJoinedAt: { type: 'datetime' },
    fingerprint: { type: 'string' },
  },
};
let symbols: SymbolTable | null = null;
function controllerSymbols(): SymbolTable {
  symbols ??= createSymbolTable({
    symbols: { ...baseSymbols(), ...fieldSymbols(CONTROLLER_DEF.fields) },
    maps: { tags: (r: Row) => r.tags },
  });
  return symbols;
}

function apiAddresses(bases: string[]): Record<string, { url: string; version: string }[]> {
  return {
    'edge-client': bases.map((b) => ({ url: b + API_BASE.client, version: 'v1' })),
    'edge-management': bases.map((b) => ({ url: b + API_BASE.management, version: 'v1' })),
  };
}

function certInfo(cert: MemberCert | null): { certPem: string; fingerprint: string } {
  return cert ? { certPem: cert.pem, fingerprint: cert.fingerprint } : { certPem: '', fingerprint: '' };
}

/**
 * Where routers reach member `m`: its router control listener (`tls:`, mutual TLS) when it reports one, else its peer
 * address, where its peers reach it (OpenZiti's routers and peers share one ctrl listener; Keel's do not).
 */
function ctrlAddressOf(m: MemberView, peerScheme: 'tls' | 'tcp'): string | null {
  const router = routerAddressOf(m.status);
  if (router !== null) return `tls:${router}`;
  return m.address ? `${peerScheme}:${m.address}` : null;
}

/** One controllers row per member (a single node lists itself). */
export function controllerRows(svc: Services): Row[] {
  const now = svc.nowIso();
  const cluster = svc.cluster;
  if (cluster === null) {
    return [
      {
        id: svc.config.instanceId,
        name: svc.config.instanceId,
        createdAt: now,
        updatedAt: now,
        tags: {},
        ctrlAddress: svc.config.routerAddress ? `tls:${svc.config.routerAddress}` : null,
        apiAddresses: apiAddresses(svc.config.apiBaseUrls),
        ...certInfo(null),
        isOnline: true,
        lastJoinedAt: now,
      },
    ];
  }
  const scheme = cluster.peerCertPem ? 'tls' : 'tcp';
  return cluster.memberView().map((m: MemberView) => {
    // one never seen online: dated when this node first listed it (stable across requests), not by each request
    const at = m.lastJoinedAt ?? m.listedAt;
    return {
      id: m.id,
      name: m.id,
      createdAt: at,
      updatedAt: at,
      tags: {},
      ctrlAddress: ctrlAddressOf(m, scheme),
      apiAddresses: apiAddresses(m.status?.apiAddresses ?? []),
      // this node's own certificate, or the one the member showed on this node's peer link (empty until reached)
      ...certInfo(cluster.memberCert(m.id)),
      isOnline: m.online,
      lastJoinedAt: at,
    };
  });
}

/** The API bindings a client sees of each controller (OpenZiti's MapControllerToClientRestModel). */
const CLIENT_BINDINGS: ReadonlySet<string> = new Set(['edge-client', 'edge-oidc']);

/**
 * A controllers row as the client API shows it, as OpenZiti's does: without the member's peer (control) address and
 * without any API binding but the client's, so a client learns no cluster-internal or management endpoint (through
 * the rendering or through a filter on `ctrlAddress`).
 */
function clientView(r: Row): Row {
  const addresses = r.apiAddresses as Record<string, unknown>;
  const kept = Object.entries(addresses).filter(([binding]) => CLIENT_BINDINGS.has(binding));
  return { ...r, ctrlAddress: null, apiAddresses: Object.fromEntries(kept) };
}

function renderController(r: Row): string {
  return JSON.stringify({
    _links: { self: { href: `./controllers/${r.id}` } },
    apiAddresses: r.apiAddresses,
    certPem: r.certPem,
    createdAt: r.createdAt,
    ctrlAddress: r.ctrlAddress,
    fingerprint: r.fingerprint,
    id: r.id,
    isOnline: r.isOnline,
    lastJoinedAt: r.lastJoinedAt,
    name: r.name,
    tags: r.tags,
    updatedAt: r.updatedAt,
  });
}

export function controllerOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'GET',
      path: '/controllers',
      apis: ['client', 'management'] as ApiName[],
      operationId: 'listControllers',
      tags: ['Controllers'],
      summary: 'Retrieves a list of controllers',
      access: 'authenticated',
      query: LIST_QUERY,
      responses: {
        200: {
          description: 'A list of controllers',
          schema: listEnvelope('listControllersEnvelope', controllerDetail),
        },
      },
      handler: (ctx) => {
        const c = new Collection(CONTROLLER_DEF);
        const rows = controllerRows(ctx.svc).map((r) => (ctx.api === 'client' ? clientView(r) : r));
        c.load(rows.sort((a, b) => (a.id < b.id ? -1 : 1)));
        const table = controllerSymbols();
        return mapResult(runList(ctx.req, table, collectionSource(c)), (r) => listResponse(r, renderController, table));
      },
    }),
  ];
}

/** This node's cluster, or OpenZiti's answer on a controller that is not clustered (NotRunningInHAModeError). */
function clusterOf(svc: Services): ClusterView {
  if (svc.cluster === null) throw Errors.SERVER_NOT_RUNNING_IN_HA_MODE();
  return svc.cluster;
}

/** Raft refusals a membership operation answers with 503 CLUSTER_NO_LEADER and Retry-After. */
const RETRY_LATER: ReadonlySet<RaftError['code']> = new Set<RaftError['code']>([
  'not-leader',
  'stopped',
  'leadership-lost',
]);

/** Errors that are this code's own failures, never the request's: answered 500 (and logged) by the HTTP layer. */
function isInternal(err: unknown): boolean {
  if (err instanceof RaftError) return err.code === 'fatal';
  return (
    !(err instanceof Error) ||
    err instanceof TypeError ||
    err instanceof RangeError ||
    err instanceof ReferenceError ||
    err instanceof SyntaxError
  );
}

/** Which membership change failed, and the value the request named (OpenZiti's field errors name it). */
type Change = { kind: 'add'; address: string } | { kind: 'remove'; id: string } | { kind: 'transfer'; id: string };

/**
 * The HTTP face of a failed membership change, as OpenZiti's cluster router answers: an add's failure is a 400 on
 * `address`, a removal's on `id`, a transfer's 500 `TRANSFER_LEADERSHIP_ERROR` with the reason as its cause. Keel
 * adds: no leader (or a leadership lost meanwhile) is 503 `CLUSTER_NO_LEADER` and a full proposal queue 429, both
 * with Retry-After (asking again is safe: an add finishes what it started); its own failures are not the
 * request's, so they are thrown on to the HTTP layer's 500.
 */
function membershipError(err: unknown, change: Change): unknown {
  if (err instanceof RaftError && RETRY_LATER.has(err.code)) {
    return Errors.CLUSTER_NO_LEADER(undefined, { headers: { 'retry-after': '2' } });
  }
  if (err instanceof RaftError && err.code === 'too-many-pending') {
    return Errors.SERVER_TOO_MANY_REQUESTS(undefined, { headers: { 'retry-after': '2' } });
  }
  if (isInternal(err)) return err;
  const reason = (err as Error).message;
  switch (change.kind) {
    case 'add':
      return fieldError('address', `unable to add cluster member for supplied address: [${reason}]`, change.address);
    case 'remove':
      return fieldError('id', `unable to remove cluster member node for supplied node id: [${reason}]`, change.id);
    case 'transfer':
      // not done within its bound (the target still catching up, say): asking again may succeed
      return Errors.TRANSFER_LEADERSHIP_ERROR(
        { code: 'UNHANDLED', message: reason },
        err instanceof RaftError && err.code === 'timeout' ? { headers: { 'retry-after': '2' } } : {},
      );
  }
}

async function membership(change: Change, fn: () => Promise<unknown>) {
  try {
    await fn();
  } catch (err) {
    throw membershipError(err, change);
  }
  return okEmpty();
}

const member = s.named(
  'clusterMemberListItem',
  s.obj({
    id: s.str(),
    address: s.str(),
    voter: s.bool(),
    leader: s.bool(),
    version: s.str(),
    connected: s.bool(),
    readOnly: s.bool(),
  }),
);

/** OpenZiti's fabric cluster endpoints, served under FABRIC_BASE (not part of the edge OpenAPI documents). */
export function fabricClusterOps(): OpDef<unknown>[] {
  const base = { apis: [] as ApiName[], tags: ['Cluster'], access: 'admin' as const };
  return [
    op({
      ...base,
      method: 'GET',
      path: '/cluster/list-members',
      operationId: 'clusterListMembers',
      summary: 'Lists the cluster members',
      responses: { 200: { description: 'The members', schema: listEnvelope('clusterMemberListResponse', member) } },
      handler: ({ svc }) => {
        const cluster = clusterOf(svc);
        return ok(
          cluster.memberView().map((m) => {
            // a member refused for its peer protocol: the release it reported then (its last status is older)
            const refusal = cluster.peerRefusal(m.id);
            return {
              id: m.id,
              address: m.address,
              voter: m.voter,
              leader: m.leader,
              // a member this node never reached: its release is not known (never this node's own, guessed)
              version:
                refusal !== null
                  ? (refusal.release ?? 'unknown')
                  : (m.status?.version ?? (m.id === cluster.id ? KEEL_VERSION : 'unknown')),
              connected: m.online,
              readOnly: m.status?.readOnly ?? false,
            };
          }),
        );
      },
    }),
    op({
      ...base,
      method: 'POST',
      path: '/cluster/add-member',
      operationId: 'clusterMemberAdd',
      summary: 'Adds the node at `address` (a learner, a voter once caught up when isVoter)',
      body: s.named(
        'clusterMemberAdd',
        s.obj({ address: s.str({ minLength: 1, maxLength: 300 }), isVoter: s.bool() }, ['address']),
      ),
      bodyName: 'memberInfo',
      responses: { 200: { description: 'Added', schema: empty } },
      handler: ({ svc, body }) => {
        const cluster = clusterOf(svc);
        const address = stripScheme(body.address);
        if (!isPeerAddress(address)) {
          throw fieldError('address', 'must be a peer address, [tls:]HOST:PORT', body.address);
        }
        return membership({ kind: 'add', address }, () => cluster.addMemberAt(address, body.isVoter !== false));
      },
    }),
    op({
      ...base,
      method: 'POST',
      path: '/cluster/remove-member',
      operationId: 'clusterMemberRemove',
      summary: 'Removes a member',
      body: s.named('clusterMemberRemove', s.obj({ id: s.str({ minLength: 1, maxLength: 128 }) }, ['id'])),
      bodyName: 'memberInfo',
      responses: { 200: { description: 'Removed', schema: empty } },
      handler: ({ svc, body }) => {
        const cluster = clusterOf(svc);
        if (!cluster.memberView().some((m) => m.id === body.id)) {
          throw fieldError('id', `no cluster member with id ${body.id}`, body.id);
        }
        return membership({ kind: 'remove', id: body.id }, () => cluster.removeMember(body.id));
      },
    }),
    op({
      ...base,
      method: 'POST',
      path: '/cluster/transfer-leadership',
      operationId: 'clusterTransferLeadership',
      summary: 'Hands leadership to another voter',
      body: s.named(
        'clusterTransferLeadership',
        s.obj({ newLeaderId: s.str({ minLength: 1, maxLength: 128 }) }, ['newLeaderId']),
      ),
      bodyName: 'transferLeadership',
      responses: { 200: { description: 'Transferred', schema: empty } },
      handler: ({ svc, body }) => {
        const cluster = clusterOf(svc);
        if (!cluster.memberView().some((m) => m.id === body.newLeaderId && m.voter)) {
          throw fieldError('newLeaderId', `no voting member with id ${body.newLeaderId}`, body.newLeaderId);
        }
        return membership({ kind: 'transfer', id: body.newLeaderId }, () =>
          cluster.transferLeadership(body.newLeaderId),
        );
      },
    }),
  ];
}

/** OpenZiti addresses carry a scheme (`tls:host:port`); the peer API takes `host:port`. */
function stripScheme(address: string): string {
  return address.replace(/^(tls|tcp|ws|wss):(\/\/)?/i, '');
}
