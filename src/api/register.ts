import { contentTypeError, JSON_MEDIA_TYPE } from '../../http/content-type.js';
import type { Router } from '../../http/router.js';
import type { HttpRequest, HttpResponse } from '../../http/types.js';
import { isDisabled } from '../model/identity.js';
import { nilArraysAsEmpty, validate, withoutPatchNulls } from '../schema/validate.js';
import { Errors, isRecordedFailure, unauthorized, validationError } from './errors.js';
import { ACTION_OF_METHOD, type ApiName, type Caller, type OpDef } from './op.js';
import type { Services } from './services.js';

export const API_BASE: Record<ApiName, string> = {
  client: '/edge/client/v1',
  management: '/edge/management/v1',
};

export interface RouteMeta {
  op: OpDef<unknown>;
  api: ApiName;
}

/**
 * Management access (OpenZiti's DefaultManagementAccess): an admin, or an identity whose `permissions` hold
 * `admin_readonly` (reads), the entity permission (e.g. `identity`) or the entity-action one (`identity.read`). The
 * action is the operation's `permissionAction`, else its method's.
 */
export function hasAdminAccess(identity: Caller['identity'], op: OpDef<unknown>): boolean {
  if (identity.isAdmin === true) return true;
  if (!op.permission) return false;
  const perms = identity.permissions ?? [];
  if (perms.length === 0) return false;
  const action = op.permissionAction ?? ACTION_OF_METHOD[op.method];
  if (action === 'read' && perms.includes('admin_readonly')) return true;
  return perms.includes(op.permission) || perms.includes(`${op.permission}.${action}`);
}

/** Go's `time.Time.String()` in UTC (the format OpenZiti uses in the `expires-at` header). */
let lastTimeMs = Number.NaN;
let lastTimeText = '';
export function goTimeString(ms: number): string {
  // requests in the same millisecond share the text (a busy node formats it once per ms)
  if (ms === lastTimeMs) return lastTimeText;
  lastTimeMs = ms;
  lastTimeText = formatGoTime(ms);
  return lastTimeText;
}

