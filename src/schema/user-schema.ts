import { setFlagsFromString } from 'node:v8';
import type { ValidateFunction } from 'ajv';
import { Ajv, addFormats, type FieldError, firstError } from './validate.js';

// V8's linear-time regexp engine (the `l` flag) for the patterns of user schemas: a backtracking match of
// `^(a+)+$` against 30 characters takes seconds on the one event loop (OpenZiti's Go regexp is linear, so no
// pattern can stall it). The flag only makes `l` legal; other regexps keep the default engine.
setFlagsFromString('--enable-experimental-regexp-engine');
/** The flag of the linear engine (a variable: the flag is unknown to TypeScript and to the linter). */
const LINEAR = 'l';
try {
  new RegExp('a', LINEAR);
} catch {
  throw new Error('the linear regexp engine is unavailable: user schema patterns could stall the event loop');
}

/** Syntax that means something else without the `u` flag (the linear engine does not take `u`). */
const UNICODE_ONLY_SYNTAX = /\\[pP]\{|\\u\{/;

/**
 * ajv's regexp engine for user schemas: a pattern must be valid with `u` (as ajv checks it by default) and run on
 * the linear engine, else the schema is refused. Refused: backreferences and lookaround (Go's RE2 refuses them
 * too), `\p{…}` classes and counted repetition above 16 (which RE2 takes but the linear engine cannot run).
 */
function linearRegExp(pattern: string): RegExp {
  new RegExp(pattern, 'u'); // throws the syntax error for an invalid pattern
  if (UNICODE_ONLY_SYNTAX.test(pattern)) throw new Error(`pattern ${pattern} cannot be matched in linear time`);
  try {
    return new RegExp(pattern, LINEAR);
  } catch {
    throw new Error(`pattern ${pattern} cannot be matched in linear time`);
  }
}
linearRegExp.code = 'linearRegExp';

/**
 * JSON schemas supplied by users (a config type's `schema`), compiled with ajv (draft-07, as OpenZiti's
 * gojsonschema reads them). Each schema gets its own ajv instance: user schemas carry `$id`s that would clash in a
 * shared one. Unknown keywords and formats are ignored, as gojsonschema does.
 */
export function compileUserSchema(schema: Record<string, unknown>): ValidateFunction | { error: string } {
  const ajv = new Ajv({
    allErrors: false,
    strict: false,
    logger: false,
    validateSchema: true,
    code: { regExp: linearRegExp },
  });
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
