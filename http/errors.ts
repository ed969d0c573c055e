// OpenZiti's API error model: codes with their fixed status and message, the cause shapes the
// controller's response mapper knows, and the exact wire envelopes
// (REFERENCE §3; openziti/ziti controller/response/responder.go `toRestModel`).
import type { HttpHeaders, HttpResponse } from './types.js';

/** `errorz.FieldError` → `{field, reason, value}` on the wire (value printed like Go's `%v`). */
export interface FieldErrorCause {
  field: string;
  reason: string;
  value?: unknown;
}

/** `GenericCauseError` → `{data, message}` on the wire (e.g. INVALID_UUID → `data: {uuid}`). */
export interface GenericCause {
  data: Record<string, unknown>;
  message: string;
}

/** Any other error → `{code: "UNHANDLED", message}` on the wire. */
export interface UnhandledCause {
  code?: string;
  message: string;
}

export type ApiErrorCause = ApiError | FieldErrorCause | GenericCause | UnhandledCause | Error;

export interface ApiErrorOptions {
  cause?: ApiErrorCause;
  /** Extra response headers, e.g. `www-authenticate` on a 401. */
  headers?: HttpHeaders;
  /** Free-form `error.data` object. */
  data?: Record<string, unknown>;
}

export class ApiError extends Error {
  readonly code: string;
  readonly status: number;
  override readonly cause?: ApiErrorCause;
  headers?: HttpHeaders;
  data?: Record<string, unknown>;

  constructor(code: string, status: number, message: string, options: ApiErrorOptions = {}) {
    super(message);
    if (typeof code !== 'string' || code.length === 0) throw new TypeError('ApiError: code must be a non-empty string');
    if (!Number.isInteger(status) || status < 400 || status > 599) {
      throw new RangeError(`ApiError: status must be an HTTP error status, got ${status}`);
    }
    this.name = 'ApiError';
    this.code = code;
    this.status = status;
    if (options.cause !== undefined) this.cause = options.cause;
    if (options.headers !== undefined) this.headers = options.headers;
    if (options.data !== undefined) this.data = options.data;
  }

  /** A copy with extra response headers (e.g. `www-authenticate`). */
  withHeaders(headers: HttpHeaders): ApiError {
    return new ApiError(this.code, this.status, this.message, {
      ...(this.cause !== undefined ? { cause: this.cause } : {}),
      ...(this.data !== undefined ? { data: this.data } : {}),
      headers: { ...this.headers, ...headers },
    });
  }
}