function formatGoTime(ms: number): string {
  const iso = new Date(ms).toISOString(); // 2026-11-26T00:13:36.120Z
  let frac = iso.slice(19, 23); // .120
  frac = frac === '.000' ? '' : frac.replace(/0+$/, '');
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}${frac} +0000 UTC`;
}

/**
 * The `zt-session` token: the first value when the header came several times (the engines join repeated lines with
 * ", "; Go's `Header.Get`, which OpenZiti reads it with, takes the first). A token holds no comma.
 */
function sessionToken(req: HttpRequest): string | undefined {
  const raw = req.headers['zt-session'];
  if (raw === undefined) return undefined;
  const comma = raw.indexOf(',');
  return (comma === -1 ? raw : raw.slice(0, comma)).trim();
}

function authenticate(op: OpDef<unknown>, req: HttpRequest, svc: Services, confirmed = false): Caller | null {
  const token = sessionToken(req);
  if (op.access === 'none') {
    // Unauthenticated operations still see a valid session when one is sent (e.g. for response headers).
    return token ? svc.sessions.resolve(token) : null;
  }
  if (!token) throw unauthorized('missing');
  const caller = svc.sessions.resolve(token);
  if (!caller) {
    if (!confirmed && svc.cluster !== null && svc.sessions.isUnknown(token)) throw new UnknownTokenError();
    throw unauthorized('invalid');
  }
  // a disable ends the identity's sessions in apply; this also covers a login that raced with it
  if (caller.identity.disabledAt && isDisabled(caller.identity, svc.clock.now())) throw unauthorized('invalid');
  const partial =
    (caller.session.isMfaRequired === true && caller.session.isMfaComplete !== true) ||
    typeof caller.session.extJwtPending === 'string';
  if (partial && op.access !== 'partial') throw unauthorized('forbidden');
  if (op.access === 'admin' && !hasAdminAccess(caller.identity, op)) throw unauthorized('forbidden');
  return caller;
}

/** Media types an operation accepts when it declares none (OpenZiti's specs consume `application/json`). */
const JSON_ONLY: readonly string[] = Object.freeze([JSON_MEDIA_TYPE]);

function readBody(op: OpDef<unknown>, req: HttpRequest): unknown {
  // every operation refuses a body of another media type, as go-openapi does (a browser cannot send a
  // cross-origin `application/json` request without a preflight)
  const typeError = contentTypeError(req, op.consumes ?? JSON_ONLY);
  if (typeError !== null) throw typeError;
  if (!op.body) return undefined;
  const body = req.json();
  const name = op.bodyName ?? 'body';
  if (body === undefined) {
    if (op.bodyRequired === false) return undefined;
    throw validationError({ field: name, reason: `${name} in body is required`, value: null });
  }
  // JSON `null` decodes in go-openapi into the zero value of the body's struct, which is then validated: an object
  // body's first required field is named, and a body whose fields are all optional is an empty one (`{}`)
  if (body === null && validate(op.body, {}) === null) return withoutIgnored(op, {});
  // an array body's zero value is a nil slice: an optional one is as if absent, a required one is missing
  if (body === null && op.body.kind === 'array') {
    if (op.bodyRequired === false) return undefined;
    throw validationError({ field: name, reason: `${name} in body is required`, value: null });
  }
  // PATCH: a null leaves the field as it is (OpenZiti updates only the fields sent with a value); elsewhere a null
  // optional array is an empty one (go-openapi's nil slice)
  const given = withoutIgnored(op, body === null ? {} : body);
  const kept = op.method === 'PATCH' ? withoutPatchNulls(given) : nilArraysAsEmpty(op.body, given);
  const err = validate(op.body, kept);
  if (err) {
    // a body of the wrong type at its root (not a field that happens to be called `body`) is named by the body
    // parameter's name, as go-openapi names it
    const isObject = typeof kept === 'object' && kept !== null && !Array.isArray(kept);
    const atRoot = err.field === 'body' && !(isObject && Object.hasOwn(kept, 'body'));
    throw validationError(
      atRoot ? { ...err, field: name, reason: err.reason.replace(/^body in body /, `${name} in body `) } : err,
    );
  }
  return kept;
}

/** The body as the operation validates it: without the properties it ignores (OpDef.ignoredBodyFields). */
function withoutIgnored(op: OpDef<unknown>, body: unknown): unknown {
  if (op.ignoredBodyFields === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    return body;
  }
  const ignored = op.ignoredBodyFields(body as Record<string, unknown>);
  if (ignored.length === 0) return body;
  const kept: Record<string, unknown> = { ...(body as Record<string, unknown>) };
  for (const k of ignored) delete kept[k];
  return kept;
}

/**
 * Wraps an operation as an HTTP handler: authentication and access, body validation, session activity, session
 * headers. Synchronous when the operation is (most reads), so the engine answers without a promise or a timer.
 */
export function handlerFor(op: OpDef<unknown>, api: ApiName, svc: Services) {
  const endsSession = op.path === '/current-api-session' && op.method === 'DELETE';
  const finish = (caller: Caller | null, res: HttpResponse): HttpResponse => {
    if (!caller || endsSession) return res;
    return {
      ...res,
      headers: {
        ...res.headers,
        'expiration-seconds': String(svc.sessions.expirationSeconds(caller.session)),
        'expires-at': goTimeString(svc.sessions.expiresAtMs(caller.session)),
      },
    };
  };
  const run = (req: HttpRequest, caller: Caller | null): HttpResponse | Promise<HttpResponse> => {
    const body = readBody(op, req);
    if (caller) svc.sessions.touch(caller.session);
    const res = op.handler({ req, body, params: req.params, caller, svc, api });
    // only an asynchronous handler can meet a state in which its caller's session has ended
    if (res instanceof Promise) {
      return res.then(
        (r) => finish(caller, r),
        (err) => {
          throw endedMeanwhile(caller, err);
        },
      );
    }
    return finish(caller, res);
  };
  /**
   * A write of a caller whose session ended while the request was in flight (its identity deleted or disabled, a
   * logout) that failed on the state without it answers as that session now would — 401, OpenZiti's answer for a
   * session whose identity is gone — and never with the store's reason, which names internal fields
   * (`identityId`, `apiSessionId`). A handler's own refusal is left as it is.
   */
  const endedMeanwhile = (caller: Caller | null, err: unknown): unknown =>
    caller !== null && op.access !== 'none' && isRecordedFailure(err) && !svc.get('api-sessions', caller.session.id)
      ? unauthorized('invalid')
      : err;
  /** Runs `req` once this member has applied everything committed, the caller read as of then. */
  const afterCatchUp = (req: HttpRequest): Promise<HttpResponse> =>
    svc.sessions.catchUp().then(() => run(req, authenticate(op, req, svc, true)));
  return (req: HttpRequest): HttpResponse | Promise<HttpResponse> => {
    // Waited for before the caller is read, so the caller (and the session headers of the answer) are as of then.
    // Every such request pays it, failed and successful alike: its time says nothing about the credential.
    if (op.catchUpFirst === true && svc.cluster !== null) return afterCatchUp(req);
    let caller: Caller | null;
    try {
      caller = authenticate(op, req, svc);
    } catch (err) {
      // A cluster member may not have applied a session another member just created: a token it does not know is
      // confirmed after a read barrier (everything committed is then applied here) before it answers 401.
      if (!(err instanceof UnknownTokenError)) throw err;
      return afterCatchUp(req);
    }
    return run(req, caller);
  };
}

/** An unknown token on a cluster member, which must check it is not merely behind before answering 401. */
class UnknownTokenError extends Error {}

/** Mounts every operation on every API it belongs to. */
export function mountOps(router: Router<RouteMeta>, ops: OpDef<unknown>[], svc: Services): void {
  for (const op of ops) {
    for (const api of op.apis) router.add(op.method, API_BASE[api] + op.path, handlerFor(op, api, svc), { op, api });
  }
}

/**
 * OpenZiti's path rewriting (REFERENCE §1): `/` and `/version` → the client API's version; `/edge/v1` → the
 * client API; legacy paths without an API prefix → the client API. Keel's own endpoints are left alone.
 */
export function rewritePath(path: string): string {
  if (path === '/' || path === '' || path === '/version') return `${API_BASE.client}/version`;
  if (path === '/.well-known/est/cacerts') return `${API_BASE.client}/.well-known/est/cacerts`;
  if (path.startsWith('/edge/v1/') || path === '/edge/v1') return API_BASE.client + path.slice('/edge/v1'.length);
  if (path.startsWith('/edge/') || path.startsWith('/fabric/') || path.startsWith('/.well-known/')) return path;
  if (path === '/metrics' || path.startsWith('/health-checks') || path.startsWith('/keel/')) return path;
  return API_BASE.client + path;
}

export { Errors };
