import { Packr } from 'msgpackr';
import { encodesAs } from './encodes-as.js';

/**
 * The state machine's one encoding (msgpackr), and the check that what is stored is what was meant: a value is
 * stored only if it decodes to the same data. msgpackr is not faithful for every JavaScript value: a lone UTF-16
 * surrogate (`"a\ud800b"`) comes back as U+FFFD (`"a\ufffdb"`), so two object keys can collapse into one; a key
 * `__proto__` comes back renamed; nesting deeper than about 1,400 arrays overflows its stack while encoding.
 * Storing such a value would acknowledge one thing and keep another (or make the data directory unstartable: a
 * unique index that held before the round trip no longer holds after it). Such values are refused instead, per
 * command: UnstorableError.
 */
export const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false });

/**
 * The deepest nesting a stored value may have. Checked explicitly before encoding: where msgpackr's recursion
 * overflows depends on the stack frames V8 happens to use (interpreted or optimised code), so relying on the
 * overflow would make the same command storable on one node and unstorable on another. The bound makes the
 * outcome a function of the value alone; it is far below msgpackr's overflow (about 1,400 levels when cold).
 */
export const MAX_STORED_DEPTH = 256;
/** Levels of object keys searched for the field that cannot be encoded (only on failure; a row's field or tag). */
const MAX_LOCATE_DEPTH = 2;

/** A value that does not survive encoding: `path` names where (`tags.k`, `data.name`; '' = the value itself). */
export class UnstorableError extends Error {
  readonly code = 'UNSTORABLE';
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(path ? `${path}: ${reason}` : reason);
    this.name = 'UnstorableError';
  }
}

const LONE_SURROGATE = /\p{Surrogate}/u;

/** A string that UTF-8 (LevelDB keys) and msgpackr carry unchanged: no lone UTF-16 surrogate. */
export function isWellFormed(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

/**
 * Encodes `value` and checks that the bytes decode to the same data (see the module comment). Returns the bytes.
 * Throws UnstorableError, never anything else.
 *
 * The check first compares the bytes with the value directly (`encodesAs`: no decoded copy, nothing allocated),
 * which proves the common value (plain objects, arrays, strings, numbers, booleans, null) reads back as written.
 * Anything that comparison does not vouch for (a difference, or a type it does not model: bytes, dates, undefined)
 * is decoded by msgpackr and compared with the value (`firstDifference`), which decides and names where it differs.
 */
export function encodeChecked(value: unknown): Uint8Array {
  const deep = deeperPart(value, MAX_STORED_DEPTH);
  if (deep !== null) {
    throw new UnstorableError(deep.reverse().join('.'), `is nested deeper than ${MAX_STORED_DEPTH} levels`);
  }
  let bytes: Uint8Array;
  try {
    bytes = packr.pack(value);
  } catch (err) {
    const reason = `cannot be encoded (${err instanceof RangeError ? 'nested too deeply' : String(err)})`;
    throw new UnstorableError(locateUnencodable(value, MAX_LOCATE_DEPTH).join('.'), reason);
  }
  if (!encodesAs(bytes, value)) checkDecoded(value, bytes);
  return bytes;
}

/** The check by decoding: msgpackr's copy of `bytes` must hold the same data as `value`. */
function checkDecoded(value: unknown, bytes: Uint8Array): void {
  let decoded: unknown;
  try {
    decoded = packr.unpack(bytes);
  } catch (err) {
    throw new UnstorableError('', `does not decode (${String(err)})`);
  }
  const diff = firstDifference(value, decoded);
  if (diff !== null) throw new UnstorableError(diff.path.reverse().join('.'), diff.reason);
}

interface Difference {
  /** Innermost segment first (built while unwinding). */
  path: string[];
  reason: string;
}

function differ(reason: string): Difference {
  return { path: [], reason };
}

/** Where `b` (the decoded copy) differs from `a` (the original), or null when they hold the same data. */
function firstDifference(a: unknown, b: unknown): Difference | null {
  if (a === b) return null;
  if (typeof a === 'number' && typeof b === 'number' && Number.isNaN(a) && Number.isNaN(b)) return null;
  if (typeof a === 'string') {
    return differ(
      isWellFormed(a)
        ? 'does not read back as written'
        : 'is not well-formed UTF-16 (a lone surrogate) and would be stored as U+FFFD',
    );
  }
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) {
    return differ('does not read back as written');
  }
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return differ('array does not read back as written');
    for (let i = 0; i < a.length; i++) {
      const d = firstDifference(a[i], b[i]);
      if (d) return within(d, String(i));
    }
    return null;
  }
  if (ArrayBuffer.isView(a)) {
    if (!ArrayBuffer.isView(b) || !sameBytes(a, b)) return differ('bytes do not read back as written');
    return null;
  }
  if (a instanceof Date) {
    return b instanceof Date && a.getTime() === b.getTime() ? null : differ('date does not read back as written');
  }
  const keys = Object.keys(a);
  for (const k of keys) {
    if (!Object.hasOwn(b, k)) {
      return within(
        differ(
          isWellFormed(k) ? 'key does not read back as written' : 'key is not well-formed UTF-16 (a lone surrogate)',
        ),
        k,
      );
    }
    const d = firstDifference((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]);
    if (d) return within(d, k);
  }
  if (Object.keys(b).length !== keys.length) return differ('keys do not read back as written');
  return null;
}

function within(d: Difference, segment: string): Difference {
  d.path.push(segment);
  return d;
}

function sameBytes(a: ArrayBufferView, b: ArrayBufferView): boolean {
  if (a.byteLength !== b.byteLength) return false;
  const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

/** The object keys leading to the part of `value` msgpackr cannot encode (searched only after a failure). */
function locateUnencodable(value: unknown, depth: number): string[] {
  if (depth === 0 || typeof value !== 'object' || value === null || Array.isArray(value)) return [];
  for (const [k, v] of Object.entries(value)) {
    try {
      packr.pack(v);
    } catch {
      return [k, ...locateUnencodable(v, depth - 1)];
    }
  }
  return [];
}

/**
 * The path (innermost segment first; object keys of the outermost two levels only) to a part of `value` nested
 * deeper than `levels` levels, or null. The one walker of the nesting bound: recursive, but at most `levels` calls
 * deep (so it cannot overflow the stack however deep the value is), and allocation-free unless the bound is exceeded
 * (the path is built while unwinding).
 */
function deeperPart(value: unknown, levels: number, depth = 0): string[] | null {
  if (typeof value !== 'object' || value === null || ArrayBuffer.isView(value) || value instanceof Date) return null;
  if (depth >= levels) return [];
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const path = deeperPart(value[i], levels, depth + 1);
      if (path !== null) return path;
    }
    return null;
  }
  for (const k in value) {
    if (!Object.hasOwn(value, k)) continue;
    const path = deeperPart((value as Record<string, unknown>)[k], levels, depth + 1);
    if (path === null) continue;
    if (depth < MAX_LOCATE_DEPTH) path.push(k);
    return path;
  }
  return null;
}
