// Recursive-descent ZitiQL parser. Grammar (precedence low → high): or, and, not, primary.
//   query     := [boolExpr] [SORT BY sortField (',' sortField)*] [SKIP int] [LIMIT (int | NONE)]
//   boolExpr  := andExpr (OR andExpr)*          andExpr := unary (AND unary)*
//   unary     := NOT unary | primary
//   primary   := '(' boolExpr ')' | TRUE | FALSE | ISEMPTY '(' setExpr ')' | IDENT /* bool symbol */ | operation
//   operation := lhs op literal | lhs [NOT] IN '[' literal, ... ']' | lhs [NOT] BETWEEN lit AND lit
//              | lhs [NOT] (CONTAINS | ICONTAINS) (STRING | NUMBER)
//   lhs       := IDENT | ANYOF '(' IDENT ')' | ALLOF '(' IDENT ')' | COUNT '(' setExpr ')'
//   setExpr   := IDENT | FROM IDENT WHERE query

import type { BoolExpr, CompareOp, Identifier, Lhs, Literal, Query, SetExpr, SortField } from './ast.js';
import { assert, QueryError, type SourcePosition } from './errors.js';
import { displayText, type Keyword, type Token, tokenize } from './lexer.js';

/** Deepest nesting of parentheses, `not` and sub-queries accepted. */
export const MAX_NESTING_DEPTH = 64;
/** Most values accepted in one `in [...]` list. */
export const MAX_IN_VALUES = 10_000;

const EXPECT_BOOL_EXPR = "{'(', NOT, TRUE, FALSE, ISEMPTY, ANYOF, ALLOF, COUNT, IDENTIFIER}";
const EXPECT_OPERATOR =
  "{'=', '!=', '<', '<=', '>', '>=', IN, NOT IN, BETWEEN, NOT BETWEEN, CONTAINS, NOT CONTAINS, ICONTAINS, NOT ICONTAINS}";

function describe(token: Token): string {
  return `'${displayText(token.text)}'`;
}

class Parser {
  private index = 0;
  private depth = 0;

  constructor(
    private readonly tokens: Token[],
    private readonly source: string,
    private readonly field: string,
  ) {
    assert(tokens.length > 0 && tokens[tokens.length - 1]!.kind === 'eof', 'token list ends with eof');
  }

  private peek(ahead = 0): Token {
    const i = Math.min(this.index + ahead, this.tokens.length - 1);
    return this.tokens[i]!;
  }

  private next(): Token {
    const token = this.peek();
    if (token.kind !== 'eof') this.index++;
    return token;
  }

  private isKeyword(token: Token, keyword: Keyword): boolean {
    return token.kind === 'keyword' && token.keyword === keyword;
  }

  private failAt(pos: SourcePosition, reason: string): never {
    throw new QueryError('INVALID_FILTER', `line ${pos.line}:${pos.column} ${reason}`, {
      field: this.field,
      value: this.source,
      position: pos,
    });
  }

  private mismatch(token: Token, expecting: string): never {
    return this.failAt(token.pos, `mismatched input ${describe(token)} expecting ${expecting}`);
  }

  private expect(kind: 'lparen' | 'rparen' | 'lbracket' | 'rbracket', text: string): Token {
    const token = this.next();
    if (token.kind !== kind) this.mismatch(token, `'${text}'`);
    return token;
  }

  private expectKeyword(keyword: Keyword): Token {
    const token = this.next();
    if (!this.isKeyword(token, keyword)) this.mismatch(token, keyword.toUpperCase());
    return token;
  }

  private expectIdentifier(): Identifier {
    const token = this.next();
    if (token.kind !== 'ident') this.mismatch(token, 'IDENTIFIER');
    return { name: token.name, pos: token.pos };
  }

  private enter(pos: SourcePosition): void {
    this.depth++;
    if (this.depth > MAX_NESTING_DEPTH) this.failAt(pos, `filter is nested more than ${MAX_NESTING_DEPTH} levels deep`);
  }

  private leave(): void {
    this.depth--;
    assert(this.depth >= 0, 'nesting depth below zero');
  }

