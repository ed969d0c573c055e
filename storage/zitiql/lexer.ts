// Hand-written ZitiQL lexer (tokens of openziti/ziti controller/storage/zitiql/ZitiQl.g4).
// Whitespace is [ \t\r\n] and separates tokens; keywords are case-insensitive; identifiers may be 'quoted'.

import { parseRfc3339 } from './datetime.js';
import { assert, QueryError, type SourcePosition } from './errors.js';

export const KEYWORDS = [
  'and',
  'or',
  'not',
  'in',
  'between',
  'contains',
  'icontains',
  'true',
  'false',
  'null',
  'anyof',
  'allof',
  'count',
  'isempty',
  'asc',
  'desc',
  'sort',
  'by',
  'skip',
  'limit',
  'none',
  'where',
  'from',
] as const;
export type Keyword = (typeof KEYWORDS)[number];
const KEYWORD_SET: ReadonlySet<string> = new Set(KEYWORDS);

export type Token =
  | { kind: 'lparen' | 'rparen' | 'lbracket' | 'rbracket' | 'comma' | 'eof'; text: string; pos: SourcePosition }
  | { kind: 'op'; op: '=' | '!=' | '<' | '<=' | '>' | '>='; text: string; pos: SourcePosition }
  | { kind: 'string'; value: string; text: string; pos: SourcePosition }
  | { kind: 'number'; value: number; isInteger: boolean; text: string; pos: SourcePosition }
  | { kind: 'datetime'; ms: number; text: string; pos: SourcePosition }
  | { kind: 'ident'; name: string; quoted: boolean; text: string; pos: SourcePosition }
  | { kind: 'keyword'; keyword: Keyword; text: string; pos: SourcePosition };

/** Longest filter text accepted (a long `id in [...]` list still fits). */
export const MAX_FILTER_CHARS = 65_536;

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?(?:0|[1-9][0-9]*))?/y;
const WORD = /[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_][A-Za-z0-9_-]*)*/y;
const IDENT_CONTINUE = /[A-Za-z0-9_.]/;

function isWhitespace(ch: string): boolean {
  return ch === ' ' || ch === '\n' || ch === '\t' || ch === '\r';
}

/** Escapes a token text for an error message. */
export function displayText(text: string): string {
  return text.replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/\t/g, '\\t');
}

class Lexer {
  private offset = 0;
  private line = 1;
  private lineStart = 0;
  readonly tokens: Token[] = [];

  constructor(
    private readonly text: string,
    private readonly field: string,
  ) {}

  private position(offset: number): SourcePosition {
    assert(offset >= this.lineStart, 'position before the current line');
    return { line: this.line, column: offset - this.lineStart, offset };
  }

  private fail(offset: number, reason: string): never {
    const pos = this.position(offset);
    throw new QueryError('INVALID_FILTER', `line ${pos.line}:${pos.column} ${reason}`, {
      field: this.field,
      value: this.text,
      position: pos,
    });
  }

  private recognitionError(offset: number): never {
    const ch = this.text[offset] ?? '';
    return this.fail(offset, `token recognition error at: '${displayText(ch)}'`);
  }

