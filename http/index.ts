// Public surface of the HTTP layer.
export { type App, type AppOptions, createApp, DEFAULT_MAX_BODY_BYTES, DEFAULT_REQUEST_TIMEOUT_MS } from './app.js';
export { serveStaticJson } from './bare-uws.js';
export { CORS_ALLOWED_HEADERS, CORS_ALLOWED_METHODS, canonicalHeaderKey } from './cors.js';
export { type NodeServeOptions, type NodeTlsOptions, serveNode } from './engines/node.js';
export { serveUws, type UwsServeOptions } from './engines/uws.js';
export {
  ApiError,
  type ApiErrorCause,
  type ApiErrorOptions,
  dataEnvelope,
  ERROR_DEFINITIONS,
  type ErrorCode,
  Errors,
  errorEnvelope,
  errorResponse,
  type FieldErrorCause,
  fieldError,
  type GenericCause,
  invalidContentType,
  invalidUuid,
  type UnhandledCause,
} from './errors.js';
export { createRequest, IncomingRequest, type RequestInit } from './request.js';
export { newRequestId, REQUEST_ID_ALPHABET } from './request-id.js';
export { type RouteInfo, type RouteMatch, Router } from './router.js';
export { type Engine, type ServeOptions, serve } from './serve.js';
export type { Handler, HttpHeaders, HttpRequest, HttpResponse, HttpServer } from './types.js';
