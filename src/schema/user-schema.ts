import type { ValidateFunction } from 'ajv';
import { Ajv, addFormats, type FieldError, firstError } from './validate.js';

/**
 * JSON schemas supplied by users (a config type's `schema`), compiled with ajv (draft-07, as OpenZiti's
 * gojsonschema reads them). Each schema gets its own ajv instance: user schemas carry `$id`s that would clash in a
 * shared one. Unknown keywords and formats are ignored, as gojsonschema does.
 */
export function compileUserSchema(schema: Record<string, unknown>): ValidateFunction | { error: string } {
  const ajv = new Ajv({ allErrors: false, strict: false, logger: false, validateSchema: true });
  addFormats(ajv);
  try {
    return ajv.compile(schema);
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
}

/** Compiled schemas by the object holding them (stored rows are immutable: an update brings a new object). */
const compiled = new WeakMap<object, ValidateFunction | { error: string }>();

/**
 * Validates `value` against a stored schema; the first failure names the failing field relative to the document
 * (`port`, `listenOptions.maxConnections`; `(root)` for the document itself, as gojsonschema reports it).
 */
export function checkAgainstSchema(
  schema: Record<string, unknown>,
  value: unknown,
  location: string,
): FieldError | null {
  let fn = compiled.get(schema);
  if (!fn) compiled.set(schema, (fn = compileUserSchema(schema)));
  // a stored schema that no longer compiles (it was checked on write) constrains nothing rather than blocking writes
  if (!(typeof fn === 'function')) return null;
  const err = firstError(fn, value, location);
  if (!err) return null;
  return { ...err, field: err.field === location || err.field === '' ? '(root)' : err.field };
}