  parseTop(): Query {
    const query = this.parseQuery(true);
    const end = this.peek();
    assert(end.kind === 'eof', 'parseQuery(top) stops at eof');
    return query;
  }

  /** Parses sort fields (the `sort` query param), then optional skip/limit, then EOF. */
  parseSortSpec(): Query {
    const sort = this.parseSortFields();
    const query: Query = { source: this.source, filter: null, sort, skip: null, limit: null };
    this.parseSkipLimit(query);
    const end = this.peek();
    if (end.kind !== 'eof') {
      this.mismatch(
        end,
        query.limit !== null
          ? '<EOF>'
          : query.skip !== null
            ? '{LIMIT, <EOF>}'
            : "{',', ASC, DESC, SKIP, LIMIT, <EOF>}",
      );
    }
    return query;
  }

  /** A query ends at EOF (top level) or before ')' (sub-query). */
  private parseQuery(top: boolean): Query {
    const query: Query = { source: this.source, filter: null, sort: [], skip: null, limit: null };
    const first = this.peek();
    const clauseStart =
      this.isKeyword(first, 'sort') || this.isKeyword(first, 'skip') || this.isKeyword(first, 'limit');
    if (!clauseStart && !(top && first.kind === 'eof')) query.filter = this.parseOr();
    if (this.isKeyword(this.peek(), 'sort')) {
      this.next();
      this.expectKeyword('by');
      query.sort = this.parseSortFields();
    }
    this.parseSkipLimit(query);
    const end = this.peek();
    const endKind = top ? 'eof' : 'rparen';
    if (end.kind !== endKind) {
      const options: string[] = [];
      if (query.filter !== null && query.sort.length === 0 && query.skip === null && query.limit === null) {
        options.push('AND', 'OR');
      }
      if (query.sort.length > 0 && query.skip === null && query.limit === null) options.push("','", 'ASC', 'DESC');
      if (query.sort.length === 0 && query.skip === null && query.limit === null) options.push('SORT BY');
      if (query.skip === null && query.limit === null) options.push('SKIP');
      if (query.limit === null) options.push('LIMIT');
      options.push(top ? '<EOF>' : "')'");
      this.mismatch(end, options.length === 1 ? options[0]! : `{${options.join(', ')}}`);
    }
    return query;
  }

  private parseSkipLimit(query: Query): void {
    if (this.isKeyword(this.peek(), 'skip')) {
      this.next();
      const token = this.next();
      if (token.kind !== 'number') this.mismatch(token, 'NUMBER');
      if (!token.isInteger) this.failAt(token.pos, `expected integer value for skip, but got ${token.text}`);
      query.skip = { value: token.value, pos: token.pos };
    }
    if (this.isKeyword(this.peek(), 'limit')) {
      this.next();
      const token = this.next();
      if (this.isKeyword(token, 'none')) {
        query.limit = { value: -1, pos: token.pos };
      } else {
        if (token.kind !== 'number') this.mismatch(token, '{NUMBER, NONE}');
        if (!token.isInteger) this.failAt(token.pos, `expected integer value for limit, but got ${token.text}`);
        query.limit = { value: token.value, pos: token.pos };
      }
    }
  }

  private parseSortFields(): SortField[] {
    const fields: SortField[] = [];
    // bounded by the token count: every iteration consumes an identifier
    while (true) {
      const symbol = this.expectIdentifier();
      let desc = false;
      const direction = this.peek();
      if (this.isKeyword(direction, 'asc') || this.isKeyword(direction, 'desc')) {
        this.next();
        desc = this.isKeyword(direction, 'desc');
      }
      fields.push({ symbol, desc });
      if (this.peek().kind !== 'comma') return fields;
      this.next();
    }
  }

  private parseOr(): BoolExpr {
    const first = this.parseAnd();
    if (!this.isKeyword(this.peek(), 'or')) return first;
    const operands = [first];
    while (this.isKeyword(this.peek(), 'or')) {
      this.next();
      operands.push(this.parseAnd());
    }
    return { kind: 'or', operands };
  }

