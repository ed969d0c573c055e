// Type checking of a parsed query against a SymbolTable and compilation into closures.
// Semantics follow openziti/ziti controller/storage/ast (node_convert.go, node_expr.go, node_set.go, node_arrays.go):
//  - a null/missing value fails every comparison except `!=` (true), `not contains` (true), `not in`/`not between`;
//  - a bool symbol reads null as false; `between` is half-open: lower <= x < upper;
//  - numbers convert to strings (string symbols, contains, `number in [strings]`); nothing else converts;
//  - anyOf/allOf apply the operation to each element (allOf of an empty set is true); `not in` / `not between`
//    negate the whole set function, `not contains` applies to each element.

import type { BoolExpr, Identifier, Lhs, Literal, Query, SetExpr } from './ast.js';
import { assert, QueryError, type SourcePosition } from './errors.js';
import { isSortable, type QuerySymbol, resolveSymbol, type ScalarType, type SymbolTable } from './symbols.js';
import { formatNumber, isNil, toBoolValue, toDatetimeValue, toNumberValue, toStringValue } from './values.js';

export type RowPredicate = (row: any) => boolean;

export interface CompiledSort {
  name: string;
  symbol: QuerySymbol;
  desc: boolean;
}

export interface IndexHint {
  name: string;
  values: unknown[];
}

export interface CompiledQuery {
  predicate: RowPredicate;
  /** As given (at most MAX_SORT_FIELDS; extra fields are dropped as boltz.SortMax does); the executor appends `id asc`. */
  sort: CompiledSort[];
  /** From the filter text (`skip N`), else null. */
  skip: number | null;
  /** From the filter text (`limit N`), else null; -1 = `limit none`. */
  limit: number | null;
  /** Top-level AND conjuncts answerable by an index (`f = v`, `f in [..]`, `anyOf(f) = v`, `anyOf(f) in [..]`, `id ...`). */
  indexHints: IndexHint[];
  /** True when the query has no boolean expression (or it is the constant `true`): every row matches. */
  matchesAll: boolean;
}

/** boltz.SortMax */
export const MAX_SORT_FIELDS = 5;
/** `in` lists longer than this are tested with a Set. */
const IN_SET_THRESHOLD = 8;

type ValueTest = (value: unknown) => boolean;
type Operand = 'string' | 'number' | 'datetime' | 'bool';

/** What an operation's left-hand side reads from a row. */
interface LhsPlan {
  /** type of the values tested (element type for anyOf/allOf) */
  type: ScalarType;
  describe: string;
  mode: 'scalar' | 'anyOf' | 'allOf';
  read: (row: any) => unknown;
  nullable: boolean;
}

function literalType(literal: Literal): string {
  return literal.kind;
}

function asElements(value: unknown): Iterable<unknown> | null {
  if (Array.isArray(value)) return value;
  if (value !== null && typeof value === 'object' && Symbol.iterator in value) return value as Iterable<unknown>;
  return null;
}

function countElements(value: unknown): number {
  if (Array.isArray(value)) return value.length;
  const elements = asElements(value);
  if (elements === null) return 0;
  let n = 0;
  for (const _ of elements) n++;
  return n;
}

function readerFor(operand: Operand): (value: unknown) => unknown {
  switch (operand) {
    case 'string':
      return toStringValue;
    case 'number':
      return toNumberValue;
    case 'datetime':
      return toDatetimeValue;
    case 'bool':
      return toBoolValue;
  }
}

function orderTest<T extends string | number>(op: string, read: (v: unknown) => T | null, right: T): ValueTest {
  switch (op) {
    case '=':
      return (v) => read(v) === right;
    case '!=':
      return (v) => read(v) !== right; // null != x is true, as OpenZiti
    case '<':
      return (v) => {
        const left = read(v);
        return left !== null && left < right;
      };
    case '<=':
      return (v) => {
        const left = read(v);
        return left !== null && left <= right;
      };
    case '>':
      return (v) => {
        const left = read(v);
        return left !== null && left > right;
      };
    case '>=':
      return (v) => {
        const left = read(v);
        return left !== null && left >= right;
      };
    default:
      throw new Error(`zitiql invariant violated: unknown comparison operator ${op}`);
  }
}

