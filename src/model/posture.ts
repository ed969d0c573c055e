/**
 * Posture data and its evaluation. What a client reports (`POST /posture-response[-bulk]`) is kept in this node's
 * memory, as OpenZiti's posture cache keeps it: per identity for what describes the device (OS, domain, MAC
 * addresses, processes: any of the identity's API sessions may report it, and every one of them is judged on the
 * latest report), per API session for its endpoint state (woken, unlocked). It is volatile, frequent and per
 * connection, so it is not replicated — a client re-reports after reconnecting, and reports to the node it talks to.
 * The MFA check reads the API session itself (stored, replicated): MFA complete, and completed within the check's
 * timeout.
 */
import type { RoleIndex } from '../../storage/role-index.js';
import type { Services } from '../api/services.js';
import type { ServiceAccess } from './access.js';
import { roleIndexName } from './policy.js';
import { type PostureCheckType, parseVersionRange } from './posture-check.js';
import type { RowFor } from './rows.js';

/** Identities whose device data one node keeps (the least recently reporting one is dropped beyond it). */
export const MAX_POSTURE_IDENTITIES = 100_000;
/** API sessions whose endpoint state one node keeps (the least recently reporting one is dropped beyond it). */
export const MAX_POSTURE_SESSIONS = 100_000;
/** Process reports kept per identity (the oldest is dropped beyond it). */
export const MAX_PROCESSES_PER_IDENTITY = 256;
/** Failed service requests kept per identity (the oldest dropped), and identities they are kept for. */
export const MAX_FAILED_REQUESTS_PER_IDENTITY = 100;
export const MAX_FAILED_REQUEST_IDENTITIES = 10_000;

export interface ProcessData {
  postureCheckId: string;
  path: string;
  isRunning: boolean;
  /** Lower-case hex. */
  hash: string;
  /** Lower-case hex digits only (OpenZiti's CleanHexString: `AB:CD` is `abcd`). */
  signerFingerprints: string[];
  at: string;
}

/** What an identity's device reported last (any of its API sessions). */
export interface IdentityPosture {
  os?: { postureCheckId: string; type: string; version: string; build: string; at: string };
  domain?: { postureCheckId: string; domain: string; at: string };
  mac?: { postureCheckId: string; addresses: string[]; at: string };
  /** By check id and path (`processKey`): a PROCESS check reads the report made for it, PROCESS_MULTI by path. */
  processes: Map<string, ProcessData>;
  lastAt: string;
}

/** What one API session reported of its endpoint. */
export interface SessionState {
  identityId: string;
  endpoint?: { wokenAt?: string; unlockedAt?: string };
  lastAt: string;
}

/** The data one API session's checks are judged on: its identity's device, its own endpoint state. */
export interface PostureView {
  identity?: IdentityPosture | undefined;
  session?: SessionState | undefined;
}

export interface FailedServiceRequest {
  apiSessionId: string;
  serviceId: string;
  serviceName: string;
  sessionType: string;
  when: string;
  policyFailures: {
    policyId: string;
    policyName: string;
    checks: { postureCheckId: string; postureCheckName: string; postureCheckType: string }[];
  }[];
}

/**
 * One node's posture data (device data per identity, endpoint state per API session) and failed service requests
 * (per identity), all bounded.
 */
export class PostureCache {
  readonly identities = new Map<string, IdentityPosture>();
  readonly sessions = new Map<string, SessionState>();
  readonly failed = new Map<string, FailedServiceRequest[]>();

  /** The records a report of API session `sessionId` writes, made (and moved to the most recent end) for it. */
  forWrite(sessionId: string, identityId: string, at: string): { identity: IdentityPosture; session: SessionState } {
    let identity = this.identities.get(identityId);
    if (identity) this.identities.delete(identityId);
    else identity = { processes: new Map(), lastAt: at };
    identity.lastAt = at;
    this.identities.set(identityId, identity);
    while (this.identities.size > MAX_POSTURE_IDENTITIES) this.identities.delete(this.identities.keys().next().value!);
    let session = this.sessions.get(sessionId);
    if (session) this.sessions.delete(sessionId);
    else session = { identityId, lastAt: at };
    session.lastAt = at;
    this.sessions.set(sessionId, session);
    while (this.sessions.size > MAX_POSTURE_SESSIONS) this.sessions.delete(this.sessions.keys().next().value!);
    return { identity, session };
  }

  /** What API session `sessionId` of identity `identityId` is judged on. */
  view(sessionId: string, identityId: string): PostureView {
    return { identity: this.identities.get(identityId), session: this.sessions.get(sessionId) };
  }

  recordFailure(identityId: string, failure: FailedServiceRequest): void {
    const list = this.failed.get(identityId) ?? [];
    this.failed.delete(identityId);
    list.push(failure);
    if (list.length > MAX_FAILED_REQUESTS_PER_IDENTITY) list.splice(0, list.length - MAX_FAILED_REQUESTS_PER_IDENTITY);
    this.failed.set(identityId, list);
    while (this.failed.size > MAX_FAILED_REQUEST_IDENTITIES) this.failed.delete(this.failed.keys().next().value!);
  }
}

