// The untyped syntax tree produced by the parser. Types are applied by compile.ts against a SymbolTable.

import type { SourcePosition } from './errors.js';

export type CompareOp = '=' | '!=' | '<' | '<=' | '>' | '>=';

export type Literal =
  | { kind: 'string'; value: string; pos: SourcePosition }
  | { kind: 'number'; value: number; isInteger: boolean; text: string; pos: SourcePosition }
  | { kind: 'datetime'; ms: number; text: string; pos: SourcePosition }
  | { kind: 'bool'; value: boolean; pos: SourcePosition }
  | { kind: 'null'; pos: SourcePosition };

/** An identifier as written (quotes removed). */
export interface Identifier {
  name: string;
  pos: SourcePosition;
}

/** The set operand of count(...) / isEmpty(...): a set symbol, or `from <symbol> where <query>`. */
export type SetExpr = { kind: 'set'; symbol: Identifier } | { kind: 'subquery'; symbol: Identifier; query: Query };

/** Left-hand side of an operation. */
export type Lhs =
  | { kind: 'symbol'; symbol: Identifier }
  | { kind: 'anyOf' | 'allOf'; symbol: Identifier; pos: SourcePosition }
  | { kind: 'count'; set: SetExpr; pos: SourcePosition };

export type BoolExpr =
  | { kind: 'or'; operands: BoolExpr[] }
  | { kind: 'and'; operands: BoolExpr[] }
  | { kind: 'not'; operand: BoolExpr; pos: SourcePosition }
  | { kind: 'const'; value: boolean; pos: SourcePosition }
  | { kind: 'boolSymbol'; symbol: Identifier }
  | { kind: 'isEmpty'; set: SetExpr; pos: SourcePosition }
  | { kind: 'compare'; op: CompareOp; lhs: Lhs; rhs: Literal; pos: SourcePosition }
  | { kind: 'in'; negated: boolean; lhs: Lhs; values: Literal[]; pos: SourcePosition }
  | { kind: 'between'; negated: boolean; lhs: Lhs; lower: Literal; upper: Literal; pos: SourcePosition }
  | { kind: 'contains'; negated: boolean; caseInsensitive: boolean; lhs: Lhs; rhs: Literal; pos: SourcePosition };

export interface SortField {
  symbol: Identifier;
  desc: boolean;
}

export interface Query {
  /** The text this query was parsed from (reported as the error `value`). */
  source: string;
  /** null when the query has no boolean expression (empty filter, or only sort/skip/limit): matches everything. */
  filter: BoolExpr | null;
  sort: SortField[];
  skip: { value: number; pos: SourcePosition } | null;
  /** -1 for `limit none`. */
  limit: { value: number; pos: SourcePosition } | null;
}
