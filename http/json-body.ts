// Request-body JSON at the input boundary: one linear scan of the bytes bounds the nesting depth and spots
// UTF-16 surrogate escapes, then JSON.parse, then (only when the scan saw a surrogate escape) every string,
// keys included, is made well-formed the way Go's encoding/json decodes (OpenZiti's decoder): a lone
// surrogate becomes U+FFFD. Invalid UTF-8 bytes already become U+FFFD when the bytes are decoded.
import { Errors } from './errors.js';

/**
 * Deepest accepted nesting of arrays and objects in a request body (the body itself is level 1). Go's decoder
 * allows 10 000; Keel's store encoder (msgpackr) overflows its stack around 1 300, so bodies are bounded far
 * below that, at parse time, with 400 COULD_NOT_VALIDATE.
 */
export const MAX_JSON_DEPTH = 64;

/** ES2024 String methods (Node 20 has them; the project's TypeScript lib is ES2023). */
interface WellFormed {
  isWellFormed(): boolean;
  toWellFormed(): string;
}

/** `s` with every lone surrogate replaced by U+FFFD (the same string when already well-formed). */
export function toWellFormed(s: string): string {
  const w = s as unknown as WellFormed;
  return w.isWellFormed() ? s : w.toWellFormed();
}

function isWellFormed(s: string): boolean {
  return (s as unknown as WellFormed).isWellFormed();
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const LOWER_U = 0x75;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const LOWER_E = 0x65;
const UPPER_E = 0x45;
/** A number written with more characters than this may be beyond a double's range (the largest is 309 digits). */
const LONG_NUMBER_CHARS = 300;

/** `\uD800`..`\uDFFF`: the byte after `\u` is d/D and the next one is 8..f. */
function isSurrogateEscape(bytes: Uint8Array, i: number): boolean {
  const a = bytes[i + 2];
  if (a !== 0x64 && a !== 0x44) return false;
  const b = bytes[i + 3];
  if (b === undefined) return false;
  return (b >= 0x38 && b <= 0x39) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46);
}

export interface JsonScan {
  /** The scan found a `\uD800`-`\uDFFF` escape inside a string (the parsed value may hold lone surrogates). */
  surrogateEscape: boolean;
  /**
   * The scan found a number with an exponent or of more than LONG_NUMBER_CHARS characters: it may be beyond a
   * double's range (`1e400`, 400 digits), which JSON.parse turns into Infinity.
   */
  largeNumber: boolean;
  /** Deepest nesting seen, or MAX_JSON_DEPTH + 1 when the scan stopped at the bound. */
  depth: number;
  /** The top-level object key under which the bound was crossed ('' when unknown). */
  field: string;
}

/**
 * One pass over the bytes, strings skipped (escapes included): the nesting depth of `[`/`{` and whether a
 * surrogate escape occurs. Malformed JSON is left to JSON.parse; the scan only needs to be right for valid JSON.
 */
export function scanJson(bytes: Uint8Array, maxDepth = MAX_JSON_DEPTH): JsonScan {
  let depth = 0;
  let deepest = 0;
  let surrogateEscape = false;
  let largeNumber = false;
  /** Characters of the number being read (outside strings: digits, `-`, `+`, `.`, `e`, `E` after a digit). */
  let numberChars = 0;
  let inString = false;
  // the last string that opened at depth 1 right after `{` or `,`: a top-level key
  let keyStart = -1;
  let keyEnd = -1;
  let stringStart = -1;
  let lastSignificant = 0;
  let topIsObject = false;
  const n = bytes.length;
  for (let i = 0; i < n; i++) {
    const c = bytes[i]!;
    if (inString) {
      if (c === BACKSLASH) {
        if (bytes[i + 1] === LOWER_U && isSurrogateEscape(bytes, i)) surrogateEscape = true;
        i++; // the escaped character cannot end the string
      } else if (c === QUOTE) {
        inString = false;
        if (stringStart !== -1) {
          keyStart = stringStart;
          keyEnd = i + 1;
          stringStart = -1;
        }
      }
      continue;
    }
    if ((c >= DIGIT_0 && c <= DIGIT_9) || c === MINUS || c === PLUS || c === DOT) {
      if (++numberChars > LONG_NUMBER_CHARS) largeNumber = true;
    } else if ((c === LOWER_E || c === UPPER_E) && numberChars > 0) {
      largeNumber = true;
      numberChars++;
    } else {
      numberChars = 0;
    }
    if (c === QUOTE) {
      inString = true;
      if (depth === 1 && topIsObject && (lastSignificant === OPEN_BRACE || lastSignificant === COMMA)) stringStart = i;
      lastSignificant = c;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (depth === 0) topIsObject = c === OPEN_BRACE;
      depth++;
      if (depth > deepest) deepest = depth;
      if (depth > maxDepth) return { surrogateEscape, largeNumber, depth, field: keyText(bytes, keyStart, keyEnd) };
      lastSignificant = c;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
      lastSignificant = c;
    } else if (c > 0x20) {
      lastSignificant = c;
    }
  }
  return { surrogateEscape, largeNumber, depth: deepest, field: '' };
}