class Compiler {
  constructor(
    private readonly source: string,
    private readonly field: string,
  ) {}

  fail(pos: SourcePosition, reason: string): never {
    throw new QueryError('INVALID_FILTER', `line ${pos.line}:${pos.column} ${reason}`, {
      field: this.field,
      value: this.source,
      position: pos,
    });
  }

  resolve(table: SymbolTable, id: Identifier): QuerySymbol {
    const symbol = resolveSymbol(table, id.name);
    if (symbol === undefined) this.fail(id.pos, `unknown symbol '${id.name}'`);
    return symbol;
  }

  resolveScalar(table: SymbolTable, id: Identifier): QuerySymbol {
    const symbol = this.resolve(table, id);
    if (symbol.set) this.fail(id.pos, `symbol '${id.name}' is a set symbol but is used in non-set function context`);
    return symbol;
  }

  resolveSet(table: SymbolTable, id: Identifier, fn: string): QuerySymbol {
    const symbol = this.resolve(table, id);
    if (!symbol.set) this.fail(id.pos, `symbol '${id.name}' is not a set symbol but is used in set function ${fn}`);
    return symbol;
  }

  query(q: Query, table: SymbolTable): CompiledQuery {
    const predicate = q.filter === null ? () => true : this.bool(q.filter, table);
    const matchesAll = q.filter === null || (q.filter.kind === 'const' && q.filter.value);
    const sort: CompiledSort[] = [];
    for (const field of q.sort.slice(0, MAX_SORT_FIELDS)) {
      const symbol = this.resolve(table, field.symbol);
      if (symbol.set)
        this.fail(field.symbol.pos, `invalid sort field '${field.symbol.name}': set symbols cannot be sorted`);
      if (!isSortable(symbol))
        this.fail(field.symbol.pos, `invalid sort field '${field.symbol.name}': symbol is not sortable`);
      sort.push({ name: field.symbol.name, symbol, desc: field.desc });
    }
    const indexHints = q.filter === null ? [] : this.indexHints(q.filter, table);
    return {
      predicate: matchesAll ? () => true : predicate,
      sort,
      skip: q.skip === null ? null : q.skip.value,
      limit: q.limit === null ? null : q.limit.value,
      indexHints,
      matchesAll,
    };
  }

  bool(expr: BoolExpr, table: SymbolTable): RowPredicate {
    switch (expr.kind) {
      case 'or': {
        const parts = expr.operands.map((operand) => this.bool(operand, table));
        assert(parts.length >= 2, 'or has at least two operands');
        if (parts.length === 2) {
          const [a, b] = parts as [RowPredicate, RowPredicate];
          return (row) => a(row) || b(row);
        }
        return (row) => {
          for (const part of parts) if (part(row)) return true;
          return false;
        };
      }
      case 'and': {
        const parts = expr.operands.map((operand) => this.bool(operand, table));
        assert(parts.length >= 2, 'and has at least two operands');
        if (parts.length === 2) {
          const [a, b] = parts as [RowPredicate, RowPredicate];
          return (row) => a(row) && b(row);
        }
        return (row) => {
          for (const part of parts) if (!part(row)) return false;
          return true;
        };
      }
      case 'not': {
        const inner = this.bool(expr.operand, table);
        return (row) => !inner(row);
      }
      case 'const': {
        const value = expr.value;
        return () => value;
      }
      case 'boolSymbol': {
        const symbol = this.resolveScalar(table, expr.symbol);
        if (symbol.type !== 'bool' && symbol.type !== 'any') {
          this.fail(
            expr.symbol.pos,
            `symbol '${expr.symbol.name}' is of type ${symbol.type}, not bool, and cannot be used as a boolean expression`,
          );
        }
        const get = symbol.get;
        return (row) => get(row) === true;
      }
      case 'isEmpty': {
        const count = this.setCounter(expr.set, table, 'isEmpty', true);
        return (row) => count(row) === 0;
      }
      case 'compare':
      case 'in':
      case 'between':
      case 'contains':
        return this.operation(expr, table);
    }
  }