/** code → [HTTP status, message]: `openziti/foundation errorz/messages.go` + `openziti/ziti controller/apierror/messages.go`. */
export const ERROR_DEFINITIONS = {
  // generic (foundation errorz)
  NOT_FOUND: [404, 'The resource requested was not found or is no longer available'],
  UNHANDLED: [500, 'An unhandled error occurred'],
  INVALID_FIELD: [400, 'The field contains an invalid value'],
  ENTITY_CAN_NOT_BE_DELETED: [400, 'The entity requested for delete can not be deleted'],
  ENTITY_CAN_NOT_BE_UPDATED: [400, 'The entity requested for update can not be updated'],
  COULD_NOT_VALIDATE: [
    400,
    'The supplied request contains an invalid document or no valid accept content were available, see cause',
  ],
  UNAUTHORIZED: [
    401,
    'The request could not be completed. The session is not authorized or the credentials are invalid',
  ],
  INVALID_FILTER: [400, 'The filter query supplied is invalid'],
  INVALID_PAGINATION: [400, 'The pagination properties provided are invalid'],
  INVALID_SORT_IDENTIFIER: [400, 'The sort order supplied is invalid'],
  // controller-specific (ziti controller/apierror)
  METHOD_NOT_ALLOWED: [405, 'The resource requested does not support this HTTP verb'],
  COULD_NOT_PARSE_BODY: [400, 'The body of the request could not be parsed'],
  COULD_NOT_READ_BODY: [500, 'The body of the request could not be read'],
  REQUEST_ENTITY_TOO_LARGE: [413, 'The request body exceeds the maximum accepted size'],
  INVALID_UUID: [400, 'The supplied UUID is invalid'],
  INVALID_CONTENT_TYPE: [400, 'The content type supplied is not acceptable'],
  INVALID_AUTH: [401, 'The authentication request failed'],
  INVALID_AUTH_METHOD: [400, 'The supplied authentication method is not valid'],
  ENROLLMENT_EXPIRED: [400, 'The window for this enrollment has expired'],
  ENROLLMENT_IDENTITY_ALREADY_ENROLLED: [
    409,
    'The token supplied for this enrollment already has a matching identity, cannot enroll a new identity',
  ],
  COULD_NOT_PROCESS_CSR: [400, 'The supplied csr could not be processed'],
  ENROLLMENT_CA_NOT_VALID: [400, 'The CA tied to the supplied token is no longer valid'],
  ENROLLMENT_NO_VALID_CAS: [400, 'No CAs are valid for this request'],
  INVALID_ENROLLMENT_TOKEN: [400, 'The supplied token is not valid'],
  INVALID_ENROLLMENT_NOT_ALLOWED: [409, 'The configuration does not allow this enrollment'],
  INVALID_ENROLLMENT_ALREADY_ENROLLED: [410, 'The token provided has already been used to enroll'],
  INVALID_ENROLL_METHOD: [400, 'The supplied enrollment method is not valid'],
  MISSING_OR_INVALID_CSR: [400, 'The supplied enrollment request is missing or contains an invalid CSR'],
  NO_EDGE_ROUTERS_AVAILABLE: [400, 'No edge routers are assigned and online to handle the requested connection'],
  COULD_NOT_PARSE_x509_FROM_DER: [400, 'could not parse x509 from DER'],
  CERT_FAILED_VALIDATION: [400, 'certificate failed to validate against CA'],
  CERT_IN_USE: [409, 'The certificate supplied is already associated with another identity'],
  CA_ALREADY_VERIFIED: [409, 'CA has already been verified'],
  EXPECTED_PEM_CERTIFICATE: [400, "expected PEM block type 'CERTIFICATE'"],
  COULD_NOT_PARSE_DER_BLOCK: [400, "The certificate's DER block could not be parsed"],
  COULD_NOT_PARSE_PEM_BLOCK: [400, "The certificate's PEM block could not be parsed"],
  INVALID_COMMON_NAME: [400, 'The common name of the supplied certificate is invalid'],
  CERTIFICATE_FAILED_VALIDATION: [
    400,
    "The supplied certificate failed to validate against the CA's certificate chain",
  ],
  CERTIFICATE_IS_NOT_CA: [400, 'Leading certificate is not a CA'],
  INVALID_AUTHENTICATOR_PROPERTIES: [400, 'The properties supplied did not match the authenticator method'],
  CAN_NOT_UPDATE_AUTHENTICATOR: [409, 'The authenticator cannot be updated in this fashion'],
  CAN_NOT_UPDATE_ROUTER: [409, 'The router was not added via the Edge API and cannot be updated'],
  MAX_AUTHENTICATOR_METHODS_REACHED: [
    409,
    'The identity already has the maximum authenticators of the specified method',
  ],
  RATE_LIMITED: [
    429,
    'The requested operation is rate limited and the rate limit has been exceeded. Please try again later',
  ],
  TIMEOUT: [503, 'The requested operation took too much time to reply'],
  INVALID_POSTURE: [409, 'Posture response data is missing or wrong'],
  MFA_EXISTS: [409, 'An MFA record already exists, try removing it'],
  MFA_ENROLLMENT_NOT_STARTED: [404, 'MFA enrollment has not be started'],
  MFA_INVALID_TOKEN: [400, 'An invalid token/code was provided'],
  INVALID_BACKING_TOKEN_TYPE: [400, 'The backing token type is invalid'],
  MFA_NOT_ENROLLED: [409, 'The current identity is not enrolled in MFA'],
  COULD_NOT_PARSE_PROXY_CERT: [500, 'could not decode proxy client cert'],
  MISSING_CERT_CLAIM: [400, 'The certificate is expected to contain and externalId, which was not found'],
  FAILED_ER_REENROLLMENT: [500, 'the edge router failed to be re-enrolled, see cause'],
  INVALID_CLIENT_CERT: [400, 'The provided client certificate is invalid'],
  INVALID_CERT_PEM: [
    400,
    'the supplied certificate PEM is either invalid or contains the incorrect number of certificates',
  ],
  CAN_NOT_DELETE_REFERENCED_ENTITY: [
    409,
    'the entity cannot be deleted because it is referenced by another entity, see cause',
  ],
  REFERENCED_ENTITY_NOT_FOUND: [400, 'REFERENCED_ENTITY_NOT_FOUND'],
  ENROLLMENT_EXISTS: [409, 'ENROLLMENT_EXISTS'],
  SERVER_TOO_MANY_REQUESTS: [
    429,
    'Too many requests to alter state have been issued. Please slow your request rate or try again later.',
  ],
  SERVER_NOT_RUNNING_IN_HA_MODE: [400, 'The server is not running in HA mode. HA operations are not permitted'],
  TRANSFER_LEADERSHIP_ERROR: [500, 'Error while attempting to transfer leadership'],
  CLUSTER_NO_LEADER: [503, 'Cluster has no leader, unable to make model updates.'],
  // ad-hoc literals
  EDGE_ROUTER_ENROLL_COMMON_NAME_INVALID: [
    400,
    "The edge router CSR enrollment must have a common name that matches the edge router's id",
  ],
  UNSUPPORTED_MEDIA: [415, 'UNSUPPORTED_MEDIA'],
} as const satisfies Record<string, readonly [number, string]>;