  private parseAnd(): BoolExpr {
    const first = this.parseUnary();
    if (!this.isKeyword(this.peek(), 'and')) return first;
    const operands = [first];
    while (this.isKeyword(this.peek(), 'and')) {
      this.next();
      operands.push(this.parseUnary());
    }
    return { kind: 'and', operands };
  }

  private parseUnary(): BoolExpr {
    const token = this.peek();
    if (!this.isKeyword(token, 'not')) return this.parsePrimary();
    this.next();
    this.enter(token.pos);
    const operand = this.parseUnary();
    this.leave();
    return { kind: 'not', operand, pos: token.pos };
  }

  private parsePrimary(): BoolExpr {
    const token = this.peek();
    switch (token.kind) {
      case 'lparen': {
        this.next();
        this.enter(token.pos);
        const inner = this.parseOr();
        this.leave();
        this.expect('rparen', ')');
        return inner;
      }
      case 'ident': {
        if (this.isOperationStart(this.peek(1))) {
          this.next();
          return this.parseOperation({ kind: 'symbol', symbol: { name: token.name, pos: token.pos } }, token.pos);
        }
        this.next();
        return { kind: 'boolSymbol', symbol: { name: token.name, pos: token.pos } };
      }
      case 'keyword':
        switch (token.keyword) {
          case 'true':
          case 'false':
            this.next();
            return { kind: 'const', value: token.keyword === 'true', pos: token.pos };
          case 'isempty': {
            this.next();
            this.expect('lparen', '(');
            const set = this.parseSetExpr();
            this.expect('rparen', ')');
            return { kind: 'isEmpty', set, pos: token.pos };
          }
          case 'anyof':
          case 'allof': {
            this.next();
            this.expect('lparen', '(');
            const symbol = this.expectIdentifier();
            this.expect('rparen', ')');
            const kind = token.keyword === 'anyof' ? 'anyOf' : 'allOf';
            return this.parseOperation({ kind, symbol, pos: token.pos }, token.pos);
          }
          case 'count': {
            this.next();
            this.expect('lparen', '(');
            const set = this.parseSetExpr();
            this.expect('rparen', ')');
            return this.parseOperation({ kind: 'count', set, pos: token.pos }, token.pos);
          }
          default:
            break;
        }
        break;
      default:
        break;
    }
    return this.mismatch(token, EXPECT_BOOL_EXPR);
  }

  private isOperationStart(token: Token): boolean {
    if (token.kind === 'op') return true;
    if (token.kind !== 'keyword') return false;
    const k = token.keyword;
    return k === 'in' || k === 'between' || k === 'contains' || k === 'icontains' || k === 'not';
  }

  private parseSetExpr(): SetExpr {
    const token = this.peek();
    if (this.isKeyword(token, 'from')) {
      this.next();
      const symbol = this.expectIdentifier();
      this.expectKeyword('where');
      this.enter(token.pos);
      const query = this.parseQuery(false);
      this.leave();
      return { kind: 'subquery', symbol, query };
    }
    if (token.kind !== 'ident') this.mismatch(token, '{FROM, IDENTIFIER}');
    this.next();
    return { kind: 'set', symbol: { name: token.name, pos: token.pos } };
  }