  run(): Token[] {
    const text = this.text;
    // every iteration consumes at least one character or throws, so the loop is bounded by text.length
    while (this.offset < text.length) {
      const start = this.offset;
      const ch = text[start]!;
      if (isWhitespace(ch)) {
        this.offset++;
        if (ch === '\n') {
          this.line++;
          this.lineStart = this.offset;
        }
        continue;
      }
      const pos = this.position(start);
      switch (ch) {
        case '(':
          this.push({ kind: 'lparen', text: ch, pos });
          continue;
        case ')':
          this.push({ kind: 'rparen', text: ch, pos });
          continue;
        case '[':
          this.push({ kind: 'lbracket', text: ch, pos });
          continue;
        case ']':
          this.push({ kind: 'rbracket', text: ch, pos });
          continue;
        case ',':
          this.push({ kind: 'comma', text: ch, pos });
          continue;
        case '=':
          this.push({ kind: 'op', op: '=', text: ch, pos });
          continue;
        case '!':
          if (text[start + 1] !== '=') this.recognitionError(start);
          this.push({ kind: 'op', op: '!=', text: '!=', pos });
          continue;
        case '<':
        case '>': {
          const op = text[start + 1] === '=' ? (`${ch}=` as '<=' | '>=') : (ch as '<' | '>');
          this.push({ kind: 'op', op, text: op, pos });
          continue;
        }
        case '"':
          this.lexString(pos);
          continue;
        case "'":
          this.lexQuotedIdentifier(pos);
          continue;
        default:
          break;
      }
      if (ch === '-' || (ch >= '0' && ch <= '9')) {
        this.lexNumber(pos);
        continue;
      }
      if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
        this.lexWord(pos);
        continue;
      }
      this.recognitionError(start);
    }
    this.tokens.push({ kind: 'eof', text: '<EOF>', pos: this.position(this.offset) });
    return this.tokens;
  }

  private push(token: Token): void {
    this.tokens.push(token);
    this.offset = token.pos.offset + token.text.length;
    assert(this.offset <= this.text.length, 'token past the end of the input');
  }

  private lexString(pos: SourcePosition): void {
    const text = this.text;
    let i = pos.offset + 1;
    let value = '';
    // bounded by text.length: i strictly increases
    while (true) {
      if (i >= text.length)
        this.fail(
          pos.offset,
          `unterminated string starting at: '${displayText(text.slice(pos.offset, pos.offset + 20))}'`,
        );
      const c = text[i]!;
      if (c === '"') break;
      if (c === '\\') {
        const e = text[i + 1];
        switch (e) {
          case '"':
            value += '"';
            break;
          case '\\':
            value += '\\';
            break;
          case 'f':
            value += '\f';
            break;
          case 'n':
            value += '\n';
            break;
          case 'r':
            value += '\r';
            break;
          case 't':
            value += '\t';
            break;
          default:
            this.failInLine(
              pos,
              i,
              `invalid escape sequence '\\${displayText(e ?? '')}' in string (allowed: \\" \\\\ \\f \\n \\r \\t)`,
            );
        }
        i += 2;
        continue;
      }
      if (c.charCodeAt(0) < 0x20) this.failInLine(pos, i, 'control character in string (use an escape sequence)');
      value += c;
      i++;
    }
    const raw = text.slice(pos.offset, i + 1);
    this.push({ kind: 'string', value, text: raw, pos });
  }

  /** Fails at an offset on the current line (strings and quoted identifiers may not span lines unescaped). */
  private failInLine(tokenPos: SourcePosition, offset: number, reason: string): never {
    const pos: SourcePosition = { line: tokenPos.line, column: tokenPos.column + (offset - tokenPos.offset), offset };
    throw new QueryError('INVALID_FILTER', `line ${pos.line}:${pos.column} ${reason}`, {
      field: this.field,
      value: this.text,
      position: pos,
    });
  }

  private lexQuotedIdentifier(pos: SourcePosition): void {
    const text = this.text;
    const close = text.indexOf("'", pos.offset + 1);
    if (close < 0) this.fail(pos.offset, "unterminated quoted identifier (missing closing ')");
    const name = text.slice(pos.offset + 1, close);
    if (!/^[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_][A-Za-z0-9_ -]*)*$/.test(name)) {
      this.failInLine(pos, pos.offset + 1, `invalid quoted identifier '${displayText(name)}'`);
    }
    this.push({ kind: 'ident', name, quoted: true, text: text.slice(pos.offset, close + 1), pos });
  }

  private lexNumber(pos: SourcePosition): void {
    NUMBER.lastIndex = pos.offset;
    const m = NUMBER.exec(this.text);
    if (m === null) this.recognitionError(pos.offset);
    const raw = m[0];
    const next = this.text[pos.offset + raw.length];
    if (next !== undefined && IDENT_CONTINUE.test(next)) this.recognitionError(pos.offset + raw.length);
    const value = Number(raw);
    const isInteger = !/[.eE]/.test(raw);
    this.push({ kind: 'number', value, isInteger, text: raw, pos });
  }

  private lexWord(pos: SourcePosition): void {
    WORD.lastIndex = pos.offset;
    const m = WORD.exec(this.text);
    assert(m !== null, 'a word starts with a letter');
    const raw = m[0];
    const lower = raw.toLowerCase();
    if (lower === 'datetime' && this.text[pos.offset + raw.length] === '(') {
      this.lexDatetime(pos, pos.offset + raw.length + 1);
      return;
    }
    if (KEYWORD_SET.has(lower)) {
      this.push({ kind: 'keyword', keyword: lower as Keyword, text: raw, pos });
      return;
    }
    this.push({ kind: 'ident', name: raw, quoted: false, text: raw, pos });
  }

  private lexDatetime(pos: SourcePosition, contentStart: number): void {
    const text = this.text;
    const close = text.indexOf(')', contentStart);
    if (close < 0 || text.slice(contentStart, close).includes('\n')) {
      this.fail(pos.offset, "unterminated datetime( literal (missing ')')");
    }
    const content = text.slice(contentStart, close);
    const trimmed = content.replace(/^[ \t\r]+/, '');
    const lead = content.length - trimmed.length;
    const parsed = parseRfc3339(trimmed.replace(/[ \t\r]+$/, ''));
    if (!parsed.ok) this.failInLine(pos, contentStart + lead, `invalid datetime: ${parsed.reason}`);
    this.push({ kind: 'datetime', ms: parsed.ms, text: text.slice(pos.offset, close + 1), pos });
  }
}

/** Splits filter text into tokens, ending with an `eof` token. Throws QueryError('INVALID_FILTER'). */
export function tokenize(text: string, field = 'filter'): Token[] {
  if (text.length > MAX_FILTER_CHARS) {
    throw new QueryError(
      'INVALID_FILTER',
      `${field} is ${text.length} characters long, the maximum is ${MAX_FILTER_CHARS}`,
      {
        field,
        value: text,
        position: { line: 1, column: 0, offset: 0 },
      },
    );
  }
  return new Lexer(text, field).run();
}