export type ErrorCode = keyof typeof ERROR_DEFINITIONS;

export type ErrorFactory = (cause?: ApiErrorCause, options?: Omit<ApiErrorOptions, 'cause'>) => ApiError;

function buildFactories(): { readonly [C in ErrorCode]: ErrorFactory } {
  const out: Partial<Record<ErrorCode, ErrorFactory>> = {};
  for (const code of Object.keys(ERROR_DEFINITIONS) as ErrorCode[]) {
    const [status, message] = ERROR_DEFINITIONS[code];
    out[code] = (cause, options = {}) =>
      new ApiError(code, status, message, cause === undefined ? options : { ...options, cause });
  }
  return Object.freeze(out as Record<ErrorCode, ErrorFactory>);
}

/** One factory per code, e.g. `Errors.NOT_FOUND({code: 'UNHANDLED', message: 'identity with id x not found'})`. */
export const Errors = buildFactories();

/** `apierror.NewInvalidContentType`: the content type is appended to the message. */
export function invalidContentType(contentType: string): ApiError {
  const [status, message] = ERROR_DEFINITIONS.INVALID_CONTENT_TYPE;
  return new ApiError('INVALID_CONTENT_TYPE', status, `${message}: ${contentType}`);
}

/** `apierror.NewInvalidUuid`: generic cause `{data: {uuid}, message: "invalid uuid"}`. */
export function invalidUuid(value: string): ApiError {
  return Errors.INVALID_UUID({ data: { uuid: value }, message: 'invalid uuid' });
}

/** A field error (`INVALID_FIELD`, sent as `COULD_NOT_VALIDATE` like OpenZiti does). */
export function fieldError(field: string, reason: string, value?: unknown): ApiError {
  return Errors.INVALID_FIELD({ field, reason, value });
}

// ---------------------------------------------------------------------------------------------
// Wire serialization

const INVALID_FIELD = 'INVALID_FIELD';
const [, COULD_NOT_VALIDATE_MESSAGE] = ERROR_DEFINITIONS.COULD_NOT_VALIDATE;
/** Nesting bound for causes (a cycle or absurd chain is cut here). */
const MAX_CAUSE_DEPTH = 8;

/** Go's `fmt.Sprintf("%v", v)` for the JSON-ish values handlers put in field errors. */
export function goValueString(value: unknown, depth = 0): string {
  if (value === undefined || value === null) return '<nil>';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (depth >= MAX_CAUSE_DEPTH) return '...';
  if (Array.isArray(value)) return `[${value.map((v) => goValueString(v, depth + 1)).join(' ')}]`;
  if (value instanceof Date) return value.toISOString();
  if (Buffer.isBuffer(value)) return `[${Array.from(value).join(' ')}]`;
  if (typeof value === 'object') {
    const keys = Object.keys(value).sort();
    const parts = keys.map((k) => `${k}:${goValueString((value as Record<string, unknown>)[k], depth + 1)}`);
    return `map[${parts.join(' ')}]`;
  }
  return String(value);
}