  /** Counts the elements of a set expression (stopAtOne: only emptiness matters). */
  setCounter(set: SetExpr, table: SymbolTable, fn: string, stopAtOne: boolean): (row: any) => number {
    if (set.kind === 'set') {
      const symbol = this.resolveSet(table, set.symbol, fn);
      const get = symbol.get;
      return (row) => countElements(get(row));
    }
    const symbol = this.resolve(table, set.symbol);
    if (symbol.relation === undefined)
      this.fail(set.symbol.pos, `attempt to subquery on non-entity symbol ${set.symbol.name}`);
    const relation = symbol.relation;
    const inner = this.query(set.query, relation.symbols);
    const predicate = inner.predicate;
    return (row) => {
      let n = 0;
      for (const related of relation.rows(row)) {
        if (predicate(related)) {
          n++;
          if (stopAtOne) return n;
        }
      }
      return n;
    };
  }

  lhs(lhs: Lhs, table: SymbolTable): LhsPlan {
    switch (lhs.kind) {
      case 'symbol': {
        const symbol = this.resolveScalar(table, lhs.symbol);
        return {
          type: symbol.type,
          describe: `symbol '${lhs.symbol.name}'`,
          mode: 'scalar',
          read: symbol.get,
          nullable: true,
        };
      }
      case 'anyOf':
      case 'allOf': {
        const symbol = this.resolveSet(table, lhs.symbol, lhs.kind);
        return {
          type: symbol.type,
          describe: `${lhs.kind}(${lhs.symbol.name})`,
          mode: lhs.kind,
          read: symbol.get,
          nullable: true,
        };
      }
      case 'count': {
        const count = this.setCounter(lhs.set, table, 'count', false);
        return {
          type: 'number',
          describe: `count(${lhs.set.symbol.name})`,
          mode: 'scalar',
          read: count,
          nullable: false,
        };
      }
    }
  }

  unsupported(pos: SourcePosition, op: string, lhs: LhsPlan, right: string): never {
    return this.fail(
      pos,
      `operation '${op}' is not supported with operand types ${lhs.type} (${lhs.describe}) and ${right}`,
    );
  }

  /** The operand type of an operation whose literal has type `literal`, or null when the pair is not supported. */
  operandType(lhsType: ScalarType, literal: Operand, allowNumberToString: boolean): Operand | null {
    if (lhsType === 'any') return literal;
    if (lhsType === literal) return literal;
    if (lhsType === 'string' && literal === 'number' && allowNumberToString) return 'string';
    return null;
  }

  operation(
    expr: Extract<BoolExpr, { kind: 'compare' | 'in' | 'between' | 'contains' }>,
    table: SymbolTable,
  ): RowPredicate {
    const lhs = this.lhs(expr.lhs, table);
    let test: ValueTest;
    let negateOutside = false;
    switch (expr.kind) {
      case 'compare':
        test = this.compareTest(expr.op, expr.rhs, lhs, expr.pos);
        break;
      case 'in':
        test = this.inTest(expr.values, lhs, expr.pos);
        negateOutside = expr.negated;
        break;
      case 'between':
        test = this.betweenTest(expr.lower, expr.upper, lhs, expr.pos);
        negateOutside = expr.negated;
        break;
      case 'contains':
        test = this.containsTest(expr.negated, expr.caseInsensitive, expr.rhs, lhs, expr.pos);
        break;
    }
    const read = lhs.read;
    let predicate: RowPredicate;
    switch (lhs.mode) {
      case 'scalar':
        predicate = (row) => test(read(row));
        break;
      case 'anyOf':
        predicate = (row) => {
          const elements = asElements(read(row));
          if (elements === null) return false;
          for (const element of elements) if (test(element)) return true;
          return false;
        };
        break;
      case 'allOf':
        predicate = (row) => {
          const elements = asElements(read(row));
          if (elements === null) return true;
          for (const element of elements) if (!test(element)) return false;
          return true;
        };
        break;
    }
    if (!negateOutside) return predicate;
    const positive = predicate;
    return (row) => !positive(row);
  }