function keyText(bytes: Uint8Array, start: number, end: number): string {
  if (start === -1) return '';
  try {
    const key: unknown = JSON.parse(Buffer.from(bytes.subarray(start, end)).toString('utf8'));
    return typeof key === 'string' ? toWellFormed(key) : '';
  } catch {
    return '';
  }
}

/**
 * Every string in a parsed JSON value made well-formed (lone surrogates → U+FFFD), object keys included. Keys
 * that become equal merge with the later one winning, as Go's decoder fills a map. Depth is already bounded.
 */
export function wellFormedJson(value: unknown): unknown {
  if (typeof value === 'string') return toWellFormed(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = wellFormedJson(value[i]);
    return value;
  }
  if (typeof value !== 'object' || value === null) return value;
  const obj = value as Record<string, unknown>;
  let clean = true;
  for (const key of Object.keys(obj)) {
    if (!isWellFormed(key)) {
      clean = false;
      break;
    }
  }
  if (clean) {
    for (const key of Object.keys(obj)) obj[key] = wellFormedJson(obj[key]);
    return obj;
  }
  // rebuild in key order; JSON.parse gave `__proto__` as an own key, so define rather than assign
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(obj)) {
    const k = toWellFormed(key);
    if (Object.hasOwn(out, k)) delete out[k]; // the later key wins, at the later position
    Object.defineProperty(out, k, {
      value: wellFormedJson(obj[key]),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

/** The cause of every COULD_NOT_PARSE_BODY: it says what, never quotes the body. */
export const JSON_PARSE_FAILED = 'the body is not valid JSON';

/**
 * Parses a request body: depth bound (400 COULD_NOT_VALIDATE naming the top-level field, or `body`), then
 * JSON.parse (400 COULD_NOT_PARSE_BODY), then well-formed strings.
 */
export function parseJsonBody(body: Buffer): unknown {
  const scan = scanJson(body);
  if (scan.depth > MAX_JSON_DEPTH) {
    throw Errors.COULD_NOT_VALIDATE({
      field: scan.field === '' ? 'body' : scan.field,
      reason: `nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`,
      value: '',
    });
  }
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    // not JSON.parse's message: V8 quotes the text around the fault, which may be a credential sent unquoted
    throw Errors.COULD_NOT_PARSE_BODY({ code: 'UNHANDLED', message: JSON_PARSE_FAILED });
  }
  if (scan.largeNumber) {
    const at = nonFinitePath(value);
    if (at !== null) {
      throw Errors.COULD_NOT_VALIDATE({
        field: at.reverse().join('.') || 'body',
        reason: 'number out of range (beyond a 64-bit float)',
        value: '',
      });
    }
  }
  return scan.surrogateEscape ? wellFormedJson(value) : value;
}

/**
 * Where in a parsed body a number is not finite (JSON.parse gives Infinity for `1e400`), innermost segment first,
 * or null. Go's decoder refuses such a number; stored, it would read back as null. Depth is already bounded.
 */
function nonFinitePath(value: unknown): string[] | null {
  if (typeof value === 'number') return Number.isFinite(value) ? null : [];
  if (typeof value !== 'object' || value === null) return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const at = nonFinitePath(value[i]);
      if (at !== null) return [...at, String(i)];
    }
    return null;
  }
  for (const key of Object.keys(value)) {
    const at = nonFinitePath((value as Record<string, unknown>)[key]);
    if (at !== null) return [...at, toWellFormed(key)];
  }
  return null;
}
