import type { HttpRequest, HttpResponse } from '../../http/types.js';
import type { RowFor } from '../model/rows.js';
import type { Schema, SchemaNode } from '../schema/s.js';
import type { Services } from './services.js';

export type ApiName = 'client' | 'management';
export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * Who may call an operation (OpenZiti's permission resolvers):
 * - `none`: no session needed;
 * - `partial`: any session, even one still waiting for MFA;
 * - `authenticated`: a fully authenticated session;
 * - `admin`: an admin identity (or, for management entity routes, a matching `permissions` entry: see auth.ts).
 */
export type Access = 'none' | 'partial' | 'authenticated' | 'admin';

/** The action of a management permission: `identity.read`, `identity.update`, … */
export type PermissionAction = 'read' | 'create' | 'update' | 'delete';

/** The action a request method stands for, unless an operation declares its own (`permissionAction`). */
export const ACTION_OF_METHOD: Record<Method, PermissionAction> = {
  GET: 'read',
  POST: 'create',
  PUT: 'update',
  PATCH: 'update',
  DELETE: 'delete',
};

export interface QueryParamDoc {
  name: string;
  type: 'string' | 'integer' | 'array' | 'boolean';
  required?: boolean;
  enum?: readonly string[];
  description?: string;
}

/** The query parameters of a paged list (OpenZiti documents these three on its list operations). */
export const LIST_QUERY: readonly QueryParamDoc[] = [
  { name: 'limit', type: 'integer' },
  { name: 'offset', type: 'integer' },
  { name: 'filter', type: 'string' },
];

export interface ResponseDoc {
  description: string;
  schema?: SchemaNode;
}

/** The caller, once authenticated. */
export interface Caller {
  session: RowFor<'api-sessions'>;
  identity: RowFor<'identities'>;
}

export interface OpContext<B> {
  req: HttpRequest;
  body: B;
  params: Record<string, string>;
  caller: Caller | null;
  svc: Services;
  api: ApiName;
}

export interface OpDef<B = unknown> {
  method: Method;
  /** Path relative to the API base, OpenAPI style: `/identities/{id}`. */
  path: string;
  apis: readonly ApiName[];
  operationId?: string;
  tags: readonly string[];
  summary: string;
  description?: string;
  access: Access;
  /** Permission entity for management access (e.g. `identity`): `identity` / `identity.read` grant it. */
  permission?: string;
  /**
   * The action of `permission` the operation needs, when not its method's (ACTION_OF_METHOD): OpenZiti files
   * actions by what they do, e.g. `POST /identities/{id}/disable` under `identity.update` (docs/permissions.md).
   */
  permissionAction?: PermissionAction;
  body?: Schema<B>;
  bodyName?: string;
  /**
   * Drops from a JSON object body, before it is validated, the properties the operation ignores for this body
   * (OpenZiti's discriminated bodies: a posture check's create takes only its `typeId`'s fields).
   */
  ignoredBodyFields?(body: Record<string, unknown>): readonly string[];
  /**
   * Media types of request bodies the operation accepts (lower-case `type/subtype`); default
   * `['application/json']`. A non-empty body of any other type is refused (415 UNSUPPORTED_MEDIA).
   */
  consumes?: readonly string[];
  /** An absent body is an error (go-swagger: "<bodyName> in body is required"). Default: true when `body` is set. */
  bodyRequired?: boolean;
  query?: readonly QueryParamDoc[];
  responses: Record<number, ResponseDoc>;
  /** Content types of the responses when not JSON (e.g. `application/pkcs7-mime`). */
  produces?: readonly string[];
  /** Served but left out of the OpenAPI document (e.g. `swagger.json` itself). */
  undocumented?: boolean;
  /**
   * On a cluster member, wait first until everything committed is applied here (SessionService.catchUp), then read
   * the caller: logins and enrollments, so that a credential, a partial session or an enrollment made through
   * another member a moment ago is known here (docs/cluster.md).
   */
  catchUpFirst?: boolean;
  handler(ctx: OpContext<B>): Promise<HttpResponse> | HttpResponse;
}

export function op<B = undefined>(def: OpDef<B>): OpDef<B> {
  return def;
}
