// Typed errors of the ZitiQL module. storage/ knows nothing about HTTP: the caller maps `code` to the
// OpenZiti error envelope (INVALID_FILTER / INVALID_PAGINATION / INVALID_SORT_IDENTIFIER, all HTTP 400).

export type QueryErrorCode = 'INVALID_FILTER' | 'INVALID_PAGINATION' | 'INVALID_SORT_IDENTIFIER';

/** Where in the input text an error was found. `line` is 1-based, `column` and `offset` are 0-based (as ANTLR). */
export interface SourcePosition {
  line: number;
  column: number;
  offset: number;
}

export interface QueryErrorDetails {
  field?: string;
  value?: unknown;
  position?: SourcePosition;
}

export class QueryError extends Error {
  readonly code: QueryErrorCode;
  field?: string;
  value?: unknown;
  readonly reason: string;
  position?: SourcePosition;

  constructor(code: QueryErrorCode, reason: string, details: QueryErrorDetails = {}) {
    super(`${code}: ${reason}`);
    this.name = 'QueryError';
    this.code = code;
    this.reason = reason;
    if (details.field !== undefined) this.field = details.field;
    if (details.value !== undefined) this.value = details.value;
    if (details.position !== undefined) this.position = details.position;
  }

  /** Same error under another code/field (used when the `sort` param is parsed as a filter). */
  withCode(code: QueryErrorCode, field: string, value: unknown, position?: SourcePosition): QueryError {
    const details: QueryErrorDetails = { field, value };
    const at = position ?? this.position;
    if (at !== undefined) details.position = at;
    return new QueryError(code, this.reason, details);
  }
}

/** Throws when an internal invariant does not hold (a bug, not bad input). */
export function assert(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`zitiql invariant violated: ${message}`);
}
