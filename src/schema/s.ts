/**
 * A small schema language for API bodies and responses. One definition yields three things:
 * a static TypeScript type (`Infer<typeof x>`), a JSON Schema for request validation (ajv), and a
 * Swagger 2.0 schema for the OpenAPI document Keel serves (named schemas become `#/definitions/...`).
 */

export type Kind = 'string' | 'integer' | 'number' | 'boolean' | 'array' | 'object' | 'any';

export interface SchemaNode {
  kind: Kind;
  nullable?: boolean;
  name?: string;
  description?: string;
  format?: string;
  enum?: readonly unknown[];
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  items?: SchemaNode;
  minItems?: number;
  maxItems?: number;
  properties?: Record<string, SchemaNode>;
  required?: readonly string[];
  /** `true`: any extra property; a node: map values; `false`/absent: extra properties are ignored (as go-swagger does). */
  additional?: SchemaNode | true;
  /** Extra properties to reject instead of ignore. */
  closed?: boolean;
  /** `allOf` composition (for `baseEntity` + detail fields in the served document). */
  allOf?: SchemaNode[];
}

export interface Schema<T> extends SchemaNode {
  /** Phantom: the TypeScript type of a valid value. */
  readonly __type?: T;
}

export type Infer<S> = S extends Schema<infer T> ? T : never;

type Opts = Partial<
  Pick<
    SchemaNode,
    'description' | 'format' | 'minLength' | 'maxLength' | 'pattern' | 'minimum' | 'maximum' | 'minItems' | 'maxItems'
  >
>;

function mk<T>(node: SchemaNode): Schema<T> {
  return node as Schema<T>;
}

type Props = Record<string, Schema<unknown>>;
type Simplify<T> = { [K in keyof T]: T[K] } & {};
type ObjType<P extends Props, R extends keyof P> = Simplify<
  { [K in R]: Infer<P[K]> } & { [K in Exclude<keyof P, R>]?: Infer<P[K]> }
>;

export const s = {
  str: (o: Opts = {}) => mk<string>({ kind: 'string', ...o }),
  datetime: (o: Opts = {}) => mk<string>({ kind: 'string', format: 'date-time', ...o }),
  int: (o: Opts = {}) => mk<number>({ kind: 'integer', ...o }),
  num: (o: Opts = {}) => mk<number>({ kind: 'number', ...o }),
  bool: (o: Opts = {}) => mk<boolean>({ kind: 'boolean', ...o }),
  any: (o: Opts = {}) => mk<unknown>({ kind: 'any', ...o }),
  enum: <const E extends readonly string[]>(values: E, o: Opts = {}) =>
    mk<E[number]>({ kind: 'string', enum: values, ...o }),
  arr: <T>(items: Schema<T>, o: Opts = {}) => mk<T[]>({ kind: 'array', items, ...o }),
  obj: <P extends Props, R extends keyof P = never>(properties: P, required: readonly R[] = [], o: Opts = {}) =>
    mk<ObjType<P, R>>({ kind: 'object', properties, required: required as readonly string[], ...o }),
  /** An object of arbitrary keys whose values match `values`. */
  map: <T>(values: Schema<T> | true, o: Opts = {}) =>
    mk<Record<string, T>>({ kind: 'object', additional: values === true ? true : values, ...o }),
  nullable: <T>(x: Schema<T>) => mk<T | null>({ ...x, nullable: true, name: undefined }),
  /** Gives a schema a definition name in the served OpenAPI document. */
  named: <T>(name: string, x: Schema<T>) => mk<T>({ ...x, name }),
  /** Swagger `allOf` (for documentation); validation merges the parts. */
  allOf: <A, B>(a: Schema<A>, b: Schema<B>, o: Opts = {}) => mk<A & B>({ kind: 'object', allOf: [a, b], ...o }),
  /** Same schema, every property optional (PATCH bodies). */
  partial: <T>(x: Schema<T>) => mk<Partial<T>>({ ...x, required: [], name: undefined }),
};

/** Keywords JSON Schema and Swagger 2.0 spell alike. */
const PLAIN_KEYWORDS = [
  'format',
  'minLength',
  'maxLength',
  'pattern',
  'minimum',
  'maximum',
  'minItems',
  'maxItems',
] as const;

function copyKeywords(n: SchemaNode, out: Record<string, unknown>): void {
  for (const k of PLAIN_KEYWORDS) if (n[k] !== undefined) out[k] = n[k];
}

/** The range of a Go int64, as the doubles nearest to it (what OpenZiti's integer fields decode into). */
const INT64_MAX = 2 ** 63 - 1;
const INT64_MIN = -(2 ** 63);

/** JSON Schema (draft-07) for ajv. Nullable becomes a type union. Extra properties are allowed unless `closed`. */
export function toJsonSchema(n: SchemaNode): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (n.allOf) return { allOf: n.allOf.map(toJsonSchema) };
  if (n.kind !== 'any') out.type = n.nullable ? [n.kind, 'null'] : n.kind;
  if (n.enum) out.enum = n.nullable ? [...n.enum, null] : n.enum;
  copyKeywords(n, out);
  // an integer field is a Go int64 in OpenZiti: a JSON number beyond that range is refused as it is there
  if (n.kind === 'integer') {
    out.minimum = Math.max(n.minimum ?? INT64_MIN, INT64_MIN);
    out.maximum = Math.min(n.maximum ?? INT64_MAX, INT64_MAX);
  }
  if (n.items) out.items = toJsonSchema(n.items);
  if (n.properties) {
    out.properties = Object.fromEntries(Object.entries(n.properties).map(([k, v]) => [k, toJsonSchema(v)]));
    if (n.required && n.required.length > 0) out.required = [...n.required];
  }
  if (n.additional === true) out.additionalProperties = true;
  else if (n.additional) out.additionalProperties = toJsonSchema(n.additional);
  else if (n.closed) out.additionalProperties = false;
  return out;
}

/** Swagger 2.0 schema; named nodes are collected into `defs` and referenced. */
export function toSwagger(n: SchemaNode, defs: Record<string, unknown>, top = true): Record<string, unknown> {
  if (n.name && !top) {
    if (!(n.name in defs)) {
      defs[n.name] = {}; // reserve (recursion guard)
      defs[n.name] = toSwagger(n, defs, true);
    }
    return { $ref: `#/definitions/${n.name}` };
  }
  const out: Record<string, unknown> = {};
  if (n.description) out.description = n.description;
  if (n.allOf) {
    out.allOf = n.allOf.map((x) => toSwagger(x, defs, false));
    out.type = 'object';
    return out;
  }
  if (n.kind !== 'any') out.type = n.kind;
  if (n.nullable) out['x-nullable'] = true;
  if (n.enum) out.enum = n.enum;
  copyKeywords(n, out);
  if (n.items) out.items = toSwagger(n.items, defs, false);
  if (n.properties) {
    out.properties = Object.fromEntries(Object.entries(n.properties).map(([k, v]) => [k, toSwagger(v, defs, false)]));
    if (n.required && n.required.length > 0) out.required = [...n.required];
  }
  if (n.additional === true) out.additionalProperties = true;
  else if (n.additional) out.additionalProperties = toSwagger(n.additional, defs, false);
  return out;
}
