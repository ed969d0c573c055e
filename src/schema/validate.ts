import AjvModule, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { type SchemaNode, toJsonSchema } from './s.js';

// CommonJS packages: their class/function is on `default` when loaded as ESM by Node, or the import itself under
// bundlers that already unwrap it
type AjvClass = typeof AjvModule.default;
type AddFormats = typeof addFormatsModule.default;
export const Ajv: AjvClass =
  (AjvModule as unknown as { default?: AjvClass }).default ?? (AjvModule as unknown as AjvClass);
export const addFormats: AddFormats =
  (addFormatsModule as unknown as { default?: AddFormats }).default ?? (addFormatsModule as unknown as AddFormats);

const ajv = new Ajv({ allErrors: false, strict: false, coerceTypes: false, useDefaults: false });
addFormats(ajv, ['date-time', 'uuid', 'uri', 'email']);
// RFC 3339 allows a leap second (`23:59:60Z`), which Go's time.Parse (OpenZiti) refuses and Date.parse cannot read:
// a date-time is also one JavaScript reads, so no handler meets a date that parses to NaN
const rfc3339 = ajv.formats['date-time'] as { validate: (s: string) => boolean } | ((s: string) => boolean);
const rfc3339Valid = typeof rfc3339 === 'function' ? rfc3339 : rfc3339.validate;
ajv.addFormat('date-time', {
  type: 'string',
  validate: (s: string) => rfc3339Valid(s) && Number.isFinite(Date.parse(s)),
});

/** A field error in go-openapi's words (OpenZiti answers validation failures with these). */
export interface FieldError {
  field: string;
  reason: string;
  value: unknown;
}

const cache = new WeakMap<SchemaNode, ValidateFunction>();

/** Compiles (once per schema) and validates; returns the first error or null. */
export function validate(schema: SchemaNode, value: unknown, location = 'body'): FieldError | null {
  let fn = cache.get(schema);
  if (!fn) {
    fn = ajv.compile(toJsonSchema(schema)) as ValidateFunction;
    cache.set(schema, fn);
  }
  return firstError(fn, value, location);
}

/** Runs a compiled validator; its first error in go-openapi's words, or null when `value` is valid. */
export function firstError(fn: ValidateFunction, value: unknown, location: string): FieldError | null {
  // only a synchronous `true` passes (an asynchronous validator's promise is not a verdict)
  if (fn(value) === true) return null;
  const err = fn.errors?.[0];
  if (!err) return { field: '', reason: 'invalid document', value: undefined };
  return describe(err, value, location);
}

function fieldOf(err: ErrorObject): string {
  const parts = err.instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (err.keyword === 'required') parts.push(String((err.params as Record<string, unknown>).missingProperty));
  return parts.join('.');
}

function valueAt(root: unknown, path: string): unknown {
  if (!path) return root;
  let cur: unknown = root;
  for (const p of path.split('.')) {
    if (cur === null || typeof cur !== 'object' || !Object.hasOwn(cur, p)) return undefined;
    cur = (cur as Record<string, unknown>)[p];
  }
  return cur;
}

function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

/**
 * Request fields whose values are credentials (passwords, enrollment and session tokens, one-time codes, secrets):
 * an error about one names the field but never echoes its value, neither in `value` nor in the reason. OpenZiti
 * echoes them; Keel does not (an error answer ends up in client logs, proxies' logs, screenshots).
 */
export const SECRET_FIELDS: ReadonlySet<string> = new Set([
  'password',
  'currentPassword',
  'newPassword',
  'token',
  'code',
  'secret',
  'identitySecret',
]);
/** What stands in an error for a credential's value (as the auth policy's password checks answer). */
export const REDACTED = '******';

function isSecretField(field: string): boolean {
  return SECRET_FIELDS.has(field.slice(field.lastIndexOf('.') + 1));
}

/**
 * What an error may echo of the value it is about: a scalar of a field that is not a credential. Never the whole
 * body (a login sent as a bare string is the password itself), nor an object or array, which may hold credentials
 * under any name.
 */
function echoable(field: string, actual: unknown): unknown {
  if (isSecretField(field)) return REDACTED;
  if (field === '' || (actual !== null && typeof actual === 'object')) return undefined;
  return actual;
}

