import { dataEnvelope } from '../../http/errors.js';
import { requireRow } from '../api/entity.js';
import { fieldError } from '../api/errors.js';
import { type OpDef, op } from '../api/op.js';
import { ok } from '../api/respond.js';
import type { Services } from '../api/services.js';
import { serviceAccessOf } from '../model/access.js';
import { meta } from '../model/common.js';
import { identities } from '../model/identity.js';
import {
  cleanHex,
  evaluateAccess,
  type IdentityPosture,
  postureCacheOf,
  putProcess,
  type SessionState,
} from '../model/posture.js';
import { normalizeMac } from '../model/posture-check.js';
import {
  failedServiceRequest,
  MAX_BULK_RESPONSES,
  postureData,
  postureResponseCreate,
  postureResponseEnvelope,
} from '../model/posture-wire.js';
import type { RowFor } from '../model/rows.js';
import { s } from '../schema/s.js';

type ResponseBody = {
  id: string;
  typeId: string;
  build?: string;
  type?: string;
  version?: string;
  domain?: string;
  macAddresses?: string[];
  hash?: string;
  isRunning?: boolean;
  path?: string;
  signerFingerprints?: string[];
  unlocked?: boolean;
  woken?: boolean;
};

const RESPONSE_TYPES = ['OS', 'PROCESS', 'DOMAIN', 'MAC', 'ENDPOINT_STATE'] as const;

/** Where a report goes: the identity's device data, the API session's endpoint state. */
type Records = { identity: IdentityPosture; session: SessionState };

/** A response's fields as stored, or 400 naming the field (`prefix`: its place in a bulk body). */
function validate(r: ResponseBody, prefix: string): (data: Records, at: string) => void {
  const need = (field: keyof ResponseBody) => {
    if (r[field] === undefined) throw fieldError(`${prefix}${field}`, `${field} is required`, null);
  };
  switch (r.typeId) {
    case 'OS':
      need('type');
      need('version');
      return (d, at) => {
        d.identity.os = { postureCheckId: r.id, type: r.type!, version: r.version!, build: r.build ?? '', at };
      };
    case 'DOMAIN':
      need('domain');
      return (d, at) => {
        d.identity.domain = { postureCheckId: r.id, domain: r.domain!.trim().toLowerCase(), at };
      };
    case 'MAC': {
      need('macAddresses');
      const addresses = r.macAddresses!.map((m) => normalizeMac(m)).filter((m): m is string => m !== null);
      return (d, at) => {
        d.identity.mac = { postureCheckId: r.id, addresses: [...new Set(addresses)], at };
      };
    }
    case 'PROCESS':
      need('path');
      return (d, at) =>
        putProcess(d.identity, {
          postureCheckId: r.id,
          path: r.path!,
          isRunning: r.isRunning === true,
          hash: (r.hash ?? '').toLowerCase(),
          signerFingerprints: (r.signerFingerprints ?? []).map(cleanHex),
          at,
        });
    case 'ENDPOINT_STATE':
      return (d, at) => {
        const endpoint = { ...d.session.endpoint };
        if (r.woken === true) endpoint.wokenAt = at;
        if (r.unlocked === true) endpoint.unlockedAt = at;
        d.session.endpoint = endpoint;
      };
    default:
      throw fieldError(`${prefix}typeId`, `must be one of ${RESPONSE_TYPES.join(', ')}`, r.typeId);
  }
}

type Caller = { session: RowFor<'api-sessions'>; identity: RowFor<'identities'> };

/**
 * Validates every response first, then records them all (a bad entry records none). Answers OpenZiti's `services`:
 * those whose timers the responses altered — a reported wake / unlock starts the grace period of the MFA checks
 * that prompt on it (one entry per service, its first such check).
 */
function record(svc: Services, caller: Caller, responses: ResponseBody[], bulk: boolean): { services: unknown[] } {
  const apply = responses.map((r, i) => validate(r, bulk ? `${i}.` : ''));
  const at = svc.nowIso();
  const data = postureCacheOf(svc).forWrite(caller.session.id, caller.identity.id, at);
  for (const f of apply) f(data, at);
  const states = responses.filter((r) => r.typeId === 'ENDPOINT_STATE');
  const woken = states.some((r) => r.woken === true);
  const unlocked = states.some((r) => r.unlocked === true);
  if (!woken && !unlocked) return { services: [] };
  const services: unknown[] = [];
  for (const [serviceId, access] of serviceAccessOf(svc, caller.identity.id)) {
    const checks = evaluateAccess(svc, access, caller.session).flatMap((p) => p.checks);
    const hit = checks.find(
      ({ check }) =>
        check.typeId === 'MFA' &&
        ((woken && check.promptOnWake === true) || (unlocked && check.promptOnUnlock === true)),
    );
    if (!hit) continue;
    services.push({
      id: serviceId,
      name: svc.get('services', serviceId)?.name ?? '',
      postureQueryType: 'MFA',
      timeout: hit.result.timeout_s,
      timeoutRemaining: hit.result.timeoutRemaining_s,
    });
  }
  return { services };
}

