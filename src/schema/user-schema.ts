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

/** Go's regexp (RE2) refuses a counted repetition above 1000; so does Keel. */
const MAX_REPEAT = 1000;
/** Bound on a pattern after its counted repetitions are written out for the linear engine. */
const MAX_EXPANDED_CHARS = 20_000;

class Unsupported extends Error {}

/** Length of the escape starting at `i` (a backslash) in a pattern without the `u` flag. */
function escapeLength(p: string, i: number): number {
  const c = p[i + 1];
  if (c === 'x') return 4;
  if (c === 'u') return 6;
  if (c === 'c') return 3;
  return 2;
}

/**
 * `pattern` with every counted repetition `A{n}`, `A{n,}`, `A{n,m}` written out as `A` n times followed by `A*` or
 * by m − n nested optional `A`s: the same language, in a form V8's linear engine runs (it refuses counts above
 * 16). Refuses counts above MAX_REPEAT and results above MAX_EXPANDED_CHARS. Bounded: one pass per nesting level.
 */
export function expandCountedRepetition(pattern: string): string {
  let i = 0;
  const sequence = (depth: number): string => {
    if (depth > 64) throw new Unsupported('nesting');
    let out = '';
    let atom = '';
    const flush = () => {
      out += atom;
      atom = '';
    };
    while (i < pattern.length) {
      const c = pattern[i]!;
      if (c === ')') break;
      if (c === '\\') {
        flush();
        const n = escapeLength(pattern, i);
        atom = pattern.slice(i, i + n);
        i += n;
      } else if (c === '[') {
        flush();
        let j = i + 1;
        if (pattern[j] === '^') j++;
        while (j < pattern.length && pattern[j] !== ']') j += pattern[j] === '\\' ? escapeLength(pattern, j) : 1;
        atom = pattern.slice(i, j + 1);
        i = j + 1;
      } else if (c === '(') {
        flush();
        const open = /^\((\?:|\?=|\?!|\?<=|\?<!|\?<[A-Za-z_$][\w$]*>)?/.exec(pattern.slice(i))![0];
        i += open.length;
        const inner = sequence(depth + 1);
        if (pattern[i] !== ')') throw new Unsupported('unbalanced group');
        i++;
        atom = `${open}${inner})`;
      } else if (c === '{' && atom !== '') {
        const q = /^\{(\d+)(,(\d*))?\}\??/.exec(pattern.slice(i));
        if (!q) {
          flush();
          atom = c;
          i++;
          continue;
        }
        const min = Number(q[1]);
        const max = q[2] === undefined ? min : q[3] === '' ? Number.POSITIVE_INFINITY : Number(q[3]);
        if (min > MAX_REPEAT || (max !== Number.POSITIVE_INFINITY && max > MAX_REPEAT) || max < min) {
          throw new Unsupported('repetition count');
        }
        // (atom + 5) × copies bounds what is written below, so the bound holds before anything is built
        const copies = max === Number.POSITIVE_INFINITY ? min + 1 : max;
        if (out.length + (atom.length + 5) * copies > MAX_EXPANDED_CHARS) throw new Unsupported('too long');
        let written = atom.repeat(min);
        if (max === Number.POSITIVE_INFINITY) written += `(?:${atom})*`;
        else written += '(?:'.concat(atom).repeat(max - min) + ')?'.repeat(max - min);
        out += written;
        atom = '';
        i += q[0].length;
      } else if (c === '|') {
        flush();
        out += c;
        i++;
      } else {
        flush();
        atom = c;
        i++;
      }
      if (out.length + atom.length > MAX_EXPANDED_CHARS) throw new Unsupported('too long');
    }
    flush();
    return out;
  };
  const out = sequence(0);
  if (i !== pattern.length) throw new Unsupported('unbalanced group');
  return out;
}

/**
 * ajv's regexp engine for user schemas: a pattern must be valid with `u` (as ajv checks it by default) and run on
 * the linear engine, directly or with its counted repetitions written out (`expandCountedRepetition`), else the
 * schema is refused. Refused: backreferences and lookaround (Go's RE2 refuses them too), `\p{…}` classes, and
 * counts above 1000 (as RE2).
 */
function linearRegExp(pattern: string): RegExp {
  new RegExp(pattern, 'u'); // throws the syntax error for an invalid pattern
  if (UNICODE_ONLY_SYNTAX.test(pattern)) throw new Error(`pattern ${pattern} cannot be matched in linear time`);
  try {
    return new RegExp(pattern, LINEAR);
  } catch {
    // the linear engine refuses counted repetition above 16: try the same language written out
  }
  try {
    return new RegExp(expandCountedRepetition(pattern), LINEAR);
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
  if (nodesBeyond(schema, MAX_USER_SCHEMA_NODES)) {
    return { error: `the schema holds more than ${MAX_USER_SCHEMA_NODES} objects and arrays` };
  }
  const ajv = new Ajv({
    allErrors: false,
    strict: false,
    logger: false,
    validateSchema: true,
    code: { regExp: linearRegExp },
  });
  addFormats(ajv);
  try {
    // `$async` makes ajv build a validator answering a promise: gojsonschema (OpenZiti) knows no such keyword
    const fn = ajv.compile(withoutAsync(schema) as Record<string, unknown>);
    // V8 compiles the generated validator on its first call: a stack it overflows shows here, not on a later write
    fn(null);
    return fn;
  } catch (err) {
    if (err instanceof RangeError) return { error: 'the schema is too complex to validate against' };
    return { error: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * Bound on the objects and arrays of a user schema: 1 000, twice all of OpenZiti's built-in config type schemas
 * together (471). A schema of a few thousand properties compiles to a validator whose first call overflows V8's
 * stack and takes seconds of the event loop.
 */
export const MAX_USER_SCHEMA_NODES = 1_000;

/** `schema` without any `$async` key, at any depth (a copy; bounded by MAX_USER_SCHEMA_NODES, checked before). */
function withoutAsync(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(withoutAsync);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === '$async') continue;
    // defined, not assigned: a `__proto__` key stays a key
    Object.defineProperty(out, k, { value: withoutAsync(v), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** Whether `value` holds more than `max` objects and arrays (stops counting past it; depth bounded by the body's). */
function nodesBeyond(value: unknown, max: number): boolean {
  let count = 0;
  const visit = (v: unknown): boolean => {
    if (typeof v !== 'object' || v === null) return false;
    if (++count > max) return true;
    for (const x of Array.isArray(v) ? v : Object.values(v)) if (visit(x)) return true;
    return false;
  };
  return visit(value);
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
  let err: FieldError | null;
  try {
    err = firstError(fn, value, location);
  } catch (e) {
    // a stored schema from before the bound on its size, or a value that drives its validator too deep
    if (!(e instanceof RangeError)) throw e;
    return { field: '(root)', reason: 'the config type schema is too complex to validate against', value };
  }
  if (!err) return null;
  return { ...err, field: err.field === location || err.field === '' ? '(root)' : err.field };
}