function isFieldCause(cause: object): cause is FieldErrorCause {
  return typeof (cause as FieldErrorCause).field === 'string' && typeof (cause as FieldErrorCause).reason === 'string';
}

function isGenericCause(cause: object): cause is GenericCause {
  const data = (cause as GenericCause).data;
  return typeof data === 'object' && data !== null && typeof (cause as GenericCause).message === 'string';
}

type WireError = Record<string, unknown>;

/** `EdgeResponseMapper.toRestModel`: key order is Go's struct order (args, cause, causeMessage, code, data, message, requestId). */
function toWire(err: ApiError, requestId: string, depth: number): WireError {
  let code = err.code;
  let message = err.message;
  let cause: WireError | undefined;
  const c = err.cause;
  if (c !== undefined && c !== null && depth < MAX_CAUSE_DEPTH) {
    if (c instanceof ApiError) {
      cause = toWire(c, requestId, depth + 1);
    } else if (isFieldCause(c)) {
      cause = { field: c.field, reason: c.reason };
      const value = goValueString(c.value);
      if (value !== '') cause.value = value; // omitempty
      if (code === INVALID_FIELD) {
        code = 'COULD_NOT_VALIDATE';
        message = COULD_NOT_VALIDATE_MESSAGE;
      }
    } else if (isGenericCause(c)) {
      cause = { data: c.data, message: c.message };
    } else {
      const u = c as UnhandledCause;
      cause = { code: typeof u.code === 'string' && !(c instanceof Error) ? u.code : 'UNHANDLED', message: u.message };
    }
  }
  const out: WireError = {};
  if (cause !== undefined) out.cause = cause;
  out.code = code;
  if (err.data !== undefined) out.data = err.data;
  if (message !== '') out.message = message;
  if (requestId !== '') out.requestId = requestId;
  return out;
}

/** `meta` of every error envelope (`controller/response/version.go`). */
export const ERROR_META_JSON = '{"apiEnrollmentVersion":"0.0.1","apiVersion":"0.0.1"}';
const ERROR_ENVELOPE_TAIL = `,"meta":${ERROR_META_JSON}}`;

/** Exact wire JSON: `{"error":{...,"requestId"},"meta":{"apiEnrollmentVersion":"0.0.1","apiVersion":"0.0.1"}}`. */
export function errorEnvelope(err: ApiError, requestId: string): string {
  return `{"error":${JSON.stringify(toWire(err, requestId, 0))}${ERROR_ENVELOPE_TAIL}`;
}

export const JSON_CONTENT_TYPE = 'application/json';
const JSON_HEADERS: HttpHeaders = Object.freeze({ 'content-type': JSON_CONTENT_TYPE }) as HttpHeaders;
const EMPTY_META_TAIL = ',"meta":{}}';

/** The response for a thrown ApiError: its status, its headers, the envelope, `content-type: application/json`. */
export function errorResponse(err: ApiError, requestId: string): HttpResponse {
  const headers = err.headers === undefined ? JSON_HEADERS : { ...err.headers, 'content-type': JSON_CONTENT_TYPE };
  return { status: err.status, headers, body: errorEnvelope(err, requestId) };
}

/**
 * A success envelope `{"data":...,"meta":{...}}` with `content-type: application/json`.
 * `status` defaults to 200 (use 201 for creates).
 */
export function dataEnvelope(data: unknown, meta?: object, status = 200): HttpResponse {
  const dataJson = JSON.stringify(data);
  if (dataJson === undefined) throw new TypeError('dataEnvelope: data is not JSON-serializable');
  const tail = meta === undefined ? EMPTY_META_TAIL : `,"meta":${JSON.stringify(meta)}}`;
  return { status, headers: JSON_HEADERS, body: `{"data":${dataJson}${tail}` };
}