const ZERO_TIME = '0001-01-01T00:00:00.000Z';

/** OpenZiti's `postureData` of an identity: its device's latest reports, and each API session's MFA state. */
function postureDataOf(svc: Services, identityId: string): Record<string, unknown> {
  const device = postureCacheOf(svc).identities.get(identityId);
  const base = (x: { postureCheckId: string; at: string } | undefined) => ({
    postureCheckId: x?.postureCheckId ?? '',
    timedOut: false,
    lastUpdatedAt: x?.at ?? ZERO_TIME,
  });
  const os = device?.os;
  const domain = device?.domain;
  const mac = device?.mac;
  const processes = [...(device?.processes.values() ?? [])].map((p) => ({
    ...base(p),
    binaryHash: p.hash,
    isRunning: p.isRunning,
    signerFingerprints: p.signerFingerprints,
  }));
  const perSession: Record<string, unknown> = {};
  for (const id of svc.store.lookup('api-sessions', 'identityId', identityId)) {
    const row = svc.get('api-sessions', id);
    if (!row) continue;
    const endpoint = postureCacheOf(svc).sessions.get(id)?.endpoint;
    perSession[id] = {
      mfa: {
        apiSessionId: id,
        passedMfa: row.isMfaComplete === true,
        passedAt: row.mfaCompletedAt ?? ZERO_TIME,
        passedOnWake: false,
        passedOnUnlock: false,
      },
      endpointState: { wokenAt: endpoint?.wokenAt ?? ZERO_TIME, unlockedAt: endpoint?.unlockedAt ?? ZERO_TIME },
    };
  }
  return {
    os: { ...base(os), type: os?.type ?? '', version: os?.version ?? '', build: os?.build ?? '' },
    domain: { ...base(domain), domain: domain?.domain ?? '' },
    mac: { ...base(mac), addresses: mac?.addresses ?? [] },
    processes,
    apiSessionPostureData: perSession,
  };
}

/** Posture responses (client) and an identity's posture data and failed service requests (management). */
export function postureOps(): OpDef<unknown>[] {
  const client = {
    apis: ['client'] as const,
    tags: ['Posture Checks'],
    access: 'authenticated' as const,
    bodyName: 'postureResponse',
  };
  const identityRead = {
    apis: ['management'] as const,
    tags: ['Identity'],
    access: 'admin' as const,
    permission: 'identity',
  };
  return [
    op<ResponseBody>({
      ...client,
      method: 'POST',
      path: '/posture-response',
      operationId: 'createPostureResponse',
      summary: 'Submit a posture response to a posture query',
      body: postureResponseCreate,
      responses: { 201: { description: 'Posture data recorded', schema: postureResponseEnvelope } },
      handler: (ctx) => {
        return dataEnvelope(record(ctx.svc, ctx.caller!, [ctx.body], false), {}, 201);
      },
    }),
    op<ResponseBody[]>({
      ...client,
      method: 'POST',
      path: '/posture-response-bulk',
      operationId: 'createPostureResponseBulk',
      summary: 'Submit multiple posture responses',
      body: s.arr(postureResponseCreate, { maxItems: MAX_BULK_RESPONSES }),
      responses: { 200: { description: 'Posture data recorded', schema: postureResponseEnvelope } },
      handler: (ctx) => {
        return ok(record(ctx.svc, ctx.caller!, ctx.body, true));
      },
    }),
    op({
      ...identityRead,
      method: 'GET',
      path: '/identities/{id}/posture-data',
      operationId: 'getIdentityPostureData',
      summary: 'Retrieve the curent posture data for a specific identity.',
      responses: {
        200: {
          description: 'Returns the document that represents posture data',
          schema: s.named('postureDataEnvelope', s.obj({ data: postureData, meta }, ['meta', 'data'])),
        },
      },
      handler: (ctx) => ok(postureDataOf(ctx.svc, requireRow(identities, ctx.svc, ctx.params.id!).id)),
    }),
    op({
      ...identityRead,
      method: 'GET',
      path: '/identities/{id}/failed-service-requests',
      operationId: 'getIdentityFailedServiceRequests',
      summary: 'Retrieve a list of the most recent service failure requests due to posture checks',
      responses: {
        200: {
          description: 'Returns a list of service request failures',
          schema: s.named(
            'failedServiceRequestEnvelope',
            s.obj({ data: s.named('failedServiceRequestList', s.arr(failedServiceRequest)), meta }, ['meta', 'data']),
          ),
        },
      },
      handler: (ctx) => {
        const id = requireRow(identities, ctx.svc, ctx.params.id!).id;
        return ok(postureCacheOf(ctx.svc).failed.get(id) ?? []);
      },
    }),
  ];
}