const caches = new WeakMap<Services, PostureCache>();

/** This node's posture cache. */
export function postureCacheOf(svc: Services): PostureCache {
  let cache = caches.get(svc);
  if (!cache) caches.set(svc, (cache = new PostureCache()));
  return cache;
}

/** Where a process report is kept: per check and path. */
function processKey(postureCheckId: string, path: string): string {
  return `${postureCheckId}\n${path}`;
}

/** Adds a process report (replacing the one for the same check and path), dropping the oldest beyond the bound. */
export function putProcess(data: IdentityPosture, p: ProcessData): void {
  const key = processKey(p.postureCheckId, p.path);
  data.processes.delete(key);
  data.processes.set(key, p);
  while (data.processes.size > MAX_PROCESSES_PER_IDENTITY) data.processes.delete(data.processes.keys().next().value!);
}

/** OpenZiti's CleanHexString: lower case, hex digits only (`AB:CD:12` is `abcd12`). */
export function cleanHex(s: string): string {
  return s.toLowerCase().replace(/[^0-9a-f]/g, '');
}

/** A version as Go's semver.Make reads it (major.minor.patch, optional pre-release and build), or null. */
const SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$/;

function versionParts(v: string): number[] {
  return v
    .split(/[.\-+ ]/)
    .slice(0, 3)
    .map((p) => Number.parseInt(p, 10) || 0);
}

