// ZitiQL: parse → compile (type check against a SymbolTable) → execute (index plan or scan, sort, page).

export type { BoolExpr, Literal, Query, SortField } from './ast.js';
export {
  type CompiledQuery,
  type CompiledSort,
  compileQuery,
  type IndexHint,
  MAX_SORT_FIELDS,
  type RowPredicate,
} from './compile.js';
export { parseRfc3339 } from './datetime.js';
export { QueryError, type QueryErrorCode, type SourcePosition } from './errors.js';
export {
  chooseCandidates,
  executeQuery,
  ID_SYMBOL,
  type PageRequest,
  type QueryResult,
  type RowSource,
} from './executor.js';
export { MAX_FILTER_CHARS } from './lexer.js';
export { type MemorySourceOptions, memoryRowSource } from './memory-source.js';
export {
  clampLimit,
  clampOffset,
  LIST_LIMIT_DEFAULT,
  LIST_LIMIT_MAX,
  LIST_OFFSET_DEFAULT,
  LIST_OFFSET_MAX,
  type ListQueryParams,
  type ResolvedListQuery,
  resolveListQuery,
} from './pagination.js';
export { MAX_IN_VALUES, MAX_NESTING_DEPTH, parseQuery, parseSortSpec } from './parser.js';
export {
  createSymbolTable,
  isSortable,
  type QuerySymbol,
  type QuerySymbol as Symbol,
  resolveSymbol,
  type ScalarType,
  type SymbolTable,
  type SymbolTableSpec,
} from './symbols.js';