  compareTest(op: string, rhs: Literal, lhs: LhsPlan, pos: SourcePosition): ValueTest {
    if (rhs.kind === 'null') {
      if (!lhs.nullable) this.unsupported(pos, op, lhs, 'null');
      assert(op === '=' || op === '!=', 'the parser only allows = and != with null');
      return op === '=' ? (v) => isNil(v) : (v) => !isNil(v);
    }
    const operand = this.operandType(lhs.type, rhs.kind, true);
    if (operand === null) this.unsupported(pos, op, lhs, literalType(rhs));
    switch (operand) {
      case 'string': {
        const right =
          rhs.kind === 'string' ? rhs.value : formatNumber((rhs as Extract<Literal, { kind: 'number' }>).value);
        return orderTest(op, toStringValue, right);
      }
      case 'number':
        assert(rhs.kind === 'number', 'number operand has a number literal');
        return orderTest(op, toNumberValue, rhs.value);
      case 'datetime':
        assert(rhs.kind === 'datetime', 'datetime operand has a datetime literal');
        return orderTest(op, toDatetimeValue, rhs.ms);
      case 'bool': {
        assert(rhs.kind === 'bool', 'bool operand has a bool literal');
        if (op !== '=' && op !== '!=') this.unsupported(pos, op, lhs, 'bool');
        const right = rhs.value;
        // OpenZiti's BoolSymbolNode evaluates a missing value as false
        return op === '=' ? (v) => (v === true) === right : (v) => (v === true) !== right;
      }
    }
  }

  inTest(values: Literal[], lhs: LhsPlan, pos: SourcePosition): ValueTest {
    const first = values[0];
    assert(first !== undefined, 'the parser rejects empty in lists');
    assert(first.kind === 'string' || first.kind === 'number' || first.kind === 'datetime', 'in list literal kinds');
    let operand = this.operandType(lhs.type, first.kind, true);
    // OpenZiti quirk (InArrayExprNode): a number symbol is a StringNode, so `num in ["1","2"]` compares as strings
    if (operand === null && lhs.type === 'number' && first.kind === 'string') operand = 'string';
    if (operand === null) this.unsupported(pos, 'in', lhs, `${first.kind} array`);
    const constants: (string | number)[] = values.map((literal) => {
      switch (literal.kind) {
        case 'string':
          return literal.value;
        case 'number':
          return operand === 'string' ? formatNumber(literal.value) : literal.value;
        case 'datetime':
          return literal.ms;
        default:
          throw new Error('zitiql invariant violated: in list literal kinds');
      }
    });
    const read = readerFor(operand);
    if (constants.length > IN_SET_THRESHOLD) {
      const set = new Set<unknown>(constants);
      return (v) => {
        const left = read(v);
        return left !== null && set.has(left);
      };
    }
    return (v) => {
      const left = read(v);
      return left !== null && constants.includes(left as string | number);
    };
  }

  betweenTest(lower: Literal, upper: Literal, lhs: LhsPlan, pos: SourcePosition): ValueTest {
    assert(lower.kind === upper.kind, 'the parser checks between bounds have one type');
    assert(lower.kind === 'number' || lower.kind === 'datetime', 'between bounds are numbers or datetimes');
    const operand = this.operandType(lhs.type, lower.kind, false);
    if (operand === null) this.unsupported(pos, 'between', lhs, `${lower.kind}s`);
    const low = lower.kind === 'number' ? lower.value : (lower as Extract<Literal, { kind: 'datetime' }>).ms;
    const high = upper.kind === 'number' ? upper.value : (upper as Extract<Literal, { kind: 'datetime' }>).ms;
    const read = operand === 'number' ? toNumberValue : toDatetimeValue;
    return (v) => {
      const left = read(v);
      return left !== null && left >= low && left < high;
    };
  }