function compare(a: number[], b: number[]): number {
  for (let i = 0; i < 3; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * Whether `version` (e.g. `10.0.19041`) satisfies a range (`>=10.0.0 <11`, alternatives joined by `||`). A version
 * that is not major.minor.patch (`10.0`, `10`) satisfies none, as OpenZiti's semver.Make refuses it.
 */
export function versionSatisfies(version: string, range: string): boolean {
  if (!SEMVER.test(version)) return false;
  const parsed = parseVersionRange(range);
  if (parsed === null) return false;
  const v = versionParts(version);
  return parsed.some((alt) =>
    alt.every(({ op, version: want }) => {
      // a comparator naming fewer parts compares only those (`=10` matches 10.x.y)
      const d = compare(v.slice(0, want.length), want);
      switch (op) {
        case '>=':
          return d >= 0;
        case '<=':
          return d <= 0;
        case '>':
          return d > 0;
        case '<':
          return d < 0;
        case '!=':
          return d !== 0;
        default:
          return d === 0;
      }
    }),
  );
}

interface ProcessCriteria {
  path: string;
  hashes?: string[];
  signerFingerprint?: string;
  signerFingerprints?: string[];
}

/**
 * Whether a process report satisfies `want`: running, one of its hashes (if any; case folded) and one of its signer
 * fingerprints (if any; as CleanHexString reads them). A PROCESS check reads the report made for it (`checkId`), as
 * OpenZiti matches it; PROCESS_MULTI the latest report of the path.
 */
function processPasses(data: IdentityPosture | undefined, want: ProcessCriteria, checkId: string | null): boolean {
  let got: ProcessData | undefined;
  for (const p of data?.processes.values() ?? []) {
    if (checkId === null ? p.path === want.path : p.postureCheckId === checkId) got = p; // the latest wins
  }
  if (!got?.isRunning) return false;
  if (want.hashes && want.hashes.length > 0 && !want.hashes.some((h) => h.toLowerCase() === got.hash)) return false;
  const signers = [...(want.signerFingerprints ?? []), ...(want.signerFingerprint ? [want.signerFingerprint] : [])];
  return signers.length === 0 || signers.some((f) => got.signerFingerprints.includes(cleanHex(f)));
}

export interface CheckResult {
  isPassing: boolean;
  /** -1: the check has no timeout. */
  timeout_s: number;
  timeoutRemaining_s: number;
}

/** One posture check against one API session's data at `now_ms`. */
export function evaluateCheck(
  check: RowFor<'posture-checks'>,
  session: RowFor<'api-sessions'>,
  data: PostureView | undefined,
  now_ms: number,
): CheckResult {
  const noTimeout = (isPassing: boolean): CheckResult => ({ isPassing, timeout_s: -1, timeoutRemaining_s: -1 });
  const device = data?.identity;
  switch (check.typeId as PostureCheckType) {
    case 'OS': {
      const os = device?.os;
      if (!os) return noTimeout(false);
      // an OS type listed more than once: its last entry counts (OpenZiti's getValidOses)
      const type = os.type.toLowerCase();
      const entries = (check.operatingSystems as { type: string; versions: string[] }[] | undefined) ?? [];
      const wanted = entries.findLast((o) => o.type.toLowerCase() === type);
      if (wanted === undefined) return noTimeout(false);
      return noTimeout(wanted.versions.length === 0 || wanted.versions.some((r) => versionSatisfies(os.version, r)));
    }
    case 'PROCESS':
      return noTimeout(processPasses(device, check.process as ProcessCriteria, check.id));
    case 'PROCESS_MULTI': {
      const list = check.processes ?? [];
      const each = list.map((p) => processPasses(device, p, null));
      return noTimeout(check.semantic === 'AnyOf' ? each.some(Boolean) : each.length > 0 && each.every(Boolean));
    }
    case 'DOMAIN':
      return noTimeout(device?.domain !== undefined && (check.domains ?? []).includes(device.domain.domain));
    case 'MAC': {
      const wanted = check.macAddresses ?? [];
      return noTimeout((device?.mac?.addresses ?? []).some((m) => wanted.includes(m)));
    }
    case 'MFA':
      return evaluateMfa(check, session, data, now_ms);
    default:
      return noTimeout(false);
  }
}

/** After a reported wake / unlock, an MFA check with `promptOnWake` / `promptOnUnlock` passes this much longer. */
export const MFA_PROMPT_GRACE_S = 300;

/**
 * MFA: the API session completed MFA, within `timeoutSeconds` (-1: no timeout). With `promptOnWake` /
 * `promptOnUnlock`, a wake / unlock reported after the MFA leaves a grace period (OpenZiti's 5 minutes) to pass MFA
 * again; `timeoutRemaining` is the nearer of the two ends.
 */
function evaluateMfa(
  check: RowFor<'posture-checks'>,
  session: RowFor<'api-sessions'>,
  data: PostureView | undefined,
  now_ms: number,
): CheckResult {
  const timeout_s = check.timeoutSeconds ?? -1;
  const passedAt = session.mfaCompletedAt;
  if (session.isMfaComplete !== true || !passedAt) return { isPassing: false, timeout_s, timeoutRemaining_s: 0 };
  const passed_ms = Date.parse(passedAt);
  const ends_ms: number[] = [];
  if (timeout_s >= 0) ends_ms.push(passed_ms + timeout_s * 1000);
  const prompt = (enabled: unknown, at: string | undefined) => {
    if (enabled === true && at !== undefined && Date.parse(at) > passed_ms) {
      ends_ms.push(Date.parse(at) + MFA_PROMPT_GRACE_S * 1000);
    }
  };
  prompt(check.promptOnWake, data?.session?.endpoint?.wokenAt);
  prompt(check.promptOnUnlock, data?.session?.endpoint?.unlockedAt);
  if (ends_ms.length === 0) return { isPassing: true, timeout_s, timeoutRemaining_s: -1 };
  const remaining_s = Math.max(0, Math.floor((Math.min(...ends_ms) - now_ms) / 1000));
  return { isPassing: remaining_s > 0, timeout_s, timeoutRemaining_s: remaining_s };
}

const SP_CHECKS = roleIndexName('service-policies', 'postureCheckRoles');

/** The posture checks a service policy requires (its `postureCheckRoles`, through the role index). */
export function policyChecks(svc: Services, policyId: string): RowFor<'posture-checks'>[] {
  const index = svc.store.derived.get<RoleIndex>(SP_CHECKS);
  return [...index.targetsOf(policyId)]
    .sort()
    .map((id) => svc.get('posture-checks', id))
    .filter((r) => r !== undefined);
}

export interface PolicyPosture {
  policyId: string;
  policyType: 'Dial' | 'Bind';
  isPassing: boolean;
  checks: { check: RowFor<'posture-checks'>; result: CheckResult }[];
}

/** Every granting policy of a service access with its checks evaluated for the caller's API session. */
export function evaluateAccess(svc: Services, access: ServiceAccess, session: RowFor<'api-sessions'>): PolicyPosture[] {
  const data = postureCacheOf(svc).view(session.id, session.identityId as string);
  const now_ms = svc.clock.now();
  const one = (policyId: string, policyType: 'Dial' | 'Bind'): PolicyPosture => {
    const checks = policyChecks(svc, policyId).map((check) => ({
      check,
      result: evaluateCheck(check, session, data, now_ms),
    }));
    return { policyId, policyType, isPassing: checks.every((c) => c.result.isPassing), checks };
  };
  return [...access.dial.map((id) => one(id, 'Dial')), ...access.bind.map((id) => one(id, 'Bind'))];
}

/** A posture query as the client's service view shows it (OpenZiti's `postureQuery`). */
export function renderQuery(check: RowFor<'posture-checks'>, result: CheckResult): Record<string, unknown> {
  const type = check.typeId as PostureCheckType;
  const out: Record<string, unknown> = {
    _links: { self: { href: `./posture-checks/${check.id}` } },
    createdAt: check.createdAt,
    id: check.id,
    tags: check.tags ?? {},
    updatedAt: check.updatedAt,
    queryType: type,
    isPassing: result.isPassing,
    timeout: result.timeout_s,
    timeoutRemaining: result.timeoutRemaining_s,
  };
  if (type === 'PROCESS') {
    const p = check.process as { osType: string; path: string };
    out.process = { osType: p.osType, path: p.path };
  }
  if (type === 'PROCESS_MULTI') {
    out.processes = ((check.processes as { osType: string; path: string }[]) ?? []).map((p) => ({
      osType: p.osType,
      path: p.path,
    }));
  }
  if (type === 'MFA') {
    out.promptOnWake = check.promptOnWake === true;
    out.promptOnUnlock = check.promptOnUnlock === true;
  }
  return out;
}
