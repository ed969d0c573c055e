import { ApiError, type ApiErrorCause, Errors, fieldError } from '../../http/errors.js';
import type { StoreError } from '../../storage/types.js';
import type { QueryError } from '../../storage/zitiql/index.js';
import type { FieldError } from '../schema/validate.js';

export { ApiError, Errors, fieldError };

/** A request-schema failure: 400 COULD_NOT_VALIDATE with `cause.field` naming the field. */
export function validationError(e: FieldError): ApiError {
  return Errors.COULD_NOT_VALIDATE({ field: e.field, reason: e.reason, value: e.value });
}

/**
 * Conflicts a field declaration maps to an API code (`FieldDef.conflictCode`), and preconditions that stand for a
 * handler's check (`Expect.apiCode`), with OpenZiti's envelope for each: the store's reason names internal index
 * keys (`methodKey`, `<id>:updb`) or fields, so it never reaches the wire.
 */
type ConflictCause = (e: StoreError) => ApiErrorCause | undefined;
const CONFLICT_CAUSES: ReadonlyMap<string, ConflictCause> = new Map<string, ConflictCause>([
  // apierror.NewAuthenticatorMethodMax() / NewCertInUse(): no cause
  ['MAX_AUTHENTICATOR_METHODS_REACHED', () => undefined],
  ['CERT_IN_USE', () => undefined],
  // apierror.NewMfaExistsError(): an identity has one MFA enrolment
  ['MFA_EXISTS', () => undefined],
  // a CA that stopped allowing an enrollment after the handler's check (a precondition): no cause, as that check
  ['ENROLLMENT_CA_NOT_VALID', () => undefined],
  ['ENROLLMENT_NO_VALID_CAS', () => undefined],
  // an enrollment token replaced after the handler's lookup: no cause (its value would be the token)
  ['INVALID_ENROLLMENT_TOKEN', () => undefined],
  // the enrollment's method is the part of its method key after the identity id
  [
    'ENROLLMENT_EXISTS',
    (e: StoreError) => ({
      field: 'method',
      reason: 'enrollment of same method exists',
      value: String(e.value ?? '').slice(String(e.value ?? '').lastIndexOf(':') + 1),
    }),
  ],
]);

/**
 * Unique fields whose duplicates are reported with OpenZiti's boltz field error ("duplicate value 'x' in unique
 * index on <store> store"). Any other unique field (tokens, internal keys) colliding is an internal fault: no
 * detail (a token value is a secret) reaches the client.
 */
const PUBLIC_UNIQUE_FIELDS: ReadonlySet<string> = new Set(['name', 'username', 'externalId', 'fingerprint', 'kid']);

/** The errors that answer a recorded store failure (storeError): a write refused by the state it met. */
const recordedFailures = new WeakSet<ApiError>();

/** Whether `err` answers a recorded store failure (a write refused by the state it met), not a handler's check. */
export function isRecordedFailure(err: unknown): boolean {
  return err instanceof ApiError && recordedFailures.has(err);
}

/** The HTTP face of a recorded store failure (the same mapping OpenZiti's routes apply to boltz errors). */
export function storeError(e: StoreError): ApiError {
  const err = storeErrorOf(e);
  recordedFailures.add(err);
  return err;
}