  containsTest(negated: boolean, caseInsensitive: boolean, rhs: Literal, lhs: LhsPlan, pos: SourcePosition): ValueTest {
    const op = `${negated ? 'not ' : ''}${caseInsensitive ? 'icontains' : 'contains'}`;
    if (lhs.type === 'bool' || lhs.type === 'datetime') this.unsupported(pos, op, lhs, literalType(rhs));
    assert(rhs.kind === 'string' || rhs.kind === 'number', 'the parser allows contains with strings and numbers');
    const raw = rhs.kind === 'string' ? rhs.value : formatNumber(rhs.value);
    const needle = caseInsensitive ? raw.toLowerCase() : raw;
    if (caseInsensitive) {
      return negated
        ? (v) => {
            const s = toStringValue(v);
            return s === null || !s.toLowerCase().includes(needle);
          }
        : (v) => {
            const s = toStringValue(v);
            if (s === null) return false;
            return s.toLowerCase().includes(needle);
          };
    }
    return negated
      ? (v) => {
          const s = typeof v === 'string' ? v : toStringValue(v);
          return s === null || !s.includes(needle);
        }
      : (v) => {
          const s = typeof v === 'string' ? v : toStringValue(v);
          if (s === null) return false;
          return s.includes(needle);
        };
  }

  /** Index hints from the top-level AND conjuncts (symbols already validated by bool()). */
  indexHints(filter: BoolExpr, table: SymbolTable): IndexHint[] {
    const conjuncts: BoolExpr[] = [];
    const flatten = (e: BoolExpr): void => {
      if (e.kind === 'and') for (const operand of e.operands) flatten(operand);
      else conjuncts.push(e);
    };
    flatten(filter); // recursion depth is bounded by the parser's MAX_NESTING_DEPTH
    const hints: IndexHint[] = [];
    for (const conjunct of conjuncts) {
      let lhs: Lhs;
      let literals: Literal[];
      if (conjunct.kind === 'compare' && conjunct.op === '=') {
        lhs = conjunct.lhs;
        literals = [conjunct.rhs];
      } else if (conjunct.kind === 'in' && !conjunct.negated) {
        lhs = conjunct.lhs;
        literals = conjunct.values;
      } else {
        continue;
      }
      if (lhs.kind !== 'symbol' && lhs.kind !== 'anyOf') continue;
      const name = lhs.symbol.name;
      const symbol = resolveSymbol(table, name);
      assert(symbol !== undefined, 'hint symbols were resolved by bool()');
      const isId = name === 'id' && lhs.kind === 'symbol';
      if (!isId && symbol.indexed !== true) continue;
      const values = this.hintValues(symbol.type, literals);
      // a row without the field reads as `absentAs`, and is not in the index under it
      if (values !== null && symbol.absentAs !== undefined && values.includes(symbol.absentAs)) continue;
      if (values !== null) hints.push({ name, values: [...new Set(values)] });
    }
    return hints;
  }

  /** Index keys for literals, or null when equality on the index would not match the predicate exactly. */
  hintValues(type: ScalarType, literals: Literal[]): unknown[] | null {
    const values: unknown[] = [];
    for (const literal of literals) {
      if (literal.kind === 'string' && (type === 'string' || type === 'any')) values.push(literal.value);
      else if (literal.kind === 'number' && type === 'string') values.push(formatNumber(literal.value));
      else if (literal.kind === 'number' && (type === 'number' || type === 'any')) values.push(literal.value);
      else return null;
    }
    return values;
  }
}

/** Type-checks a parsed query against the symbols and compiles it. Throws QueryError('INVALID_FILTER'). */
export function compileQuery(q: Query, symbols: SymbolTable): CompiledQuery {
  return new Compiler(q.source, 'filter').query(q, symbols);
}