function describe(err: ErrorObject, root: unknown, location: string): FieldError {
  const field = fieldOf(err);
  const name = field || location;
  const actual = valueAt(root, field);
  const value = echoable(field, actual);
  const p = err.params as Record<string, unknown>;
  switch (err.keyword) {
    case 'required':
      return { field, reason: `${name} in ${location} is required`, value: null };
    case 'type':
      return {
        field: field || location,
        reason: `${name} in ${location} must be of type ${p.type}: "${jsonType(actual)}"`,
        value,
      };
    case 'minLength':
      return { field, reason: `${name} in ${location} should be at least ${p.limit} chars long`, value };
    case 'maxLength':
      return { field, reason: `${name} in ${location} should be at most ${p.limit} chars long`, value };
    case 'minimum':
      return { field, reason: `${name} in ${location} should be greater than or equal to ${p.limit}`, value };
    case 'maximum':
      return { field, reason: `${name} in ${location} should be less than or equal to ${p.limit}`, value };
    case 'minItems':
      return { field, reason: `${name} in ${location} should have at least ${p.limit} items`, value };
    case 'maxItems':
      return { field, reason: `${name} in ${location} should have at most ${p.limit} items`, value };
    case 'enum':
      return {
        field,
        reason: `${name} in ${location} should be one of [${(p.allowedValues as unknown[]).map(String).join(' ')}]`,
        value,
      };
    case 'format':
      return { field, reason: `${name} in ${location} must be of type ${p.format}: "${String(value)}"`, value };
    case 'pattern':
      return { field, reason: `${name} in ${location} should match '${p.pattern}'`, value };
    case 'additionalProperties':
      return {
        field: field ? `${field}.${p.additionalProperty}` : String(p.additionalProperty),
        reason: `${p.additionalProperty} in ${location} is a forbidden property`,
        value: undefined,
      };
    default:
      return { field, reason: `${name} in ${location} ${err.message ?? 'is invalid'}`, value };
  }
}

/** Bound on the levels nilArraysAsEmpty descends (a schema's own depth is far below it). */
const MAX_NIL_ARRAY_DEPTH = 32;

/**
 * Reads a JSON `null` given for an optional array (not required, not declared nullable) as an empty array, in place,
 * at any depth `schema` describes (object properties, `allOf` parts, array items, map values), and returns `value`.
 * go-openapi decodes such a `null` into a nil slice, which its validation accepts wherever the array is not required
 * and its handlers treat as empty; go-swagger clients send it for every optional array they leave unset (their
 * models' array fields carry no `omitempty`: sdk-golang's posture responses, the `ziti` CLI's process-multi checks).
 * A required array's `null` is left for validation to refuse, as go-openapi does. Not for a PATCH, where a `null` is
 * no change at all (withoutPatchNulls).
 */
export function nilArraysAsEmpty(schema: SchemaNode, value: unknown, depth = 0): unknown {
  if (depth >= MAX_NIL_ARRAY_DEPTH || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    if (schema.kind === 'array' && schema.items !== undefined) {
      for (const item of value) nilArraysAsEmpty(schema.items, item, depth + 1);
    }
    return value;
  }
  if (schema.kind !== 'object') return value;
  const parts = [schema, ...(schema.allOf ?? [])];
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    const part = parts.find((p) => p.properties !== undefined && Object.hasOwn(p.properties, key));
    const own = part?.properties?.[key];
    const prop = own ?? (typeof schema.additional === 'object' ? schema.additional : undefined);
    if (prop === undefined) continue;
    const v = record[key];
    if (v === null) {
      const required = parts.some((p) => p.required?.includes(key) === true);
      if (prop.kind === 'array' && prop.nullable !== true && !required) record[key] = [];
    } else nilArraysAsEmpty(prop, v, depth + 1);
  }
  return value;
}

/**
 * A PATCH body as OpenZiti reads it (`GetJsonFields`, controller/api/json_fields.go): a property whose value is
 * `null` is not part of the update — the field keeps its value — at any depth of nested objects; an object left
 * empty only because its properties were all `null` is not part of it either (an object sent empty, `{}`, is: it
 * clears). Arrays are values, not descended into. Works in place; returns `value`.
 */
export function withoutPatchNulls(value: unknown, depth = 0): unknown {
  if (depth >= MAX_NIL_ARRAY_DEPTH || value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    const v = record[key];
    if (v === null) {
      delete record[key];
    } else if (typeof v === 'object' && !Array.isArray(v)) {
      const had = Object.keys(v as object).length;
      withoutPatchNulls(v, depth + 1);
      if (had > 0 && Object.keys(v as object).length === 0) delete record[key];
    }
  }
  return value;
}
