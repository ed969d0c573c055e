/**
 * The values a stored row keeps, in the form that costs the least heap: every row lives in memory (Collection) for
 * as long as it exists, so a few bytes per field add up to megabytes.
 *
 * - Strings of their own. msgpackr decodes the strings of a message as slices of one string holding much of the
 *   message (its native string extraction), so a row made of a command's (or a LevelDB value's) strings would keep
 *   that whole string alive: about 200 bytes per row.
 * - One shared, frozen empty object and empty array for the empty values most rows hold (`tags: {}`, role attributes
 *   `[]`), instead of one of each per row. Rows are immutable once written (types.ts), so nothing may change them in
 *   place; frozen, an attempt fails loudly instead of changing every row that shares them.
 *
 * Applied to a row's own fields and to the strings of its arrays (role attributes, id lists); deeper values are kept
 * as they are. The data is the same: only where it is kept changes.
 */

/** The empty object rows share. */
export const NO_FIELDS: Readonly<Record<string, unknown>> = Object.freeze({});
/** The empty array rows share. */
export const NO_ITEMS: readonly unknown[] = Object.freeze([]);

/** Strings shorter than this are never slices of another string in V8 (it copies a slice that short). */
const SLICE_MIN_LENGTH = 13;

/** `s` in a string of its own (see the module comment). */
export function ownString(s: string): string {
  return s.length < SLICE_MIN_LENGTH ? s : JSON.parse(JSON.stringify(s));
}

/** `v` as a row keeps it (see the module comment). Arrays of strings are copied in place: they are the row's. */
export function storedValue(v: unknown): unknown {
  if (typeof v === 'string') return ownString(v);
  if (typeof v !== 'object' || v === null) return v;
  if (Array.isArray(v)) {
    if (v.length === 0) return NO_ITEMS;
    if (!Object.isFrozen(v)) for (let i = 0; i < v.length; i++) if (typeof v[i] === 'string') v[i] = ownString(v[i]);
    return v;
  }
  return Object.getPrototypeOf(v) === Object.prototype && isEmpty(v) ? NO_FIELDS : v;
}

/**
 * Replaces each field of a freshly decoded row by `storedValue` of it (the row is not shared yet); an `updatedAt`
 * equal to `createdAt` (a row never updated) shares its string, as a row written by apply does.
 */
export function storeValuesOf(row: Record<string, unknown>): void {
  for (const k in row) {
    row[k] = k === 'updatedAt' && row.updatedAt === row.createdAt ? row.createdAt : storedValue(row[k]);
  }
}

function isEmpty(o: object): boolean {
  for (const _ in o) return false;
  return true;
}
