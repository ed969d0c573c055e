import { describe, expect, it } from 'vitest';
import type { ApiError } from './errors.js';
import { JSON_PARSE_FAILED, MAX_JSON_DEPTH, parseJsonBody, scanJson, wellFormedJson } from './json-body.js';

const buf = (s: string) => Buffer.from(s, 'utf8');

describe('scanJson', () => {
  it('counts nesting outside strings only, escapes included', () => {
    expect(scanJson(buf('{"a":[1,{"b":[]}]}')).depth).toBe(4);
    expect(scanJson(buf('{"a":"[[[{{{\\"[[["}')).depth).toBe(1);
    expect(scanJson(buf('"\\\\"')).depth).toBe(0);
    expect(scanJson(buf('[[["\\\\"],[[]]]]')).depth).toBe(4);
  });

  it('spots surrogate escapes, not other \\u escapes', () => {
    expect(scanJson(buf('{"a":"\\u00e9\\uD7FF\\uE000"}')).surrogateEscape).toBe(false);
    expect(scanJson(buf('{"a":"\\ud800"}')).surrogateEscape).toBe(true);
    expect(scanJson(buf('{"a":"\\uDFFF"}')).surrogateEscape).toBe(true);
    expect(scanJson(buf('{"a":"\\\\ud800"}')).surrogateEscape).toBe(false); // an escaped backslash, then text
  });

  it('stops at the bound and names the top-level key it is under', () => {
    const deep = `{"x":1,"tags":{"k":${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}}}`;
    const scan = scanJson(buf(deep));
    expect(scan.depth).toBe(MAX_JSON_DEPTH + 1);
    expect(scan.field).toBe('tags');
    const array = `["a","b",${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}]`;
    expect(scanJson(buf(array)).field).toBe(''); // a top-level array has no keys
  });
});

describe('parseJsonBody', () => {
  it('replaces lone surrogates in values and keys; later equal keys win; pairs stay', () => {
    const v = parseJsonBody(
      buf('{"a\\ud800":1,"a\\udfff":2,"s":["x\\ud83d\\ude00y","\\udc00"],"__proto__":{"p":"\\ud801"}}'),
    );
    expect(v).toEqual(JSON.parse('{"a\\ufffd":2,"s":["x\\ud83d\\ude00y","\\ufffd"],"__proto__":{"p":"\\ufffd"}}'));
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.hasOwn(v as object, '__proto__')).toBe(true);
  });

  it('bad JSON is COULD_NOT_PARSE_BODY, too deep is COULD_NOT_VALIDATE', () => {
    const parse = (s: string) => {
      try {
        parseJsonBody(buf(s));
        return null;
      } catch (err) {
        return (err as ApiError).code;
      }
    };
    expect(parse('{"a":')).toBe('COULD_NOT_PARSE_BODY');
    expect(parse('['.repeat(MAX_JSON_DEPTH + 1))).toBe('COULD_NOT_VALIDATE');
    expect(parse(`${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`)).toBeNull();
  });

  it('a parse error does not quote the body (a credential sent unquoted is not echoed)', () => {
    for (const body of ['{"password":Sup3rSecret}', 'Sup3rSecret', '{"username":"admin" "password":"Sup3rSecret"']) {
      let err: ApiError | null = null;
      try {
        parseJsonBody(buf(body));
      } catch (e) {
        err = e as ApiError;
      }
      expect(err?.code).toBe('COULD_NOT_PARSE_BODY');
      expect(JSON.stringify(err?.cause)).not.toContain('Sup3r');
      expect(err?.cause).toEqual({ code: 'UNHANDLED', message: JSON_PARSE_FAILED });
    }
  });

  it('wellFormedJson leaves well-formed values as they are', () => {
    const v = { a: ['b', 1, null, { c: 'd' }] };
    expect(wellFormedJson(v)).toBe(v);
    expect(v).toEqual({ a: ['b', 1, null, { c: 'd' }] });
  });
});
