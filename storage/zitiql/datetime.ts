// RFC 3339 date-times as epoch milliseconds (a float: fractions below 1 ms are kept to ~1 µs precision).

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

const MAX_FRACTION_DIGITS = 9;

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return isLeapYear(year) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

export type DatetimeParse = { ok: true; ms: number } | { ok: false; reason: string };

/** Parses an RFC 3339 date-time (`2021-01-01T00:00:00Z`, `2021-01-01t10:00:00.5+02:00`). */
export function parseRfc3339(text: string): DatetimeParse {
  const m = RFC3339.exec(text);
  if (m === null) return { ok: false, reason: `'${text}' is not an RFC 3339 date-time` };
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  const hour = Number(m[4]);
  const minute = Number(m[5]);
  const second = Number(m[6]);
  if (month < 1 || month > 12) return { ok: false, reason: `month out of range in '${text}'` };
  if (day < 1 || day > daysInMonth(year, month)) return { ok: false, reason: `day out of range in '${text}'` };
  if (hour > 23) return { ok: false, reason: `hour out of range in '${text}'` };
  if (minute > 59) return { ok: false, reason: `minute out of range in '${text}'` };
  if (second > 59) return { ok: false, reason: `second out of range in '${text}'` };
  let offsetMinutes = 0;
  if (m[8] === undefined) {
    const offsetHour = Number(m[10]);
    const offsetMinute = Number(m[11]);
    if (offsetHour > 23 || offsetMinute > 59)
      return { ok: false, reason: `time zone offset out of range in '${text}'` };
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (offsetHour * 60 + offsetMinute);
  }
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, 0);
  const fraction = m[7];
  let fractionMs = 0;
  if (fraction !== undefined) {
    const digits = fraction.slice(0, MAX_FRACTION_DIGITS);
    fractionMs = Number(digits) / 10 ** (digits.length - 3);
  }
  return { ok: true, ms: date.getTime() - offsetMinutes * 60_000 + fractionMs };
}

/** `YYYY-MM-DDTHH:MM:SS[.mmm]Z` (Date#toISOString): Date.parse reads it exactly and much faster than the regex. */
function looksCanonicalUtc(text: string): boolean {
  const n = text.length;
  return (n === 24 || n === 20) && text.charCodeAt(n - 1) === 90 /* Z */ && text.charCodeAt(10) === 84 /* T */;
}

/** A row value of a datetime symbol as epoch ms: Date, epoch ms number or ISO-8601 string; anything else → null. */
export function datetimeToMs(value: unknown): number | null {
  if (typeof value === 'string') {
    if (looksCanonicalUtc(value)) {
      const ms = Date.parse(value);
      if (!Number.isNaN(ms)) return ms;
    }
    const parsed = parseRfc3339(value);
    if (parsed.ok) return parsed.ms;
    const ms = Date.parse(value);
    return Number.isNaN(ms) ? null : ms;
  }
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (value instanceof Date) {
    const ms = value.getTime();
    return Number.isNaN(ms) ? null : ms;
  }
  return null;
}
