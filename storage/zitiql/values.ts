// Normalisation of row values to the operand type of an operation (OpenZiti: Eval<Type> returns nil when the
// stored value does not have that type; numbers convert to strings).

import { datetimeToMs } from './datetime.js';

/** Decimal text of a number as Go's strconv.FormatFloat(v, 'f', -1, 64): never exponent notation. */
export function formatNumber(value: number): string {
  if (Number.isInteger(value) && Math.abs(value) < 1e21) return String(value);
  const text = String(value);
  if (!/e/i.test(text)) return text;
  // exponent notation (very large or very small): expand it
  if (Math.abs(value) >= 1) return BigInt(Math.round(value)).toString();
  return value.toFixed(20).replace(/0+$/, '');
}

export function isNil(value: unknown): boolean {
  return value === null || value === undefined;
}

export function toStringValue(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return Number.isNaN(value) ? null : formatNumber(value);
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString();
  return null;
}

export function toNumberValue(value: unknown): number | null {
  if (typeof value === 'number') return Number.isNaN(value) ? null : value;
  if (typeof value === 'bigint') return Number(value);
  return null;
}

export function toBoolValue(value: unknown): boolean | null {
  return typeof value === 'boolean' ? value : null;
}

export const toDatetimeValue = datetimeToMs;