  private parseOperation(lhs: Lhs, pos: SourcePosition): BoolExpr {
    const token = this.next();
    if (token.kind === 'op') {
      const op: CompareOp = token.op;
      const ordering = op !== '=' && op !== '!=';
      const rhs = this.parseLiteral(ordering ? '{STRING, NUMBER, DATETIME}' : '{STRING, NUMBER, DATETIME, BOOL, NULL}');
      if (ordering && (rhs.kind === 'bool' || rhs.kind === 'null')) {
        this.mismatch(this.tokens[this.index - 1]!, '{STRING, NUMBER, DATETIME}');
      }
      return { kind: 'compare', op, lhs, rhs, pos };
    }
    let negated = false;
    let opToken: Token = token;
    if (this.isKeyword(token, 'not')) {
      negated = true;
      opToken = this.next();
      if (opToken.kind !== 'keyword' || !['in', 'between', 'contains', 'icontains'].includes(opToken.keyword)) {
        this.mismatch(opToken, '{IN, BETWEEN, CONTAINS, ICONTAINS}');
      }
    }
    if (opToken.kind === 'keyword') {
      switch (opToken.keyword) {
        case 'in':
          return { kind: 'in', negated, lhs, values: this.parseArray(), pos };
        case 'between': {
          const lower = this.parseLiteral('{NUMBER, DATETIME}');
          if (lower.kind !== 'number' && lower.kind !== 'datetime')
            this.mismatch(this.tokens[this.index - 1]!, '{NUMBER, DATETIME}');
          this.expectKeyword('and');
          const expected = lower.kind === 'number' ? 'NUMBER' : 'DATETIME';
          const upper = this.parseLiteral(expected);
          if (upper.kind !== lower.kind) this.mismatch(this.tokens[this.index - 1]!, expected);
          return { kind: 'between', negated, lhs, lower, upper, pos };
        }
        case 'contains':
        case 'icontains': {
          const rhs = this.parseLiteral('{STRING, NUMBER}');
          if (rhs.kind !== 'string' && rhs.kind !== 'number')
            this.mismatch(this.tokens[this.index - 1]!, '{STRING, NUMBER}');
          return { kind: 'contains', negated, caseInsensitive: opToken.keyword === 'icontains', lhs, rhs, pos };
        }
        default:
          break;
      }
    }
    return this.mismatch(opToken, EXPECT_OPERATOR);
  }

  private parseArray(): Literal[] {
    this.expect('lbracket', '[');
    const values: Literal[] = [];
    const first = this.parseLiteral('{STRING, NUMBER, DATETIME}');
    if (first.kind !== 'string' && first.kind !== 'number' && first.kind !== 'datetime') {
      this.mismatch(this.tokens[this.index - 1]!, '{STRING, NUMBER, DATETIME}');
    }
    values.push(first);
    const expected = first.kind.toUpperCase();
    while (this.peek().kind === 'comma') {
      this.next();
      const value = this.parseLiteral(expected);
      if (value.kind !== first.kind) {
        this.failAt(
          value.pos,
          `mismatched input ${describe(this.tokens[this.index - 1]!)} expecting ${expected} (all values of an in list have the type of the first)`,
        );
      }
      if (values.length >= MAX_IN_VALUES) this.failAt(value.pos, `in list has more than ${MAX_IN_VALUES} values`);
      values.push(value);
    }
    const close = this.next();
    if (close.kind !== 'rbracket') this.mismatch(close, "{',', ']'}");
    return values;
  }

  private parseLiteral(expecting: string): Literal {
    const token = this.next();
    switch (token.kind) {
      case 'string':
        return { kind: 'string', value: token.value, pos: token.pos };
      case 'number':
        return { kind: 'number', value: token.value, isInteger: token.isInteger, text: token.text, pos: token.pos };
      case 'datetime':
        return { kind: 'datetime', ms: token.ms, text: token.text, pos: token.pos };
      case 'keyword':
        if (token.keyword === 'true' || token.keyword === 'false') {
          return { kind: 'bool', value: token.keyword === 'true', pos: token.pos };
        }
        if (token.keyword === 'null') return { kind: 'null', pos: token.pos };
        break;
      default:
        break;
    }
    return this.mismatch(token, expecting);
  }
}

/**
 * Parses a ZitiQL filter. An empty (or whitespace-only) filter is the query `true`.
 * Throws QueryError('INVALID_FILTER') whose reason starts with `line L:C` and whose `position` locates the error.
 */
export function parseQuery(text: string): Query {
  return new Parser(tokenize(text), text, 'filter').parseTop();
}

/** Parses the `sort` query param as OpenZiti does (`true sort by <sort>`), with positions inside the param. */
export function parseSortSpec(text: string): Query {
  return new Parser(tokenize(text, 'sort'), text, 'sort').parseSortSpec();
}