function storeErrorOf(e: StoreError): ApiError {
  // A precondition answers like the handler's own check would have (about the caller's rights: 401).
  if (e.code === 'PRECONDITION' && e.apiCode === 'UNAUTHORIZED') return unauthorized('forbidden');
  if (e.apiCode !== undefined) {
    const factory = Object.hasOwn(Errors, e.apiCode) ? Errors[e.apiCode as keyof typeof Errors] : undefined;
    // an unknown API code is a declaration bug: answer without detail
    if (factory === undefined) return Errors.UNHANDLED();
    // a unique-index conflict names internal keys in its reason (a precondition standing for such a conflict, its
    // internal field): only the envelope chosen for it goes out
    const cause = CONFLICT_CAUSES.get(e.apiCode);
    if (e.code === 'UNIQUE' || (e.code === 'PRECONDITION' && cause !== undefined)) {
      return cause === undefined ? Errors.UNHANDLED() : factory(cause(e));
    }
    // a code a command chose on purpose (a custom command's refusal, a precondition): a cause only on a field of
    // the request (a precondition's own field is the store's, never reported)
    if (e.field === undefined) return factory();
    return factory({ field: e.field, reason: e.reason, value: e.value });
  }
  switch (e.code) {
    case 'NOT_FOUND':
      return Errors.NOT_FOUND({ code: 'UNHANDLED', message: e.reason });
    case 'UNIQUE':
      if (!PUBLIC_UNIQUE_FIELDS.has(e.field ?? '')) return Errors.UNHANDLED();
      return fieldError(e.field ?? '', e.reason, e.value);
    case 'INVALID':
      return fieldError(e.field ?? '', e.reason, e.value);
    case 'REF_NOT_FOUND':
      return fieldError(e.field ?? '', e.reason, e.value);
    case 'ALREADY_EXISTS':
      return fieldError('id', e.reason, e.id);
    case 'REFERENCED':
      return Errors.CAN_NOT_DELETE_REFERENCED_ENTITY({ field: 'id', reason: e.reason, value: e.id });
    case 'SYSTEM_UPDATE':
      return Errors.ENTITY_CAN_NOT_BE_UPDATED({ code: 'UNHANDLED', message: e.reason });
    case 'SYSTEM_DELETE':
      return Errors.ENTITY_CAN_NOT_BE_DELETED({ code: 'UNHANDLED', message: e.reason });
    case 'PRECONDITION':
      return fieldError(e.field ?? '', e.reason, e.value);
    case 'CONFLICT':
      return Errors.COULD_NOT_VALIDATE({ field: e.field ?? '', reason: e.reason, value: e.value });
    case 'REJECTED':
      // an internal invariant: the details go to the log, not to the client
      return Errors.UNHANDLED();
    case 'UNSTORABLE':
      // the store's backstop: a value that would not read back as written (the value is not echoed)
      return Errors.COULD_NOT_VALIDATE({ field: e.field ?? '', reason: e.reason });
  }
}

/**
 * 503 `STORE_FAILED`: the store failed a disk write and refuses writes until the controller restarts. OpenZiti
 * has no code for this (its 503s are `TIMEOUT` and `CLUSTER_NO_LEADER`, neither of which is true here), so Keel
 * adds one, in OpenZiti's envelope; clients that treat any 503 as "try again later" do the right thing.
 */
export function storeFailed(): ApiError {
  return new ApiError(
    'STORE_FAILED',
    503,
    'The data store failed a write and refuses writes until the controller restarts. Try again later',
  );
}

/**
 * 503 `CLUSTER_UPGRADE_INCOMPLETE`: the write needs a state-machine version some cluster member does not apply yet
 * (a rolling upgrade under way: docs/cluster.md). OpenZiti has no code for this; like STORE_FAILED it is Keel's, in
 * OpenZiti's envelope, with `Retry-After`: the same write succeeds once every member runs the new release.
 */
export function clusterUpgrading(detail: string, headers: Record<string, string>): ApiError {
  return new ApiError(
    'CLUSTER_UPGRADE_INCOMPLETE',
    503,
    `This write needs every cluster member to run a newer release: ${detail}. Try again once the upgrade is complete`,
    { headers },
  );
}

export function queryError(e: QueryError): ApiError {
  const cause = { field: e.field ?? 'filter', reason: e.reason, value: e.value };
  switch (e.code) {
    case 'INVALID_FILTER':
      return Errors.INVALID_FILTER(cause);
    case 'INVALID_PAGINATION':
      return Errors.INVALID_PAGINATION(cause);
    case 'INVALID_SORT_IDENTIFIER':
      return Errors.INVALID_SORT_IDENTIFIER(cause);
  }
}

export function notFound(type: string, id: string): ApiError {
  return Errors.NOT_FOUND({ code: 'UNHANDLED', message: `${type} with id ${id} not found` });
}

const WWW_MISSING =
  'zt-session realm="zt-session" error="missing" error_description="no matching token was provided",' +
  'Bearer realm="openziti-oidc" error="missing" error_description="no matching token was provided"';
const WWW_INVALID = 'zt-session realm="zt-session" error="invalid" error_description="token is invalid"';

/**
 * 401 UNAUTHORIZED. A missing or invalid token carries OpenZiti's WWW-Authenticate challenge; a valid session
 * without the needed access does not (the token is good, the caller just may not do this).
 */
export function unauthorized(kind: 'missing' | 'invalid' | 'forbidden'): ApiError {
  if (kind === 'forbidden') return Errors.UNAUTHORIZED();
  const header = kind === 'missing' ? WWW_MISSING : WWW_INVALID;
  return Errors.UNAUTHORIZED(undefined, { headers: { 'www-authenticate': header } });
}
